"""The model's thread count, decided by one function for a local run and for a worker."""

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("keep_omp, omp_after", [(False, "3"), (True, "7")])
def test_a_local_run_and_a_worker_decide_threads_through_one_function(keep_omp, omp_after):
    """A local run (`--threads 3`) overrides OpenMP's count; a worker (`--torch-threads 3`) keeps one its host
    sets. Both leave the count where torch, ONNX Runtime and the pool's processes read it."""
    code = ("import os, torch\n"
            "from adapters.threads import use_threads, model_threads\n"
            f"use_threads(3, keep_omp={keep_omp})\n"
            "print(model_threads(), torch.get_num_threads(), os.environ['OMP_NUM_THREADS'],"
            " os.environ['MEMFARM_TORCH_THREADS'])\n")
    env = {k: v for k, v in os.environ.items() if k != "MEMFARM_TORCH_THREADS"}
    env["OMP_NUM_THREADS"] = "7"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "3", omp_after, "3"]


def test_without_a_decision_onnx_runtime_gets_every_core_and_a_count_below_one_is_refused(monkeypatch):
    from adapters.threads import THREADS_VARIABLE, model_threads, use_threads

    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    assert model_threads() == (os.cpu_count() or 1)
    with pytest.raises(ValueError, match="at least 1"):
        use_threads(0)


def test_the_worker_the_run_and_the_embedders_share_the_variable():
    from adapters.threads import THREADS_VARIABLE
    from workers.farm.config import ENVIRON

    assert ENVIRON["torch_threads"] == THREADS_VARIABLE
