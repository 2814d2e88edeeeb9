"""Issue #21.2: the Ladder's releases were a per-ticket oracle. The attack, simulated against the very
functions the service publishes with (``bench/label_recovery.py``), recovers nothing after the fix.

Before: every per-task rate of a release was published, and one ticket moves a 67-ticket task's rate by
0.015 > 0.01 — a run probing one ticket per task read six labels, every one right. One exact overall
number is not enough either: an attacker that knows most answers places its run's count one ticket
under the Ladder's threshold and reads the probed ticket off the release. Now each release is the score
plus a keyed Laplace draw: no probed label reaches a 90 % posterior, within the default quota (3 runs) or
the audit's 49, and the attacker's best guess stays within the differential-privacy bound of chance.
"""

from __future__ import annotations

import math

import pytest

from bench.label_recovery import CLAIM, TICKETS, simulate
from service.stats import LADDER_NOISE_SCALE

EPSILON = (1 / TICKETS) / LADDER_NOISE_SCALE  # one ticket's weight over the noise scale: 0.25 per release


@pytest.mark.parametrize(("runs", "labels"), [(3, 12), (49, 80)])
def test_before_the_per_task_breakdown_gave_every_probed_label_away(runs: int, labels: int) -> None:
    """Six labels a released run, each one right: 12 per key within the default quota, over 80 in 49 runs
    (until the attacker's known tickets no longer lift a run over the Ladder's margin; the audit's own
    simulation: 115 of 200 decision labels)."""
    cell = simulate("per-task", runs, 0.5, trials=20)
    assert cell["claimed"] / 20 >= labels and cell["claimed_accuracy"] == 1.0


def test_one_exact_number_is_still_an_oracle_for_a_well_informed_attacker() -> None:
    cell = simulate("exact", 3, 0.5, trials=20)
    assert cell["claimed"] == cell["probed"] == 40 and cell["claimed_accuracy"] == 1.0


@pytest.mark.parametrize("p", [0.5, 1 / 3], ids=["even-prior", "third-prior"])
@pytest.mark.parametrize("runs", [3, 49])
def test_the_attack_recovers_nothing_beyond_chance_from_what_the_service_publishes(runs: int, p: float) -> None:
    cell = simulate("service", runs, p, trials=200)
    assert cell["claimed"] == 0, cell  # no probed ticket's label reaches a posterior of CLAIM
    assert CLAIM == 0.9
    # the best guess on every probed ticket: within the ε-DP bound of one release, plus sampling error
    bound = max(math.exp(EPSILON) / (1 + math.exp(EPSILON)), cell["chance"])
    slack = 3 * math.sqrt(bound * (1 - bound) / cell["probed"])
    assert cell["best_guess_accuracy"] <= bound + slack, cell
