"""`memfarm bench open-files`: the open files of a long run counted item by item under a small `ulimit -n`; a
system that keeps a handle per item shows a slope there, one that releases its handles stays flat."""

import json

from coordinator.benches.open_files import run_open_files_bench

LEAKY = '''
import os

class Leaky:
    """Keeps one more open file after every item, as a store never closed would."""
    name = "leaky"

    def __init__(self):
        self.kept, self.held = [], []

    def reset(self):
        self.kept.append(open(os.devnull))
        self.held = []

    def ingest(self, docs):
        self.held += [d["external_id"] for d in docs]

    def retrieve(self, label, query, top_k):
        return [{"external_id": e, "score": 1.0} for e in self.held[:top_k]]
'''


def test_a_system_that_releases_its_handles_stays_flat(tmp_path):
    table = run_open_files_bench("random", questions=8, scale=0.02, nofile=64, workdir=tmp_path / "work",
                                 output=tmp_path / "flat.json")
    data = json.loads((tmp_path / "flat.json").read_text())
    assert data["items"] == data["ok"] == 8 and data["complete"]
    assert data["open_files_last_quarter_max"] == data["open_files_first_quarter_max"]
    assert "under ulimit -n 64" in table and data["nofile"] == 64


def test_a_system_that_keeps_a_handle_per_item_shows_a_slope(tmp_path):
    leaky = tmp_path / "leaky.py"
    leaky.write_text(LEAKY)
    run_open_files_bench(f"{leaky}:Leaky", questions=12, scale=0.02, nofile=64, workdir=tmp_path / "work",
                         output=tmp_path / "leaky.json")
    data = json.loads((tmp_path / "leaky.json").read_text())
    counts = data["open_files_per_item"]
    assert len(counts) == 12 and counts == sorted(counts) and counts[-1] - counts[0] >= 11
