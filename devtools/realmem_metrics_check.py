"""`python -m devtools realmem-metrics`: the `realmem` profile's formulas against RealMem's own script.

RealMem's `eval/compute_auto_metrics_for_realmem.py` is loaded from a checkout of its repository (nothing of it
is copied here) and its `evaluate_retrieval` is called on the same rankings as the `realmem` profile (`adapters.metrics.level_metrics` with RealMem's nDCG):
seeded random rankings over a corpus of session ids, with gold of one to four sessions, at every K of its script
and of the farm. Its code uses `np.asfarray`, which NumPy 2 removed; the check gives it NumPy's own equivalent
(`np.asarray(x, dtype=float)`) and says so in its output.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import numpy as np

from adapters import metrics
from adapters.benchmarks.realmem import profile as realmem_metrics
from coordinator.benches.common import write_bench

SCRIPT = "eval/compute_auto_metrics_for_realmem.py"
KS = (1, 3, 5, 10, 20, 30, 50)


def load_their_script(checkout: Path):
    path = Path(checkout) / SCRIPT
    if not path.is_file():
        raise SystemExit(f"{path}: not found; give the folder of a RealMemBench checkout (--checkout)")
    shimmed = not hasattr(np, "asfarray")
    if shimmed:  # NumPy 2 removed it; this is its documented equivalent
        np.asfarray = lambda values: np.asarray(values, dtype=float)
    spec = importlib.util.spec_from_file_location("realmem_auto_metrics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, shimmed


def check(checkout: str | Path, output: str | Path, rankings: int = 500, seed: int = 7) -> str:
    theirs, shimmed = load_their_script(Path(checkout))
    rng = random.Random(seed)
    corpus = sorted(f"Topic_{n}:S{n % 7}_{n:02d}" for n in range(60))
    index = {sid: i for i, sid in enumerate(corpus)}
    worst, compared = 0.0, 0
    for _ in range(rankings):
        gold = rng.sample(corpus, rng.randint(1, 4))
        ranking = rng.sample(corpus, rng.randint(0, 50))
        ours = metrics.level_metrics(ranking, gold, KS, ndcg=realmem_metrics.ndcg_any)
        for k in KS:
            any_, all_, ndcg = theirs.evaluate_retrieval([index[s] for s in ranking], gold, corpus, k=k)
            for name, value in (("recall_any", any_), ("recall_all", all_), ("ndcg_any", ndcg)):
                worst = max(worst, abs(float(value) - ours[f"{name}@{k}"]))
                compared += 1
    data = {"script": SCRIPT, "checkout": str(checkout), "rankings": rankings, "seed": seed, "k_values": list(KS),
            "values_compared": compared, "largest_difference": worst, "numpy": np.__version__,
            "numpy_asfarray_shim": shimmed}
    path = write_bench("realmem_metrics_check", data, output)
    return (f"{compared} values on {rankings} rankings at k {', '.join(map(str, KS))}: largest difference {worst:.3g}"
            + (" (their np.asfarray given as np.asarray(x, dtype=float): NumPy 2 removed it)" if shimmed else "")
            + f"\nwrote {path}")
