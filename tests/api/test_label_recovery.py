"""Issue #21.2: the Ladder's releases were a per-ticket oracle. The attack, simulated against the very
functions the service publishes with (``bench/label_recovery.py``), recovers nothing beyond chance.

Before #21: every per-task rate of a release was published, and one ticket moves a 67-ticket task's rate
by 0.015 > 0.01 — a run probing one ticket per task read six labels, every one right. One exact overall
number is not enough either: an attacker that knows most answers places its run's count one ticket under
the Ladder's threshold and reads the probed ticket off the release. #21's release — one Laplace draw of
scale 0.01 per run, as many runs as the daily quota allows, for ever — still let an attacker that probes
the *same* ticket in every run add the evidence up: 0.77 after 49 runs in the audit (400 tickets; 0.69 on
today's 550). Now a key completes at most ``TEST_RUN_BUDGET`` test runs under one test key and each gets a
Gaussian draw sized so that all of them together are μ-GDP in every ticket (μ = 0.1): no attack on any
ticket does better than Φ(μ/2) = 0.520 at even odds, and the simulated ones sit at chance.

The statistical test (``_at_chance``): the attacker's best guess on each of N probed tickets (one per
simulated key for the repeated probe, N ≥ 2000) is right k times; H0 "the guess is right with the chance
probability c" is rejected, one-sided, when k/N > c + z₀.₉₉·√(c(1−c)/N) (normal approximation to the
binomial, α = 0.01; 0.526 at N = 2000, c = 0.5). The test fails when that bound is crossed — it is crossed
by #21's release and by the same noise without the budget — and it is set so that the guarantee itself
(0.520) stays under it.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from bench.label_recovery import CLAIM, TICKETS, simulate
from service.stats import LADDER_PRIVACY_MU, TEST_RUN_BUDGET, ladder_noise_sd, ticket_guess_bound

KEYS = 2000  # simulated keys per cell
Z99 = NormalDist().inv_cdf(0.99)


def _at_chance(cell: dict) -> float:
    """The rejection bound of H0 (the best guess is right with the chance probability), α = 0.01."""
    c, n = cell["chance"], cell["probed"]
    return c + Z99 * math.sqrt(c * (1 - c) / n)


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


def test_before_the_budget_probing_the_same_ticket_in_every_run_recovered_it() -> None:
    """#21's release: one Laplace draw per run, no lifetime cap. 49 runs (16 days at the daily quota) on
    the same ticket: the best guess is far beyond chance and keys reach 90 % certainty."""
    cell = simulate("laplace", 49, 0.5, trials=300, attack="same")
    assert cell["best_guess_accuracy"] > _at_chance(cell) and cell["best_guess_accuracy"] >= 0.65, cell
    assert cell["claimed"] > 0, cell


def test_without_the_budget_the_same_noise_would_average_out() -> None:
    """The Gaussian draw alone is not the guarantee: lift the budget and 49 runs on one ticket read it
    beyond chance. What holds is the budget and the noise together."""
    cell = simulate("service-unbudgeted", 49, 0.5, trials=KEYS, attack="same")
    assert cell["best_guess_accuracy"] > _at_chance(cell), cell


def test_the_guarantee_is_what_the_noise_and_the_budget_give() -> None:
    """μ = √budget / (tickets · sd) = 0.1 whatever the budget; the guarantee sits under the test's bound."""
    sd = ladder_noise_sd(TEST_RUN_BUDGET, TICKETS)
    assert math.sqrt(TEST_RUN_BUDGET) / (TICKETS * sd) == pytest.approx(LADDER_PRIVACY_MU)
    assert ladder_noise_sd(12, TICKETS) == pytest.approx(2 * sd)  # four times the runs: twice the noise
    assert ticket_guess_bound() == pytest.approx(0.51994, abs=1e-4)
    assert ticket_guess_bound() < 0.5 + Z99 * math.sqrt(0.25 / KEYS)


@pytest.mark.parametrize("p", [0.5, 1 / 3], ids=["even-prior", "third-prior"])
@pytest.mark.parametrize("attack", ["same", "new"])
@pytest.mark.parametrize("runs", [3, 49])
def test_the_attack_recovers_nothing_beyond_chance_from_what_the_service_publishes(
    runs: int, attack: str, p: float
) -> None:
    """Whatever number of runs the attacker tries, the service plays the key's budget and no more; from
    those, no probed ticket's label reaches a posterior of 90 %, and the best guess is at chance."""
    cell = simulate("service", runs, p, trials=KEYS, attack=attack)
    assert cell["runs_played"] == min(runs, TEST_RUN_BUDGET)
    assert cell["claimed"] == 0, cell  # no probed ticket's label reaches a posterior of CLAIM
    assert CLAIM == 0.9
    assert cell["probed"] >= KEYS
    assert cell["best_guess_accuracy"] <= _at_chance(cell), cell
