"""The label-recovery attack on test releases (issue #21.2), simulated against what the service publishes.

    .venv/bin/python -m bench.label_recovery                # JSON: every publisher, attack and budget
    .venv/bin/python -m bench.label_recovery --trials 2000  # more simulated keys

A submitter cannot see a test ticket's grade, but it controls its own runs: it can fail any ticket on
purpose (close at once) and answer the tickets it is sure of (what its solver gets right every time,
e.g. the easy ones) — so it knows its run's score exactly except for the tickets it probes. It reads the
probed labels off what is published, with the exact posterior of each (the likelihood of what was
published, or of the non-release, under either answer), and claims those it is at least 90 % sure of.
Two attacks:

- **new ticket** (``new``): every run after the first probes one ticket it has not probed before;
- **same ticket** (``same``): every run probes the same ticket (two answer sets that differ in that
  ticket, many releases) and the evidence of all runs adds up — the audit's repeated probe, which read a
  ticket with 0.77 accuracy after 49 runs of the #21 release (one Laplace draw per run, no lifetime cap).

Publishers:

- **before #21** (``per-task``): the Ladder released every per-task rate, rounded to 0.01; one ticket of a
  67-ticket task moves its rate by 0.015, so a run that probes one ticket per task reads six labels;
- **one exact number** (``exact``): only the overall rate, rounded to the margin — the attacker sets its
  known tickets so that the run's count sits one ticket below the Ladder's threshold, and the released
  value says whether the probed ticket crossed it: one label per run, every time;
- **#21's release** (``laplace``): the overall rate plus a Laplace draw of scale 0.01 per run, as many runs
  as the daily quota allows, for ever;
- **now** (``service``): :func:`service.stats.ladder` on the rate plus the run's Gaussian draw
  (:func:`service.stats.ladder_noise`, sd from :func:`service.stats.ladder_noise_sd`), and no more than
  :data:`service.stats.TEST_RUN_BUDGET` runs per key and test key: the attacker's later runs are refused;
- ``service-unbudgeted``: the same draws with the budget lifted — what the budget is for.

Every probed ticket's candidate answer is right with probability ``p`` (the attacker's prior). Printed per
publisher, attack and number of runs tried (3: the default daily quota; 49: the audit's 16 days): labels
claimed, their accuracy, and the accuracy of the attacker's best guess on every probed ticket against
always guessing the prior's majority (chance).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from service import env as core
from service.stats import (
    LADDER_MARGIN,
    LADDER_PRIVACY_MU,
    TEST_RUN_BUDGET,
    ladder,
    ladder_noise,
    ladder_noise_sd,
    ticket_guess_bound,
)

TICKETS = len(core.run_manifest(core.HIDDEN_SPLIT, list(core.TASKS), 1, None))  # what a test run covers: 550
KNOWN = TICKETS // 2  # tickets the attacker is sure of (it answers them right, or fails them on purpose)
START = TICKETS // 4  # the first run's count of known tickets: room above it for the Ladder's climb
CLAIM = 0.9  # a label is claimed when the posterior says it is at least this likely
LAPLACE_SCALE = 0.01  # #21's release noise
NOISE_SD = ladder_noise_sd(TEST_RUN_BUDGET, TICKETS)
PUBLISHERS = ("per-task", "exact", "laplace", "service", "service-unbudgeted")
TASKS_BEFORE, TASK_SIZE = 6, 67  # before #21: six 67-ticket tasks (one ticket moves a task's rate by 0.015)


@dataclass
class Key:
    """One simulated deployment key and the attacker's hidden truth on its probe tickets."""

    secret: bytes
    truth: list[bool]  # probe ticket i: the attacker's candidate answer is right
    runs: int = 0

    def run_id(self) -> str:
        self.runs += 1
        return f"run_{self.runs:04d}"


def _laplace_draw(key: Key) -> float:
    """#21's draw: keyed by the run, Laplace of scale 0.01 (inverse CDF of a keyed uniform)."""
    u = random.Random(key.secret + key.run_id().encode()).random() - 0.5
    return -LAPLACE_SCALE * math.copysign(1.0, u) * math.log(1 - 2 * abs(u))


def _noise(publisher: str, key: Key) -> float:
    if publisher == "laplace":
        return _laplace_draw(key)
    if publisher.startswith("service"):
        return ladder_noise(key.secret, key.run_id(), NOISE_SD)
    return 0.0


def runs_allowed(publisher: str, tried: int) -> int:
    """How many of the runs an attacker tries the publisher plays (the service refuses a key's runs beyond
    its lifetime budget under one test key)."""
    return min(tried, TEST_RUN_BUDGET) if publisher == "service" else tried


def _release(publisher: str, key: Key, correct: int, best: float | None) -> float | None:
    """What one run publishes (one number, or nothing: None) when ``correct`` of its tickets are right."""
    return ladder(correct / TICKETS, best, _noise(publisher, key))


def _per_task(key: Key, known: int, probes: list[int], best: float | None) -> tuple[float | None, list[int] | None]:
    """Before #21: the exact score through the Ladder (no noise), and every per-task rate of a release,
    rounded to 0.01 — from which the attacker reads back each task's count. Returns (released, counts)."""
    total = TASKS_BEFORE * TASK_SIZE
    released = ladder((known + sum(key.truth[i] for i in probes)) / total, best)
    if released is None:
        return None, None
    counts = []
    for task in range(TASKS_BEFORE):  # the known tickets spread over the tasks; probe number j sits in task j
        count = known // TASKS_BEFORE + (task < known % TASKS_BEFORE)
        count += sum(key.truth[i] for j, i in enumerate(probes) if j == task)
        counts.append(round(round(count / TASK_SIZE, 2) * TASK_SIZE))  # what the published rate says
    return released, counts


def _cdf(publisher: str) -> Callable[[float], float]:
    """The CDF of the publisher's draw."""
    if publisher == "laplace":
        b = LAPLACE_SCALE
        return lambda x: 0.5 * math.exp(x / b) if x < 0 else 1 - 0.5 * math.exp(-x / b)
    normal = NormalDist(0.0, NOISE_SD)
    return normal.cdf


def likelihood(publisher: str, score: float, released: float | None, best: float | None) -> float:
    """P(what was published | the run's true score), for a publisher of one number."""
    if publisher == "exact":
        return float(ladder(score, best) == released)
    cdf, half = _cdf(publisher), LADDER_MARGIN / 2
    if released is None:  # not released: the noisy score stayed under the best + the margin
        return cdf(best + LADDER_MARGIN - score) if best is not None else 0.0
    lo = -math.inf if released <= 0.0 else released - half
    hi = math.inf if released >= 1.0 else released + half
    if best is not None:
        lo = max(lo, best + LADDER_MARGIN)
    if hi <= lo:
        return 0.0
    return max(0.0, (1.0 if hi == math.inf else cdf(hi - score)) - (0.0 if lo == -math.inf else cdf(lo - score)))


def _edge(best: float | None, cap: int) -> int:
    """The count of known tickets that puts a run one ticket under the Ladder's threshold (the first run:
    :data:`START`)."""
    if best is None:
        return START
    return min(cap, math.ceil(round((best + LADDER_MARGIN) * TICKETS, 6)) - 1)


def attack_new(key: Key, runs: int, p: float, publisher: str) -> list[tuple[bool, float]]:
    """Every run after the first probes one new ticket: (truth, posterior that its candidate is right)."""
    if publisher == "per-task":
        return _attack_per_task(key, runs)
    best = _release(publisher, key, START, None)
    out: list[tuple[bool, float]] = []
    for probe in range(runs_allowed(publisher, runs) - 1):
        known = _edge(best, KNOWN)
        released = _release(publisher, key, known + key.truth[probe], best)
        right = likelihood(publisher, (known + 1) / TICKETS, released, best)
        wrong = likelihood(publisher, known / TICKETS, released, best)
        out.append((key.truth[probe], p * right / (p * right + (1 - p) * wrong) if right + wrong > 0 else p))
        if released is not None:
            best = released
    return out


def attack_same(key: Key, runs: int, p: float, publisher: str) -> list[tuple[bool, float]]:
    """Every run probes ticket 0, one ticket under the threshold; the evidence of all runs adds up:
    [(truth, posterior that the candidate is right)]."""
    best: float | None = None
    log_odds = math.log(p / (1 - p))
    for _ in range(runs_allowed(publisher, runs)):
        known = _edge(best, KNOWN)
        released = _release(publisher, key, known + key.truth[0], best)
        right = likelihood(publisher, (known + 1) / TICKETS, released, best)
        wrong = likelihood(publisher, known / TICKETS, released, best)
        if right == 0.0 or wrong == 0.0:  # one answer is impossible: the other is certain
            log_odds = math.inf if wrong == 0.0 else -math.inf
            break
        log_odds += math.log(right / wrong)
        if released is not None:
            best = released
    posterior = 1.0 if log_odds == math.inf else 0.0 if log_odds == -math.inf else 1 / (1 + math.exp(-log_odds))
    return [(key.truth[0], posterior)]


def _attack_per_task(key: Key, runs: int) -> list[tuple[bool, float]]:
    """Before #21: clear the Ladder whatever the probes hold, one probe per task, read every task's count."""
    total = TASKS_BEFORE * TASK_SIZE
    best, _ = _per_task(key, total // 4, [], None)
    out: list[tuple[bool, float]] = []
    probe = 0
    for _ in range(runs - 1):
        assert best is not None
        known = min(total // 2, math.ceil(round((best + LADDER_MARGIN) * total, 6)))
        probes = list(range(probe, probe + TASKS_BEFORE))
        released, counts = _per_task(key, known, probes, best)
        for task, i in enumerate(probes):
            spread = known // TASKS_BEFORE + (task < known % TASKS_BEFORE)
            out.append((key.truth[i], 0.5 if counts is None else float(counts[task] - spread >= 1)))
        probe += len(probes)
        if released is not None:
            best = released
    return out


def summarise(results: list[tuple[bool, float]], p: float) -> dict[str, Any]:
    claimed = [(t, q) for t, q in results if q >= CLAIM or q <= 1 - CLAIM]
    right = [t == (q >= 0.5) for t, q in claimed]
    guesses = [t == (q > 0.5) for t, q in results]  # a tie guesses the prior's majority (p <= 0.5)
    return {
        "probed": len(results),
        "claimed": len(claimed),
        "claimed_accuracy": round(sum(right) / len(right), 3) if right else None,
        "best_guess_accuracy": round(sum(guesses) / len(guesses), 4) if guesses else None,
        "chance": round(max(p, 1 - p), 4),
    }


def simulate(publisher: str, runs: int, p: float, trials: int, attack: str = "new", seed: int = 0) -> dict[str, Any]:
    """``trials`` simulated keys, each attacked with ``runs`` tries of ``attack`` ("new" or "same")."""
    rng = random.Random(seed)
    play = attack_same if attack == "same" else attack_new
    results: list[tuple[bool, float]] = []
    for t in range(trials):
        key = Key(secret=f"simulated key {seed}/{t}".encode(), truth=[rng.random() < p for _ in range(TICKETS)])
        results += play(key, runs, p, publisher)
    return {
        "publisher": publisher,
        "attack": attack,
        "runs_tried": runs,
        "runs_played": runs_allowed(publisher, runs),
        "p": round(p, 4),
        "trials": trials,
        **summarise(results, p),
    }


def report(trials: int) -> list[dict[str, Any]]:
    return [
        simulate(publisher, runs, 0.5, trials, attack)
        for attack in ("new", "same")
        for publisher in PUBLISHERS
        if not (publisher == "per-task" and attack == "same")
        for runs in (3, 49)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000, help="simulated keys (attackers) per cell")
    args = parser.parse_args(argv)
    out = {
        "tickets": TICKETS,
        "claim_threshold": CLAIM,
        "test_run_budget": TEST_RUN_BUDGET,
        "noise_sd": round(NOISE_SD, 5),
        "mu": LADDER_PRIVACY_MU,
        "guess_bound": round(ticket_guess_bound(), 4),
        "cells": report(args.trials),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
