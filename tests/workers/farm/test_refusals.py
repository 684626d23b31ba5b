"""What makes a worker refuse a run's items once it has built the system: other vectors, by signature or files."""

from types import SimpleNamespace

from workers.farm.run_meta import RunMeta
from workers.farm.tasks import incompatibility
from tests.factories import run_context

SIGNATURE = {"model_id": "m", "dimension": 384}


def staged_run(embedding_signature, model_files=None, system_config=None) -> RunMeta:
    """A run's metadata as a worker reads it, with what these checks compare."""
    context = run_context(group_key=None, system_config=system_config or {},
                          embedding_signature=embedding_signature)
    return RunMeta(created=0.0, max_attempts=1, task_time_limit=60, model_files=model_files, context=context)


def _system(files="a" * 64, signature=SIGNATURE):
    return SimpleNamespace(embedding_signature=signature, build_identity={"engine_code": "x", "model_files": files})


def test_the_same_signature_and_files_are_accepted():
    assert incompatibility(staged_run(SIGNATURE, "a" * 64), _system()) is None


def test_other_model_files_under_the_same_name_are_refused():
    refusal = incompatibility(staged_run(SIGNATURE, "b" * 64), _system())
    assert "model files of this worker (sha256 aaaaaaaaaaaa) differ from the run's (bbbbbbbbbbbb)" in refusal


def test_a_run_staged_before_files_were_recorded_is_judged_by_its_signature():
    assert incompatibility(staged_run(SIGNATURE), _system()) is None
    assert "embedding signature" in incompatibility(staged_run({"other": 1}), _system())


def test_the_run_records_the_model_files_a_worker_is_checked_against(tmp_path):
    from adapters.systems import make_system
    from coordinator.running.farm_run import run_meta
    from coordinator.running.spec import RunSpec
    from memoria.model_files import model_files_sha256
    from tests.helpers import write_dataset

    spec = RunSpec(benchmark="longmemeval", dataset=str(write_dataset(tmp_path / "d.json", questions=2)))
    meta = run_meta(spec, make_system("memoria"), broker="redis://x")
    assert meta.model_files == model_files_sha256() and len(meta.model_files) == 64


def test_another_model_is_refused_naming_both():
    run = {"model_id": "sentence-transformers/all-mpnet-base-v2", "dimension": 768}
    refusal = incompatibility(staged_run(run), _system())
    assert refusal == ("embedding model of this worker is m (384-d); the run wants "
                       "sentence-transformers/all-mpnet-base-v2 (768-d): start a worker with the run's --embedder")
