"""RealMem (Bian et al., ACL 2026 Findings): one item per persona, memory growing one session at a time.

`reader` builds a persona's steps and its queries' gold (the sessions of `memory_session_uuids`, and their
source turns where a memory point names one); `profile` is RealMem's own scoring of the same gold.
"""

from adapters.benchmarks import register
from adapters.benchmarks.contract import Benchmark, Kind
from adapters.benchmarks.realmem.profile import REALMEM
from adapters.benchmarks.realmem.reader import RealMem
from adapters.defaults import EXPECTED_TEXT_PROFILE

BENCHMARK = register(Benchmark(
    "realmem", "RealMem", "dataset/*_dialogues_256k.json (AvatarMemory/RealMemBench), a file or the folder",
    "persona", Kind.STEPPED, RealMem, reads_folders=True, group_key="question_type,item_id",
    rendering="'{speaker}: {content}'; memory grows one session at a time, each after its queries",
    profiles=(REALMEM.name, EXPECTED_TEXT_PROFILE), default_profile=REALMEM.name,
    shared_corpus=True, memoria_weights="realmem.json"))
