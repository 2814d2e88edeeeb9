"""The store desk end to end in the core: every public conversation generates, the backend accepts every
gold write, and a perfect conversation resolves every train and dev ticket."""

from __future__ import annotations

import pytest

from service.env import PUBLIC, TASKS
from service.env.agents import play
from tests.env.store_oracles import GoldOracle, ObservableOracle

STORE_TASKS = [t for t in TASKS.values() if t.family == "store"]


@pytest.mark.parametrize("split", ["train", "dev"])
@pytest.mark.parametrize("task", STORE_TASKS, ids=lambda t: t.id)
def test_the_gold_oracle_resolves_every_public_store_ticket_and_every_gold_write_is_accepted(task, split) -> None:
    pool = PUBLIC.pool(split, "store", task.difficulty)
    failures = []
    for seed in range(len(pool)):
        grade, _ = play(GoldOracle(pool[seed], PUBLIC), task.id, seed, split)
        if not grade.resolved:
            failures.append((seed, [c.detail for c in grade.components if not c.passed]))
    assert not failures, failures[:5]


@pytest.mark.parametrize("split", ["train", "dev"])
@pytest.mark.parametrize("task", STORE_TASKS, ids=lambda t: t.id)
def test_an_oracle_that_sees_only_what_an_agent_sees_resolves_every_public_store_ticket(task, split) -> None:
    pool = PUBLIC.pool(split, "store", task.difficulty)
    failures = []
    for seed in range(len(pool)):
        try:
            grade, _ = play(ObservableOracle(), task.id, seed, split)
        except AssertionError as exc:  # the oracle could not read the ticket: a generator bug
            failures.append((seed, str(exc)[:300]))
            continue
        if not grade.resolved:
            failures.append((seed, [c.detail for c in grade.components if not c.passed]))
    assert not failures, failures[:5]
