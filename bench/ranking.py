"""How often the board tells two close agents apart (issue #21.6): rank bands (non-overlapping 95%
intervals, the board's rule before #21) against the paired test on the same tickets (its rule now).

    .venv/bin/python -m bench.ranking            # JSON: share of simulated pairs separated, per true gap

Two agents play the same 400 tickets. The first resolves each with probability 0.7; the second agrees
with it on 90 % of the tickets (two agents of one kind fail mostly the same tickets) and is ``gap``
worse on average. Each cell: the share of 1,000 simulated pairs in which each rule puts the first agent
ahead. The intervals are the normal approximation of the bootstrap's (the same to the second decimal for
a resolved rate over 400 tickets, and a thousand times cheaper).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys

from service.stats import Z95, paired_comparison

TICKETS = 400
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
    bands = paired = 0
    for _ in range(pairs):
        a, b = _pair(rng, gap)
        bands += _interval(a)[0] > _interval(b)[1]
        paired += paired_comparison(a, b).separated
    return {"gap": gap, "rank_bands": round(bands / pairs, 3), "paired": round(paired / pairs, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000)
    args = parser.parse_args(argv)
    cells = [separated_shares(gap, args.pairs) for gap in (0.0, 0.01, 0.02, 0.03, 0.05, 0.07)]
    print(json.dumps({"tickets": TICKETS, "disagree": DISAGREE, "pairs": args.pairs, "cells": cells}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
