"""How many threads the embedding model runs on, decided in one place for a local run and for a farm worker.

A local run takes `--threads` (default: every core); a worker takes `--torch-threads` (default 1, since a worker
shares its machine with others). Either way the count is written once into the process's environment, where
every child and every backend reads it: torch's pool, ONNX Runtime's sessions (`model_threads`), OpenMP.
"""

from __future__ import annotations

import os

#: The variable that carries the decided count to the embedders and to a worker's pool processes.
THREADS_VARIABLE = "MEMFARM_TORCH_THREADS"


def use_threads(threads: int, *, keep_omp: bool = False) -> int:
    """Decide this process's model threads: `threads` for the model's pools from now on, and for every process it
    starts. `keep_omp`: leave an `OMP_NUM_THREADS` the machine already sets (a worker, under its host's rules)."""
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    os.environ[THREADS_VARIABLE] = str(threads)
    if keep_omp:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    else:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    apply_threads()
    return threads


def apply_threads() -> None:
    """Set torch's pool to the decided count (a worker's pool process does so as it starts); no count, no change."""
    threads = os.environ.get(THREADS_VARIABLE)
    if not threads:
        return
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(int(threads))


def model_threads() -> int:
    """The decided count (`use_threads`), else every core: what ONNX Runtime's sessions are given."""
    return int(os.environ.get(THREADS_VARIABLE) or 0) or os.cpu_count() or 1
