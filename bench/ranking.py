"""How often the board tells two close agents apart (issue #21.6): rank bands (non-overlapping 95%
intervals, the board's rule before #21) against the paired test on the same tickets (the practice boards'
rule now) and against the test board's rule, which sees only the two released values (each the rate plus
the release's Gaussian draw, rounded to 0.01) and compares them with the noise-widened two-proportion test.

    .venv/bin/python -m bench.ranking            # JSON: share of simulated pairs separated, per true gap

Two agents play the same 550 tickets (a test run's). The first resolves each with probability 0.7; the
second agrees with it on 90 % of the tickets (two agents of one kind fail mostly the same tickets) and is
``gap`` worse on average (at most DISAGREE). Each cell: the share of 1,000 simulated pairs in which each
rule puts the first agent ahead. The intervals are the normal approximation of the bootstrap's (the same
to the second decimal for a resolved rate over 550 tickets, and a thousand times cheaper).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys

from service.stats import (
    PUBLISHED_DECIMALS,
    TEST_RUN_BUDGET,
    Z95,
    ladder_noise_sd,
    paired_comparison,
    rounded,
    unpaired_separated,
)

TICKETS = 550
NOISE_SD = ladder_noise_sd(TEST_RUN_BUDGET, TICKETS)
DISAGREE = 0.10


def _pair(rng: random.Random, gap: float) -> tuple[list[float], list[float]]:
    a, b = [], []
    for _ in range(TICKETS):
        if rng.random() < DISAGREE:  # a ticket one agent resolves and the other does not
            first = rng.random() < (DISAGREE + gap) / (2 * DISAGREE)  # so the first is `gap` ahead on average
            a.append(float(first))
            b.append(float(not first))
        else:
            same = float(rng.random() < 0.7)
            a.append(same)
            b.append(same)
    return a, b


def _interval(xs: list[float]) -> tuple[float, float]:
    p = sum(xs) / len(xs)
    half = Z95 * math.sqrt(p * (1 - p) / len(xs))
    return p - half, p + half


def separated_shares(gap: float, pairs: int, seed: int = 0) -> dict[str, float]:
    rng = random.Random(seed)
    bands = paired = released = 0
    for _ in range(pairs):
        a, b = _pair(rng, gap)
        bands += _interval(a)[0] > _interval(b)[1]
        paired += paired_comparison(a, b).separated
        rel_a, rel_b = (rounded(sum(x) / TICKETS + rng.gauss(0.0, NOISE_SD), PUBLISHED_DECIMALS) for x in (a, b))
        released += unpaired_separated(rel_a, rel_b, TICKETS, TICKETS, extra_var=NOISE_SD**2)
    return {
        "gap": gap,
        "rank_bands": round(bands / pairs, 3),
        "paired": round(paired / pairs, 3),
        "released_values": round(released / pairs, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000)
    args = parser.parse_args(argv)
    cells = [separated_shares(gap, args.pairs) for gap in (0.0, 0.01, 0.02, 0.03, 0.05, 0.07, 0.10)]
    out = {"tickets": TICKETS, "disagree": DISAGREE, "noise_sd": round(NOISE_SD, 4), "pairs": args.pairs}
    print(json.dumps({**out, "cells": cells}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
