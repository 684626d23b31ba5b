"""Any two runs side by side: every pair of a group's complete runs, and each run of a group against each run of
another question set of the same data, on the questions both hold, on the group's headline metric
(`headline.headline_of`: its benchmark's). Each table is one Holm family (`verdicts.adjust`: one metric, one
table), which every verdict says; the board writes a page per pair."""

from __future__ import annotations

from coordinator.results import compare, verdicts


def _paired_rows(group: dict) -> list[dict]:
    return [r for r in group["rows"] if r["run"]["complete"] and r["strict"] is not None]


def strict_values(run: dict) -> dict:
    """The headline metric per question of a run as the board loaded it (`data.load_run`: its `strict`), None where
    not scored."""
    return {qid: answer.get("strict") if answer["status"] == "scored" else None
            for qid, answer in run["runs_of"].items()}


def _judge(pairs: list[dict]) -> list[dict]:
    verdicts.adjust(pairs)
    for entry in pairs:
        entry["outcome"], entry["verdict"] = verdicts.outcome(entry), verdicts.verdict(entry)
    return pairs


def all_pairs(group: dict, *, resamples: int = compare.DEFAULT_RESAMPLES,
              seed: int = compare.DEFAULT_SEED) -> list[dict]:
    """Every pair of the group's paired runs (complete, scored on the headline metric), the higher-placed as the
    baseline, compared on the group's headline metric by `compare.paired`; Holm's adjustment runs over every pair
    of the group (`verdicts.adjust`: one metric, one table), which each pair's verdict says."""
    paired, headline = _paired_rows(group), group["headline"]
    values = {r["position"]: strict_values(r["run"]) for r in paired}
    pairs = []
    for i, first in enumerate(paired):
        for second in paired[i + 1:]:
            entry = compare.paired(values[first["position"]], values[second["position"]],
                                   hit_or_miss=headline["hit_or_miss"], resamples=resamples, seed=seed)
            pairs.append({"metric": headline["metric"], "baseline": first["label"], "system": second["label"],
                          "first": first["position"], "second": second["position"], **entry})
    return _judge(pairs)


def shared_pairs(group: dict, other: dict, *, resamples: int = compare.DEFAULT_RESAMPLES,
                 seed: int = compare.DEFAULT_SEED) -> dict | None:
    """Every run of `group` against every run of `other`, a group of the same dataset and corpus whose question
    set differs (a run cut short by --limit, a sample), on the questions both sets hold: None where the groups
    do not share a dataset, profile and corpus or share no question. Holm's adjustment runs over the pairs of
    this table (`verdicts.adjust`), which each verdict says."""
    same = ("benchmark", "dataset checksum", "scoring profile", "corpus")
    if group["judged"] or other["judged"] or any(group["pairing"][k] != other["pairing"][k] for k in same):
        return None
    shared = set(group["question_ids"]) & set(other["question_ids"])
    if not shared:
        return None
    mine, theirs, headline = _paired_rows(group), _paired_rows(other), group["headline"]
    pairs = []
    for first in mine:
        base = {q: v for q, v in strict_values(first["run"]).items() if q in shared}
        for second in theirs:
            values = {q: v for q, v in strict_values(second["run"]).items() if q in shared}
            entry = compare.paired(base, values, hit_or_miss=headline["hit_or_miss"], resamples=resamples,
                                   seed=seed)
            pairs.append({"metric": headline["metric"], "baseline": f'group {group["number"]} #{first["position"]} '
                          f'{first["label"]}', "system": f'group {other["number"]} #{second["position"]} '
                          f'{second["label"]}', "first": first["position"], "second": second["position"], **entry})
    return {"group": group["number"], "other": other["number"], "shared": len(shared),
            "only_here": len(set(group["question_ids"]) - shared),
            "only_there": len(set(other["question_ids"]) - shared), "pairs": _judge(pairs)}


