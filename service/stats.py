"""Run statistics: mean, pass^k, a bootstrap confidence interval over items, rank bands.

Pure functions over plain numbers. An *item* is one ticket of a run (a task id and a seed); its
*trials* are the k episodes played on it. Items weigh equally; a bootstrap resamples items with
their trials together (τ²-bench's unit of analysis, Chatbot Arena's CI method).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from math import comb

RESOLVED_THRESHOLD = 0.8
"""An episode counts as *resolved* when its score is at least this (used by pass^k)."""

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95


def item_mean(trials: Sequence[float]) -> float:
    return sum(trials) / len(trials)


def mean_score(items: Sequence[Sequence[float]]) -> float:
    """The mean over items of each item's mean trial score."""
    if not items:
        raise ValueError("no items")
    return sum(item_mean(t) for t in items) / len(items)


def pass_hat_k(items: Sequence[Sequence[float]], k: int, threshold: float = RESOLVED_THRESHOLD) -> float:
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
        c = sum(1 for s in trials if s >= threshold)
        total += comb(c, k) / comb(n, k)
    return total / len(items)


def bootstrap_ci(
    items: Sequence[Sequence[float]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of :func:`mean_score`, resampling items (trials stay together).

    Deterministic for a given ``seed``.
    """
    if not items:
        raise ValueError("no items")
    means = [item_mean(t) for t in items]
    n = len(means)
    rng = random.Random(seed)
    stats = sorted(sum(rng.choices(means, k=n)) / n for _ in range(resamples))
    tail = (1.0 - confidence) / 2
    lo = stats[int(tail * (resamples - 1))]
    hi = stats[int(round((1 - tail) * (resamples - 1)))]
    return lo, hi


def rank_bands(intervals: Mapping[str, tuple[float, float, float]]) -> dict[str, int]:
    """Ranks where statistical ties share a rank.

    ``intervals`` maps a row id to (mean, lo, hi). A row's rank is 1 + the number of rows whose
    lower bound is above its upper bound — rows it is *significantly* behind (Chatbot Arena's rule).
    """
    return {
        rid: 1 + sum(1 for other, (_, olo, _) in intervals.items() if other != rid and olo > hi)
        for rid, (_, _, hi) in intervals.items()
    }


def summarize(items: Mapping[tuple[str, int], Sequence[float]], trials: int, groups: Mapping[str, Mapping[tuple[str, int], str]] | None = None) -> dict:
    """The summary of a finished run: mean, CI, pass^1..k, and means per named grouping.

    ``items`` maps (task_id, seed) to its trial scores; ``groups`` maps a grouping name (e.g.
    ``"per_task"``) to a function-as-dict from item key to group label.
    """
    values = list(items.values())
    lo, hi = bootstrap_ci(values)
    out: dict = {
        "mean": round(mean_score(values), 4),
        "ci95": [round(lo, 4), round(hi, 4)],
        "pass_hat_k": {str(k): round(pass_hat_k(values, k), 4) for k in range(1, trials + 1)},
        "items": len(values),
        "episodes": sum(len(v) for v in values),
        "resolved_threshold": RESOLVED_THRESHOLD,
    }
    for name, label_of in (groups or {}).items():
        buckets: dict[str, list[Sequence[float]]] = {}
        for key, trials_ in items.items():
            buckets.setdefault(label_of[key], []).append(trials_)
        out[name] = {label: {"mean": round(mean_score(b), 4), "n": len(b)} for label, b in sorted(buckets.items())}
    return out


def summarize_manifest(manifest: Sequence[Mapping], trials: int, scores: Mapping[int, float | None], errors: int) -> dict:
    """:func:`summarize` for a run: items are its (task, seed) tickets; an unscored entry counts 0.

    Adds means per task, per family and per difficulty, and the run's error count.
    """
    from service.env import TASKS  # the task registry labels families and difficulties

    items: dict[tuple[str, int], list[float]] = {}
    for entry in manifest:
        score = scores.get(entry["index"])
        items.setdefault((entry["task_id"], entry["seed"]), []).append(score if score is not None else 0.0)
    summary = summarize(items, trials, groups={
        "per_task": {k: k[0] for k in items},
        "per_family": {k: TASKS[k[0]].family for k in items},
        "per_difficulty": {k: TASKS[k[0]].difficulty for k in items},
    })
    summary["errors"] = errors
    return summary
