"""One real LoCoMo conversation, cut lean, run through `memfarm run locomo`: what every outside system's end-to-end
test does here and on a farm."""

import json

from click.testing import CliRunner

from coordinator.cli import main

SESSIONS_KEPT = 6  # a real conversation cut to its first sessions and the questions they answer: lean in CI


def one_conversation(locomo_path, tmp_path, sessions: int = SESSIONS_KEPT):
    """The first real conversation's first `sessions` sessions, with the questions whose evidence lies in them."""
    conversation = json.loads(locomo_path.read_text())[0]
    talk = conversation["conversation"]
    kept = {f"D{n}" for n in range(1, sessions + 1)}
    for key in [k for k in talk if k.startswith("session_") and k.split("_")[1] not in
                {str(n) for n in range(1, sessions + 1)}]:
        del talk[key]
    conversation["qa"] = [q for q in conversation["qa"]
                          if q.get("evidence") and all(str(e).split(":")[0] in kept for e in q["evidence"])]
    path = tmp_path / "conv1.json"
    path.write_text(json.dumps([conversation]))
    return path


def run_locomo(tmp_path, name, dataset, *options, env=None):
    """`memfarm run locomo` on `dataset`; its results file and manifest."""
    out = tmp_path / f"{name}.json"
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(dataset), *options, "--output", str(out)],
                                env=env)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), json.loads((tmp_path / f"{name}.manifest.json").read_text())


def rankings(results):
    return {r["question_id"]: [c["id"] for c in r.get("candidates", [])] for r in results["records"]}


def need(module: str, extra: str) -> None:
    """Skip a test whose system's package is not installed (fail under CI=true)."""
    from tests.helpers import skip_outside_ci

    try:
        __import__(module)
    except ImportError:
        skip_outside_ci(f"{module} is not installed (`make test` installs it; pip install -e '.[{extra}]')")
