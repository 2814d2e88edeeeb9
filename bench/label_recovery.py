"""The label-recovery attack on test releases (issue #21.2), simulated against what the service publishes.

    .venv/bin/python -m bench.label_recovery                # JSON: every publisher, both budgets
    .venv/bin/python -m bench.label_recovery --trials 200   # more simulated keys

A submitter cannot see a test ticket's grade, but it controls its own runs: it can fail any ticket on
purpose (close at once) and answer the tickets it is sure of (what its solver gets right every time,
e.g. the easy ones) — so it knows its run's score exactly except for the tickets it probes. Each run
probes tickets whose answer it does not know, and it reads their labels off what is published:

- **before #21** (``per-task``): the Ladder released every per-task rate, rounded to 0.01; one ticket of a
  67-ticket task moves its rate by 0.015, so a run that probes one ticket per task reads six labels;
- **one exact number** (``exact``): only the overall rate, rounded to the margin — the attacker sets its
  known tickets so that the run's count sits one ticket below a rounding edge, and the released value
  says whether the probed ticket crossed it: one label per run, every time;
- **now** (``service``): the overall rate plus the run's keyed Laplace draw (:func:`service.stats.ladder`),
  the same positioning: the attacker computes the exact posterior of each probed label from the released
  value (or the non-release) and claims the labels it is at least 90 % sure of.

Every probed ticket's candidate answer is right with probability ``p`` (the attacker's prior). Printed per
publisher and budget (3 runs: the default quota; 49 runs: the audit's simulation): labels claimed, their
accuracy, and the accuracy of the attacker's best guess on every probed ticket against always guessing
the prior's majority (chance).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass
from typing import Any

from service.stats import LADDER_MARGIN, LADDER_NOISE_SCALE, ladder, ladder_noise

TICKETS, TASKS = 400, 6
KNOWN = 200  # tickets the attacker is sure of (it answers them right, or fails them on purpose)
CLAIM = 0.9  # a label is claimed when the posterior says it is at least this likely


@dataclass
class Key:
    """One simulated deployment key and the attacker's hidden truth on its probe tickets."""

    secret: bytes
    truth: list[bool]  # probe ticket i: the attacker's candidate answer is right
    runs: int = 0

    def run_id(self) -> str:
        self.runs += 1
        return f"run_{self.runs:04d}"


TASK_SIZE = 67  # one ticket moves a task's rate by 1/67 = 0.015 > 0.01: every count shows through the rounding


def _per_task(key: Key, known: int, probes: list[int], best: float | None) -> tuple[float | None, list[int] | None]:
    """Before #21: the exact score through the Ladder (no noise), and every per-task rate of a release,
    rounded to 0.01 — from which the attacker reads back each task's count. Returns (released, counts)."""
    released = ladder((known + sum(key.truth[i] for i in probes)) / TICKETS, best)
    if released is None:
        return None, None
    counts = []
    for task in range(TASKS):  # the known tickets spread over the tasks; probe number j sits in task j
        count = known // TASKS + (task < known % TASKS) + sum(key.truth[i] for j, i in enumerate(probes) if j == task)
        counts.append(round(round(count / TASK_SIZE, 2) * TASK_SIZE))  # what the published rate says
    return released, counts


def _exact(key: Key, known: int, probes: list[int], best: float | None) -> tuple[float | None, None]:
    """One number, no noise: the overall rate through the Ladder, rounded to the margin."""
    return ladder((known + sum(key.truth[i] for i in probes)) / TICKETS, best), None


def _service(key: Key, known: int, probes: list[int], best: float | None) -> tuple[float | None, None]:
    """What the service publishes now: the same, plus the run's keyed Laplace draw."""
    correct = known + sum(key.truth[i] for i in probes)
    return ladder(correct / TICKETS, best, ladder_noise(key.secret, key.run_id())), None


def _laplace_cdf(x: float, b: float) -> float:
    return 0.5 * math.exp(x / b) if x < 0 else 1 - 0.5 * math.exp(-x / b)


def _likelihood(score: float, released: float | None, best: float | None, noisy: bool) -> float:
    """P(what was published | the run's true score), for a publisher of one number."""
    if not noisy:
        return float(ladder(score, best) == released)
    b, half = LADDER_NOISE_SCALE, LADDER_MARGIN / 2
    if released is None:  # not released: the noisy score stayed under the best + the margin
        return _laplace_cdf(best + LADDER_MARGIN - score, b) if best is not None else 0.0
    lo = -math.inf if released <= 0.0 else released - half
    hi = math.inf if released >= 1.0 else released + half
    if best is not None:
        lo = max(lo, best + LADDER_MARGIN)
    return max(0.0, _laplace_cdf(hi - score, b) - _laplace_cdf(lo - score, b)) if hi > lo else 0.0


def attack(key: Key, runs: int, p: float, publisher: str) -> list[tuple[bool, float]]:
    """One attacker on one key: for every probed ticket, (truth, the attacker's posterior that its
    candidate answer is right). Each run is built afresh: ``known`` tickets it is sure of, the probes, and
    every other ticket failed on purpose."""
    best, _ = (_per_task if publisher == "per-task" else _exact)(key, KNOWN // 2, [], None)  # run 1
    if publisher == "service":
        best, _ = _service(key, KNOWN // 2, [], None)
    out: list[tuple[bool, float]] = []
    probe = 0
    for _ in range(runs - 1):
        assert best is not None
        if publisher == "per-task":  # clear the Ladder whatever the probes hold, one probe per task
            known = min(KNOWN, math.ceil(round((best + LADDER_MARGIN) * TICKETS, 6)))
            probes = list(range(probe, probe + TASKS))
            released, counts = _per_task(key, known, probes, best)
            for task, i in enumerate(probes):
                if counts is None:
                    out.append((key.truth[i], p))
                    continue
                spread = known // TASKS + (task < known % TASKS)
                out.append((key.truth[i], 1.0 if counts[task] - spread >= 1 else 0.0))
        else:  # one probe, its run's count one ticket under the Ladder's threshold
            known = min(KNOWN, math.ceil(round((best + LADDER_MARGIN) * TICKETS, 6)) - 1)
            probes = [probe]
            released, _ = (_service if publisher == "service" else _exact)(key, known, probes, best)
            noisy = publisher == "service"
            right = _likelihood((known + 1) / TICKETS, released, best, noisy)
            wrong = _likelihood(known / TICKETS, released, best, noisy)
            posterior = p * right / (p * right + (1 - p) * wrong) if right + wrong > 0 else p
            out.append((key.truth[probe], posterior))
        probe += len(probes)
        if released is not None:
            best = released
    return out


def summarise(results: list[tuple[bool, float]], p: float) -> dict[str, Any]:
    claimed = [(t, q) for t, q in results if q >= CLAIM or q <= 1 - CLAIM]
    right = [t == (q >= 0.5) for t, q in claimed]
    guesses = [t == (q >= 0.5) for t, q in results]
    return {
        "probed": len(results),
        "claimed": len(claimed),
        "claimed_accuracy": round(sum(right) / len(right), 3) if right else None,
        "best_guess_accuracy": round(sum(guesses) / len(guesses), 3) if guesses else None,
        "chance": round(max(p, 1 - p), 3),
    }


def simulate(publisher: str, runs: int, p: float, trials: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    results: list[tuple[bool, float]] = []
    for t in range(trials):
        key = Key(secret=f"simulated key {seed}/{t}".encode(), truth=[rng.random() < p for _ in range(TICKETS)])
        results += attack(key, runs, p, publisher)
    return {"publisher": publisher, "runs": runs, "p": p, "trials": trials, **summarise(results, p)}


def report(trials: int) -> list[dict[str, Any]]:
    return [
        simulate(publisher, runs, p, trials)
        for publisher in ("per-task", "exact", "service")
        for runs in (3, 49)
        for p in (0.5, 1 / 3)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100, help="simulated keys (attackers) per cell")
    args = parser.parse_args(argv)
    out = {"claim_threshold": CLAIM, "noise_scale": LADDER_NOISE_SCALE, "cells": report(args.trials)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
