"""Run statistics: resolved rate, mean score, pass^k, bootstrap confidence intervals, rank bands,
and the Ladder that decides which test scores are released.

Pure functions over plain numbers. An *item* is one ticket of a run (a task id and a seed); its
*trials* are the k episodes played on it, each an :class:`Trial` (partial score, resolved).
Items weigh equally; a bootstrap resamples items with their trials together (τ²-bench's unit of
analysis, Chatbot Arena's CI method). Runs are ranked on the **resolved rate**; the mean partial
score is shown beside it.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from math import comb
from typing import Any, NamedTuple

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
PUBLISHED_DECIMALS = 2  # test-split aggregates are published at this precision
LADDER_MARGIN = 0.01  # a test score is released only when it beats the submitter's best by this much


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


def rank_bands(intervals: Mapping[str, tuple[float, float, float]]) -> dict[str, int]:
    """Ranks where statistical ties share a rank.

    ``intervals`` maps a row id to (value, lo, hi). A row's rank is 1 + the number of rows whose
    lower bound is above its upper bound — rows it is *significantly* behind (Chatbot Arena's rule).
    """
    lows = sorted(lo for _, lo, _ in intervals.values())  # O(n log n): one binary search per row
    return {
        rid: 1 + len(lows) - bisect_right(lows, hi) - (1 if lo > hi else 0)  # never counts the row itself
        for rid, (_, lo, hi) in intervals.items()
    }


def _aggregate(items: Sequence[Sequence[Trial]]) -> dict[str, Any]:
    resolved = [[float(t.resolved) for t in trials] for trials in items]
    scores = [[t.score for t in trials] for trials in items]
    return {"resolved": round(mean_of_items(resolved), 4), "mean": round(mean_of_items(scores), 4), "n": len(items)}


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
        "resolved": round(mean_of_items(resolved), 4),
        "resolved_ci95": [round(x, 4) for x in bootstrap_ci(resolved)],
        "mean": round(mean_of_items(scores), 4),
        "ci95": [round(x, 4) for x in bootstrap_ci(scores)],
        "pass_hat_k": {
            str(k): round(pass_hat_k([[t.resolved for t in v] for v in values], k), 4) for k in range(1, trials + 1)
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


def published(summary: Mapping[str, Any], decimals: int = PUBLISHED_DECIMALS) -> dict[str, Any]:
    """A summary as the test split publishes it: every rate rounded to ``decimals``."""

    def rounded(value: Any) -> Any:
        if isinstance(value, float):
            return round(value, decimals)
        if isinstance(value, Mapping):
            return {k: rounded(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rounded(v) for v in value]
        return value

    return rounded(dict(summary))


def ladder(score: float, best: float | None, margin: float = LADDER_MARGIN) -> float | None:
    """The Ladder (Blum & Hardt 2015, "The Ladder: A Reliable Leaderboard for Machine Learning
    Competitions"): a submitter's new test score is released — rounded to the margin — only when
    it beats their best released score by at least ``margin``; otherwise nothing new is released
    (returns None) and their best stands. Adaptive resubmission then learns at most one bit per
    submission about the hidden labels, instead of the score's every digit."""
    if best is not None and score < best + margin:
        return None
    return round(round(score / margin) * margin, 6)
