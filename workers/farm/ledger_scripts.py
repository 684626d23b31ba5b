"""The ledger's transitions in Lua: each runs in Redis as one step, so no two workers see half of one.

Each script is put after `LUA_NUMBERS` when registered (`workers.farm.ledger.Ledger`); its comment names
its KEYS and ARGV in the order the ledger passes them.
"""

#: Lua helpers put before every script that reads the ledger's numbers: a value that is not a number (planted
#: or damaged) reads as the given default instead of stopping the script. An item's attempt numbers only
#: grow; `attempt_base` in its info hash is the count when its budget was last reset by hand (`requeue
#: --failed`), and the cap applies to the attempts since.
LUA_NUMBERS = """
local function number(value, default)
  return tonumber(value or '') or default
end
local function attempt_base(info)
  return number(redis.call('HGET', info, 'attempt_base'), 0)
end
"""

# KEYS: state, attempts, info, lease. ARGV: item, worker, now, lease_seconds, stale_after, max_attempts.
# Begins an attempt from `queued`, or from `started` when that start is stale (its lease expired or it
# ran past the hard limit; a start time that is not a number counts as now, so only the lease decides).
# Returns {verdict, attempt}.
BEGIN = """
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then return {'unknown', 0} end
if state == 'done' or state == 'failed_final' then return {'finished', 0} end
if state == 'started' then
  local started = number(redis.call('HGET', KEYS[3], 'started_at') or '0', tonumber(ARGV[3]))
  if redis.call('EXISTS', KEYS[4]) == 1 and tonumber(ARGV[3]) - started < tonumber(ARGV[5]) then
    return {'busy', 0}
  end
elseif state ~= 'queued' then
  return {'not_queued', 0}
end
if not tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') then
  return {'damaged', 0}
end
local attempt = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
local used = attempt - attempt_base(KEYS[3])
if used > tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], ARGV[1], 'failed_final')
  redis.call('HSET', KEYS[3], 'finished_at', ARGV[3], 'error',
             'gave up after ' .. (used - 1) .. ' attempts: the process running it was lost each time')
  redis.call('DEL', KEYS[4])
  return {'cap', attempt}
end
redis.call('HSET', KEYS[1], ARGV[1], 'started')
redis.call('HSET', KEYS[3], 'worker', ARGV[2], 'started_at', ARGV[3], 'error', '')
redis.call('SET', KEYS[4], attempt, 'EX', ARGV[4])
return {'begun', attempt}
"""

# KEYS: state, attempts, lease. ARGV: item, attempt, lease_seconds. Renews the lease of the current attempt.
HEARTBEAT = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'started' then return 0 end
if number(redis.call('HGET', KEYS[2], ARGV[1]), 0) ~= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[3])
return 1
"""

# KEYS: state, attempts, info, lease, outcome, events. ARGV: item, attempt, now, outcome.
FINISH = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'started' then return 0 end
if number(redis.call('HGET', KEYS[2], ARGV[1]), 0) ~= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[5], ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], 'done')
redis.call('HSET', KEYS[3], 'finished_at', ARGV[3], 'error', '')
redis.call('DEL', KEYS[4])
redis.call('RPUSH', KEYS[6], ARGV[1])
return 1
"""

# KEYS: state, attempts, info, lease, events. ARGV: item, attempt, now, error, final ('1' or '0'),
# max_attempts (0: none). Final when asked, or when this attempt used the last of the item's budget.
FAIL = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'started' then return 0 end
if number(redis.call('HGET', KEYS[2], ARGV[1]), 0) ~= tonumber(ARGV[2]) then return 0 end
local cap = tonumber(ARGV[6])
if ARGV[5] == '1' or (cap > 0 and tonumber(ARGV[2]) - attempt_base(KEYS[3]) >= cap) then
  redis.call('HSET', KEYS[1], ARGV[1], 'failed_final')
else
  redis.call('HSET', KEYS[1], ARGV[1], 'failed')
end
redis.call('HSET', KEYS[3], 'finished_at', ARGV[3], 'error', ARGV[4])
redis.call('DEL', KEYS[4])
redis.call('RPUSH', KEYS[5], ARGV[1])
return 1
"""
