"""Run statistics on small fixtures with hand-computed values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.stats import bootstrap_ci, mean_score, pass_hat_k, rank_bands, summarize


def test_mean_weighs_items_equally() -> None:
    # item means 0.5 and 1.0 -> 0.75, although the first item has more trials
    assert mean_score([[0.0, 1.0, 0.5, 0.5], [1.0]]) == pytest.approx(0.75)


def test_pass_hat_k_by_hand() -> None:
    # item A: 3 of 4 resolved; item B: 1 of 4; item C: 4 of 4 (threshold 0.8)
    items = [[1.0, 0.9, 0.8, 0.2], [1.0, 0.5, 0.0, 0.79], [1.0, 1.0, 1.0, 1.0]]
    assert pass_hat_k(items, 1) == pytest.approx((3 / 4 + 1 / 4 + 1) / 3)
    assert pass_hat_k(items, 2) == pytest.approx((3 / 6 + 0 / 6 + 1) / 3)  # C(3,2)/C(4,2) = 3/6
    assert pass_hat_k(items, 3) == pytest.approx((1 / 4 + 0 + 1) / 3)  # C(3,3)/C(4,3) = 1/4
    assert pass_hat_k(items, 4) == pytest.approx((0 + 0 + 1) / 3)
    with pytest.raises(ValueError, match="at least 5 trials"):
        pass_hat_k(items, 5)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 0.8, 1.0]), min_size=4, max_size=4), min_size=1, max_size=20))
def test_pass_hat_k_is_non_increasing_in_k(items) -> None:
    values = [pass_hat_k(items, k) for k in range(1, 5)]
    assert all(a >= b - 1e-12 for a, b in zip(values, values[1:]))


def test_bootstrap_ci_contains_the_mean_and_narrows_with_more_items() -> None:
    pattern = [[1.0], [0.0], [0.5], [1.0], [0.0]]
    small, large = pattern * 4, pattern * 40
    m = mean_score(small)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s <= m <= hi_s and lo_l <= m <= hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s) / 2  # 10x the items: roughly sqrt(10) narrower
    assert bootstrap_ci(small) == (lo_s, hi_s)  # deterministic


def test_bootstrap_of_constant_scores_is_a_point() -> None:
    assert bootstrap_ci([[0.7, 0.7]] * 10) == (pytest.approx(0.7), pytest.approx(0.7))


def test_rank_bands_tie_overlapping_intervals() -> None:
    ranks = rank_bands({
        "a": (0.90, 0.85, 0.95),
        "b": (0.88, 0.83, 0.93),  # overlaps a: tie
        "c": (0.60, 0.55, 0.65),  # clearly behind a and b
        "d": (0.58, 0.50, 0.70),  # overlaps c
    })
    assert ranks == {"a": 1, "b": 1, "c": 3, "d": 3}


def test_summarize_groups_and_counts() -> None:
    items = {("t1", 0): [1.0, 1.0], ("t1", 1): [0.0, 1.0], ("t2", 0): [0.5, 0.5]}
    out = summarize(items, trials=2, groups={"per_task": {k: k[0] for k in items}})
    assert out["mean"] == pytest.approx(round((1.0 + 0.5 + 0.5) / 3, 4))
    assert out["per_task"] == {"t1": {"mean": 0.75, "n": 2}, "t2": {"mean": 0.5, "n": 1}}
    assert out["pass_hat_k"] == {"1": round((1 + 0.5 + 0) / 3, 4), "2": round((1 + 0 + 0) / 3, 4)}
    assert out["episodes"] == 6 and out["items"] == 3
