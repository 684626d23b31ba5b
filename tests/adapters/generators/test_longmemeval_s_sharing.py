"""The generator's session sharing: by default it repeats itself more than the real file; asked for the real
file's distinct share, it comes close to it."""

import pytest

from adapters.generators.longmemeval_s import DISTINCT_SESSION_SHARE, iter_questions


def _distinct_share(questions) -> float:
    occurrences, distinct = 0, set()
    for question in questions:
        ids = list(dict.fromkeys(question["haystack_session_ids"]))
        occurrences += len(ids)
        distinct.update(ids)
    return len(distinct) / occurrences


def test_a_distinct_share_asked_for_is_about_what_the_file_holds():
    default = _distinct_share(iter_questions(80, seed=2, scale=0.3))
    real_like = _distinct_share(iter_questions(80, seed=2, scale=0.3, distinct_share=DISTINCT_SESSION_SHARE))
    sparse = _distinct_share(iter_questions(80, seed=2, scale=0.3, distinct_share=0.95))
    assert default < 0.7 < real_like < sparse
    assert abs(real_like - DISTINCT_SESSION_SHARE) < 0.05


@pytest.mark.parametrize("share", [0.0, 1.0, -0.2, 1.5])
def test_a_share_outside_zero_and_one_is_refused(share):
    with pytest.raises(ValueError, match="distinct_share"):
        next(iter_questions(3, distinct_share=share))
