"""Run statistics on small fixtures with hand-computed values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.stats import (
    Trial,
    bootstrap_ci,
    ladder,
    ladder_noise,
    mean_of_items,
    paired_comparison,
    pass_hat_k,
    published_release,
    rounded,
    summarize,
    tie_ranks,
)


def test_mean_weighs_items_equally() -> None:
    # item means 0.5 and 1.0 -> 0.75, although the first item has more trials
    assert mean_of_items([[0.0, 1.0, 0.5, 0.5], [1.0]]) == pytest.approx(0.75)


def test_pass_hat_k_by_hand() -> None:
    # item A: 3 of 4 resolved; item B: 1 of 4; item C: 4 of 4
    items = [[True, True, True, False], [True, False, False, False], [True, True, True, True]]
    assert pass_hat_k(items, 1) == pytest.approx((3 / 4 + 1 / 4 + 1) / 3)
    assert pass_hat_k(items, 2) == pytest.approx((3 / 6 + 0 / 6 + 1) / 3)  # C(3,2)/C(4,2) = 3/6
    assert pass_hat_k(items, 3) == pytest.approx((1 / 4 + 0 + 1) / 3)  # C(3,3)/C(4,3) = 1/4
    assert pass_hat_k(items, 4) == pytest.approx((0 + 0 + 1) / 3)
    with pytest.raises(ValueError, match="at least 5 trials"):
        pass_hat_k(items, 5)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=20))
def test_pass_hat_k_is_non_increasing_in_k(items) -> None:
    values = [pass_hat_k(items, k) for k in range(1, 5)]
    assert all(a >= b - 1e-12 for a, b in zip(values, values[1:], strict=False))


def test_bootstrap_ci_contains_the_mean_and_narrows_with_more_items() -> None:
    pattern = [[1.0], [0.0], [0.5], [1.0], [0.0]]
    small, large = pattern * 4, pattern * 40
    m = mean_of_items(small)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s <= m <= hi_s and lo_l <= m <= hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s) / 2  # 10x the items: roughly sqrt(10) narrower
    assert bootstrap_ci(small) == (lo_s, hi_s)  # deterministic


def test_bootstrap_of_constant_scores_is_a_point() -> None:
    assert bootstrap_ci([[0.7, 0.7]] * 10) == (pytest.approx(0.7), pytest.approx(0.7))


def test_summarize_ranks_on_resolved_and_groups() -> None:
    items = {
        ("t1", 0): [Trial(1.0, True), Trial(0.9, True)],
        ("t1", 1): [Trial(0.6, False), Trial(1.0, True)],
        ("t2", 0): [Trial(0.5, False), Trial(0.5, False)],
    }
    out = summarize(items, trials=2, groups={"per_task": lambda key: key[0]})
    assert out["resolved"] == pytest.approx(round((1.0 + 0.5 + 0.0) / 3, 4))
    assert out["mean"] == pytest.approx(round((0.95 + 0.8 + 0.5) / 3, 4))
    assert out["per_task"] == {
        "t1": {"resolved": 0.75, "mean": 0.875, "n": 2},
        "t2": {"resolved": 0.0, "mean": 0.5, "n": 1},
    }
    assert out["pass_hat_k"] == {"1": round((1 + 0.5 + 0) / 3, 4), "2": round((1 + 0 + 0) / 3, 4)}
    assert out["episodes"] == 6 and out["items"] == 3
    lo, hi = out["resolved_ci95"]
    assert lo <= out["resolved"] <= hi


def test_the_ladder_releases_only_clear_improvements() -> None:
    assert ladder(0.6234, None) == 0.62  # a first submission is released, rounded to the margin
    assert ladder(0.6299, 0.62) is None  # not better by the margin: nothing new is released
    assert ladder(0.6312, 0.62) == 0.63
    assert ladder(0.40, 0.62) is None  # worse: the best stands


# ------------------------------------------------------------------------- issue #21


def test_one_rounding_rule_half_up_everywhere() -> None:
    """#21.6: the run page rounded 0.645 to 0.65 and the Ladder to 0.64 (Python's round() and a float
    division). One rule now: half up on the decimal value, whatever rounds it."""
    assert rounded(0.645, 2) == 0.65 and rounded(0.6449, 2) == 0.64 and rounded(0.125, 2) == 0.13
    assert rounded(0.64375, 4) == 0.6438 and rounded(2.5, 0) == 3.0
    assert ladder(0.645, None) == 0.65 == rounded(0.645, 2)
    assert summarize({("t", 0): [Trial(1.0, True)], ("t", 1): [Trial(0.0, False)]}, 1)["resolved"] == 0.5


def test_ladder_noise_is_keyed_gaussian_noise() -> None:
    """Each run's draw is fixed by the deployment's key and the run id (a crash and a re-summary give the
    same release), unknown without the key, Gaussian with the standard deviation it is given."""
    sd = 0.03
    draws = [ladder_noise(b"key", f"run_{i:04x}", sd) for i in range(4000)]
    assert ladder_noise(b"key", "run_0001", sd) == draws[1] and ladder_noise(b"other", "run_0001", sd) != draws[1]
    assert abs(sum(draws) / len(draws)) < 3 * sd / 4000**0.5
    assert (sum(d * d for d in draws) / len(draws)) ** 0.5 == pytest.approx(sd, rel=0.05)
    assert sum(abs(d) > 1.96 * sd for d in draws) / len(draws) == pytest.approx(0.05, abs=0.012)  # its tails
    assert ladder_noise(b"key", "run_0001", 2 * sd) == 2 * draws[1]


def test_the_ladder_decides_on_the_noisy_score() -> None:
    assert ladder(0.60, None, noise=0.013) == 0.61
    assert ladder(0.60, 0.60, noise=0.013) == 0.61  # the noisy score beats the best by the margin
    assert ladder(0.62, 0.60, noise=-0.02) is None
    assert ladder(0.999, None, noise=0.05) == 1.0 and ladder(0.001, None, noise=-0.05) == 0.0  # clipped


def test_a_test_release_publishes_one_number_and_what_follows_from_it() -> None:
    """Nothing a test run publishes depends on more than its released value and its size."""
    out = published_release(0.62, items=400, episodes=800, errors=3, noise_sd=0.03)
    assert set(out) == {"resolved", "resolved_ci95", "items", "episodes", "errors", "noise_scale"}
    lo, hi = out["resolved_ci95"]
    assert lo < 0.62 < hi and rounded(lo, 2) == lo and rounded(hi, 2) == hi
    assert out == published_release(0.62, items=400, episodes=800, errors=3, noise_sd=0.03)
    wider = published_release(0.62, items=400, episodes=800, errors=3, noise_sd=0.06)["resolved_ci95"]
    assert wider[0] < lo and wider[1] > hi  # the interval carries the draw


def test_a_paired_comparison_separates_what_overlapping_intervals_cannot() -> None:
    """#21.6: two agents 0.02 apart on the same 400 tickets, differing on 12 of them: their CIs overlap
    (rank bands tie them), the paired test on the same tickets does not."""
    a = [1.0] * 300 + [0.0] * 100
    b = a[:290] + [0.0] * 10 + a[300:302] + [1.0] * 2 + a[304:]
    assert mean_of_items([[x] for x in a]) - mean_of_items([[x] for x in b]) == pytest.approx(0.02)
    lo_a, _ = bootstrap_ci([[x] for x in a])
    _, hi_b = bootstrap_ci([[x] for x in b])
    assert lo_a < hi_b  # the intervals overlap
    paired = paired_comparison(a, b)
    assert paired.separated and paired.difference == pytest.approx(0.02)
    assert not paired_comparison(a, a).separated and not paired_comparison(b, a).separated


def test_tie_groups_follow_adjacent_comparisons() -> None:
    assert tie_ranks([True, False, True]) == [1, 2, 2, 4]
    assert tie_ranks([False, False]) == [1, 1, 1]
    assert tie_ranks([]) == [1]


def test_pages_print_numbers_with_the_same_rule() -> None:
    """The templates' ``rate`` filter is the API's rounding: a page never shows 0.64 for a 0.645 the
    Ladder releases as 0.65."""
    from service.lib.formatting import rate

    assert rate(0.645, 2) == "0.65" == f"{ladder(0.645, None):.2f}"
    assert rate(0.6445) == "0.645" and rate(None) == "–"


def test_the_baseline_and_the_episode_page_round_as_the_service_does() -> None:
    """#21.6 follow-up: ``baseline.py`` rounded with Python's round() (0.64375 → 0.6437: its binary value is
    below the half) and the episode page with "%.2f" (0.125 → 0.12, half to even): one rule everywhere now,
    half up on the decimal value (service.stats.rounded)."""
    from pathlib import Path
    from types import SimpleNamespace

    from jinja2 import Environment, FileSystemLoader

    from client.baseline import _row
    from service.lib.formatting import rate

    items = [[Trial(1.0, True)]] * 103 + [[Trial(0.0, False)]] * 57  # 103 / 160 = 0.64375
    assert _row("all", items, 1)["resolved"] == 0.6438 == rounded(103 / 160, 4)
    templates = Path(__file__).resolve().parents[2] / "service" / "lib" / "templates"
    env = Environment(loader=FileSystemLoader(templates), autoescape=True)
    env.filters["rate"] = rate
    grade = SimpleNamespace(
        resolved=False,
        score=0.0625,
        components=[
            SimpleNamespace(name="c", required=True, passed=True, earned=0.125, weight=0.375, detail="", clauses=[])
        ],
        clauses=[],
        grader_version="g",
    )
    state = SimpleNamespace(task_id="t", split="dev", seed=0, step_count=1, episode_status="done", run_id=None)
    step = SimpleNamespace(
        index=0,
        action={},
        observation=SimpleNamespace(history=[], tool_result=None, last_action_error=None),
        reward=0.125,
    )
    ep = SimpleNamespace(episode_id="e", state=state, rewards_hidden=False, ticket_text="", steps=[step], grade=grade)
    page = env.get_template("episode.html").render(ep=ep)
    assert '<span id="score">0.063</span>' in page  # "%.3f" printed 0.062
    assert '<td class="num">0.13</td>' in page and '<td class="num">0.38</td>' in page  # "%.2f": 0.12 and 0.38
