"""The farm's progress display: one line per change off a terminal, a redrawn board on one, warnings once."""

import io

from coordinator.running.progress import FarmProgress, board, duration


def _state(done=0, running=0, queued=10, failed=0, final=0, eta=None, **extra):
    return {"run_id": "r", "total": 10, "done": done, "running": running, "queued": queued, "failed": failed,
            "final_failures": final, "finished": done + final, "eta_seconds": eta, **extra}


def test_off_a_terminal_one_line_per_change_and_each_warning_once():
    out = io.StringIO()
    display = FarmProgress(out, live=False)
    display.update(_state())
    display.update(_state())  # nothing changed: nothing printed
    display.update(_state(running=2, queued=8))
    display.warn("item a: attempt lost, queued again")
    display.update(_state(done=1, running=2, queued=7, eta=95, throughput_per_minute=6.0))
    display.warn("item a: attempt lost, queued again")
    lines = out.getvalue().splitlines()
    assert lines == [
        "run r: 0/10 finished: done 0  running 0  queued 10  failed 0 (0 final)  ETA ?",
        "run r: 0/10 finished: done 0  running 2  queued 8  failed 0 (0 final)  ETA ?",
        "warning: item a: attempt lost, queued again",
        "run r: 1/10 finished: done 1  running 2  queued 7  failed 0 (0 final)  6.0 items/min  ETA 1m35s",
    ]


def test_on_a_terminal_the_board_is_redrawn_in_place():
    out = io.StringIO()
    display = FarmProgress(out, live=True)
    state = _state(done=4, running=1, queued=5, eta=3700,
                   worker_rates={"w1@h": {"done": 3, "per_minute": 2.5}, "w2@h": {"done": 1, "per_minute": None}},
                   slowest=[{"item_id": "q9", "worker": "w2@h", "age_seconds": 125.0}])
    display.update(state)
    display.update(state)
    text = out.getvalue()
    assert text.count("\x1b[4F\x1b[J") == 1, "the second board replaces the first (4 lines)"
    lines = board(state)
    assert lines[0].startswith("run r [############..................] 4/10 finished")
    assert lines[0].endswith("ETA 1h01m")
    assert "w1@h" in lines[1] and "2.5/min" in lines[1] and lines[2].rstrip().endswith("-")
    assert lines[3] == "  slowest running: q9 on w2@h for 2m05s"


def test_durations_read_like_a_person_would_say_them():
    assert [duration(x) for x in (None, 0, 59.6, 61, 3599, 7260)] == ["?", "0s", "1m00s", "1m01s", "59m59s",
                                                                       "2h01m"]


def test_progress_inside_an_item_says_questions_asked_a_rate_and_an_estimate():
    from coordinator.running.progress import QuestionProgress

    now = [100.0]
    progress = QuestionProgress(every=30.0, clock=lambda: now[0])
    # before its first question an item in steps encodes its history ahead: said, and left out of the rate
    assert progress.line("Kenta", 0, 150) == "Kenta: encoding its history ahead, then 150 questions"
    assert progress.due(0, 150)
    now[0] += 120.0
    assert progress.line("Kenta", 1, 150) == "Kenta: 1/150 questions, ETA ?" and progress.due(1, 150)
    now[0] += 10.0
    assert progress.line("Kenta", 50, 150) == "Kenta: 50/150 questions, 5.0/s, ETA 20s"
    assert not progress.due(50, 150), "off a terminal: a line at most every 30 s"
    now[0] += 20.0
    assert progress.due(100, 150) and progress.due(150, 150), "and the item's last question always"
    assert progress.line("Liam\x1b[2J", 1, 10).startswith("Liam\\x1b[2J: 1/10"), "a new item starts its own clock"
    assert progress.due(10, 10), "Liam's last question is said"
    now[0] += 1.0  # the next persona begins to encode right after the last one's final line: said all the same
    assert progress.line("Ethan", 0, 80).startswith("Ethan: encoding") and progress.due(0, 80)


def test_off_a_terminal_the_items_line_counts_the_whole_run_every_so_often_and_at_the_end():
    from coordinator.running.progress import ItemProgress

    now = [100.0]
    progress = ItemProgress(every=30.0, clock=lambda: now[0])
    now[0] += 5.0
    assert not progress.due(1, 500), "not a line per item: 500 one-question items are not 500 lines"
    now[0] += 55.0
    assert progress.due(20, 500)
    assert progress.line(20, 500) == "items: 20/500 finished, 20.0/min, ETA 24m00s"
    now[0] += 10.0
    assert not progress.due(25, 500) and progress.due(500, 500), "and the last item always"


def test_a_local_run_in_a_log_prints_the_runs_count_not_a_line_per_one_question_item(tmp_path):
    from click.testing import CliRunner

    from coordinator.cli import main
    from tests.helpers import write_dataset

    data = write_dataset(tmp_path / "lme.json", questions=3, seed=3, scale=0.02)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "recency",
                                       "--output", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    assert "items: 3/3 finished" in result.output
    assert "1/1 questions" not in result.output
