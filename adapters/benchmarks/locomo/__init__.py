"""LoCoMo (Maharana et al., ACL 2024): one item per conversation; every question asks that one memory.

`reader` normalises its evidence ids (`'D8:6; D9:17'`, `'D:11:26'`, `D30:05`), drops those that match no turn,
and treats category 5 (adversarial) as abstention.
"""

from adapters.benchmarks import register
from adapters.benchmarks.contract import Benchmark, Kind
from adapters.benchmarks.locomo.reader import LoCoMo

BENCHMARK = register(Benchmark(
    "locomo", "LoCoMo", "locomo10.json (snap-research/LoCoMo)", "conversation", Kind.WHOLE_HISTORY, LoCoMo,
    rendering="'{speaker}: {text}' plus ' [shares a photo: {caption}]' where the turn shares an image"))
