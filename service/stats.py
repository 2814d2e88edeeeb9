"""Run statistics: resolved rate, mean score, pass^k, bootstrap confidence intervals, paired
comparisons and the tie groups they make, and the Ladder that decides which test scores are released.

Pure functions over plain numbers. An *item* is one ticket of a run (a task id and a seed); its
*trials* are the k episodes played on it, each an :class:`Trial` (partial score, resolved).
Items weigh equally; a bootstrap resamples items with their trials together (τ²-bench's unit of
analysis, Chatbot Arena's CI method). Runs are ranked on the **resolved rate**; the mean partial
score is shown beside it.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import random
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from math import comb
from statistics import NormalDist
from typing import Any, NamedTuple

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
Z95 = 1.959964  # the two-sided 95% normal quantile
SUMMARY_DECIMALS = 4  # every rate of a summary
PUBLISHED_DECIMALS = 2  # a test release is published at this precision (the Ladder's margin)
LADDER_MARGIN = 0.01  # a test score is released only when it beats the submitter's best by this much
# What one submitter key can ever learn about any one test ticket (issue #21.2, the repeated probe): every
# test run's score gets one Gaussian draw before the Ladder looks at it, and a key completes at most
# TEST_RUN_BUDGET test runs under one test key, ever. A run's output is then the Gaussian mechanism on a
# score that one ticket moves by 1/items, and TEST_RUN_BUDGET of them compose to μ-Gaussian differential
# privacy (Dong, Roth & Su 2019, "Gaussian Differential Privacy") with μ = √budget / (items · sd) — the noise
# is sized so that μ = LADDER_PRIVACY_MU whatever the budget: any guess of one ticket's answer from everything
# a key can be shown is right at most Φ(μ/2) = 0.520 of the time at even odds (chance: 0.5).
TEST_RUN_BUDGET = 3  # test runs per submitter key per test key, ever (TEST_RUN_BUDGET overrides it)
LADDER_PRIVACY_MU = 0.1


def rounded(value: float, decimals: int) -> float:
    """The one rounding rule of every published number: half up, on the decimal value as written
    (0.645 → 0.65; Python's ``round`` gives 0.64 or 0.65 depending on the float's binary tail)."""
    quantum = Decimal(1).scaleb(-decimals)
    return float(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))


class Trial(NamedTuple):
    score: float  # partial credit in [0, 1]
    resolved: bool  # every required check passed


def item_mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def mean_of_items(items: Sequence[Sequence[float]]) -> float:
    """The mean over items of each item's mean trial value."""
    if not items:
        raise ValueError("no items")
    return sum(item_mean(t) for t in items) / len(items)


def pass_hat_k(items: Sequence[Sequence[bool]], k: int) -> float:
    """τ²-bench's pass^k: the chance that k trials drawn without replacement from an item's n
    trials are all resolved, averaged over items: mean of C(c, k) / C(n, k).

    Non-increasing in k by construction. Every item needs at least k trials.
    """
    if not items:
        raise ValueError("no items")
    total = 0.0
    for trials in items:
        n = len(trials)
        if not 1 <= k <= n:
            raise ValueError(f"pass^{k} needs at least {k} trials per item, an item has {n}")
        total += comb(sum(1 for resolved in trials if resolved), k) / comb(n, k)
    return total / len(items)


def bootstrap_ci(
    items: Sequence[Sequence[float]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of :func:`mean_of_items`, resampling items (trials stay together).

    Deterministic for a given ``seed``.
    """
    if not items:
        raise ValueError("no items")
    means = [item_mean(t) for t in items]
    n = len(means)
    rng = random.Random(seed)
    stats = sorted(sum(rng.choices(means, k=n)) / n for _ in range(resamples))
    tail = (1.0 - confidence) / 2
    return stats[int(tail * (resamples - 1))], stats[int(round((1 - tail) * (resamples - 1)))]


def _r4(value: float) -> float:
    return rounded(value, SUMMARY_DECIMALS)


def _aggregate(items: Sequence[Sequence[Trial]]) -> dict[str, Any]:
    resolved = [[float(t.resolved) for t in trials] for trials in items]
    scores = [[t.score for t in trials] for trials in items]
    return {"resolved": _r4(mean_of_items(resolved)), "mean": _r4(mean_of_items(scores)), "n": len(items)}


def summarize(
    items: Mapping[tuple[str, int], Sequence[Trial]],
    trials: int,
    groups: Mapping[str, Callable[[tuple[str, int]], str]] | None = None,
) -> dict[str, Any]:
    """The summary of a finished run: resolved rate and mean score with CIs, pass^1..k, and both
    rates per named grouping (``groups`` maps a grouping name to a function from item key to label)."""
    values = list(items.values())
    resolved = [[float(t.resolved) for t in trials] for trials in values]
    scores = [[t.score for t in trials] for trials in values]
    out: dict[str, Any] = {
        "resolved": _r4(mean_of_items(resolved)),
        "resolved_ci95": [_r4(x) for x in bootstrap_ci(resolved)],
        "mean": _r4(mean_of_items(scores)),
        "ci95": [_r4(x) for x in bootstrap_ci(scores)],
        "pass_hat_k": {
            str(k): _r4(pass_hat_k([[t.resolved for t in v] for v in values], k)) for k in range(1, trials + 1)
        },
        "items": len(values),
        "episodes": sum(len(v) for v in values),
    }
    for name, label_of in (groups or {}).items():
        buckets: dict[str, list[Sequence[Trial]]] = {}
        for key, trials_ in items.items():
            buckets.setdefault(label_of(key), []).append(trials_)
        out[name] = {label: _aggregate(b) for label, b in sorted(buckets.items())}
    return out


def item_outcomes(items: Mapping[tuple[str, int], Sequence[Trial]]) -> list[float]:
    """Each item's resolved share, in the items' order: what a paired comparison of two runs reads
    (kept privately with the run, never published)."""
    return [sum(t.resolved for t in trials) / len(trials) for trials in items.values()]


class Paired(NamedTuple):
    difference: float  # mean over items of a - b
    z: float  # the difference over its standard error (inf when every item differs the same way)
    separated: bool  # a is ahead of b at 95% (two-sided)


def paired_comparison(a: Sequence[float], b: Sequence[float]) -> Paired:
    """Compare two runs on the same tickets: the per-item differences of their resolved shares, their
    mean and its standard error (a paired z-test; McNemar's with one trial). Shared tickets cancel, so a
    gap of one or two points between close agents is found where their intervals overlap."""
    if len(a) != len(b) or not a:
        raise ValueError("a paired comparison needs the same non-empty items on both sides")
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
    se = math.sqrt(var / n)
    z = mean / se if se > 0 else (math.inf if mean > 0 else -math.inf if mean < 0 else 0.0)
    return Paired(mean, z, z > Z95)


def unpaired_separated(a: float, b: float, n_a: int, n_b: int, extra_var: float = 0.0) -> bool:
    """Whether rate ``a`` is ahead of ``b`` at 95% when only the rates are known (test releases): a
    two-proportion z-test, each variance widened by ``extra_var`` (the release noise)."""
    var = a * (1 - a) / n_a + b * (1 - b) / n_b + 2 * extra_var
    return a - b > Z95 * math.sqrt(var) if var > 0 else a > b


def tie_ranks(separated_next: Sequence[bool]) -> list[int]:
    """Ranks of rows in board order, given for each adjacent pair whether the upper row is ahead of the
    next one: a row not separated from the row above shares its rank (one tie group)."""
    ranks = [1]
    for i, separated in enumerate(separated_next, start=1):
        ranks.append(i + 1 if separated else ranks[-1])
    return ranks


def ladder_noise_sd(budget: int, items: int, mu: float = LADDER_PRIVACY_MU) -> float:
    """The standard deviation of each test run's Gaussian draw that makes ``budget`` runs over ``items``
    tickets μ-GDP in every ticket: one ticket moves a score by 1/items, and k draws of this sd compose to
    μ = √k / (items · sd)."""
    if budget < 1 or items < 1:
        raise ValueError("a noise level needs a budget of at least one run and at least one ticket")
    return math.sqrt(budget) / (items * mu)


def ticket_guess_bound(mu: float = LADDER_PRIVACY_MU) -> float:
    """The best accuracy any guess of one ticket's binary answer can have at even odds, from everything
    a μ-GDP mechanism published: Φ(μ/2) (the two hypotheses are at best two unit Gaussians μ apart)."""
    return NormalDist().cdf(mu / 2)


def ladder_noise(key: bytes, run_id: str, sd: float) -> float:
    """The run's Gaussian draw of standard deviation ``sd``: fixed by the deployment's key and the run id
    (a re-summary after a crash releases the same value), unpredictable without the key."""
    digest = hmac.new(key, b"ladder-noise\x00" + run_id.encode(), hashlib.sha256).digest()
    u = (int.from_bytes(digest[:8], "big") + 0.5) / 2**64  # uniform on (0, 1), never 0 or 1
    return sd * NormalDist().inv_cdf(u)


def ladder(score: float, best: float | None, noise: float = 0.0, margin: float = LADDER_MARGIN) -> float | None:
    """The Ladder (Blum & Hardt 2015, "The Ladder: A Reliable Leaderboard for Machine Learning
    Competitions"), on a noisy score: a submitter's new test score plus its run's :func:`ladder_noise`
    is released — rounded half up to the margin — only when it beats their best released score by at
    least ``margin``; otherwise nothing new is released (returns None) and their best stands.

    Everything a run publishes is a function of ``score + noise`` and of earlier releases alone, so a
    key's runs compose as Gaussian mechanisms (:data:`LADDER_PRIVACY_MU`): exact scores let a submitter
    who knows most answers place a run's count on a rounding edge and read one ticket per release; noisy
    ones, within the key's budget of runs, do not."""
    noisy = min(1.0, max(0.0, score + noise))
    if best is not None and noisy < best + margin:
        return None
    step = Decimal(repr(margin))
    return float((Decimal(repr(noisy)) / step).quantize(Decimal(1), rounding=ROUND_HALF_UP) * step)


def released_ci(released: float, items: int, noise_sd: float) -> list[float]:
    """A 95% interval for a run's true resolved rate from its released value alone: Wilson's interval
    for ``items`` tickets, widened by the release's Gaussian draw (sd ``noise_sd``) and the rounding."""
    p, n = released, items
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    half = math.sqrt(half**2 + (Z95 * noise_sd) ** 2) + LADDER_MARGIN / 2
    return [rounded(max(0.0, centre - half), PUBLISHED_DECIMALS), rounded(min(1.0, centre + half), PUBLISHED_DECIMALS)]


def published_release(released: float, items: int, episodes: int, errors: int, noise_sd: float) -> dict[str, Any]:
    """What a test run publishes once the Ladder released it: the released value, an interval computed
    from it and the run's size, and what the submitter's agent did anyway (episodes, step-limit errors).
    No per-task, per-family or per-difficulty rate, no mean score, no pass^k: each is one more number
    per release, and exact per-task counts gave each ticket's label away (issue #21.2)."""
    return {
        "resolved": released,
        "resolved_ci95": released_ci(released, items, noise_sd),
        "items": items,
        "episodes": episodes,
        "errors": errors,
        "noise_scale": rounded(noise_sd, SUMMARY_DECIMALS),
    }
