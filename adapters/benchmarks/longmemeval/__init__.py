"""LongMemEval-S (Wu et al., ICLR 2025): one item per question, its own haystack of sessions.

`reader` turns the file into items and knows the gold rules (answer sessions, expected text through the
companion file); `official` is LongMemEval's own scoring with its DCG variant, declared as the default profile in
`profile`.
"""

from adapters.benchmarks import register
from adapters.benchmarks.contract import Benchmark, Kind
from adapters.benchmarks.longmemeval.profile import OFFICIAL
from adapters.benchmarks.longmemeval.reader import LongMemEval
from adapters.defaults import EXPECTED_TEXT_PROFILE

BENCHMARK = register(Benchmark(
    "longmemeval", "LongMemEval-S", "longmemeval_s_cleaned.json (xiaowu0162/LongMemEval)", "question",
    Kind.WHOLE_HISTORY, LongMemEval, profiles=(EXPECTED_TEXT_PROFILE, OFFICIAL.name),
    default_profile=OFFICIAL.name, description="LongMemEval-S (generated)"))
