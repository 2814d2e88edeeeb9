"""The oracles: agents that prove every ticket is solvable. Tests only, never shipped.

- ``oracle`` reads the policy verdict (the gold) of its ticket: every task can be solved with score 1.0.
- ``observable-oracle`` rebuilds the facts only from what an agent sees (:mod:`tests.env.readers`) and
  runs the policy on them: every ticket is solvable from visible information.

Both live here, outside the installed package, because either one plays the *test* split as well as
the public ones: shipped, it is a script that tops the test board under any name (issue #21.1).
:func:`make_reference` plays them beside the shipped baselines (``random``, ``heuristic``).
"""

from __future__ import annotations

from functools import cache

from service.env import customer
from service.env.agents import (
    _QUESTIONS,
    Agent,
    asks_before_answering,
    holding_reply,
    make_agent,
    play,
    resolution_reply,
    task_action,
)
from service.env.core import reset
from service.env.dataset import PUBLIC, Dataset
from service.env.models import Action, Grade, Observation
from service.env.policy import Verdict, evaluate
from service.env.tasks import ReplyRole, get_task
from tests.env.readers import TicketReader


class _PolicyPlayer:
    """Plays a task perfectly from a verdict function: asks what the policy needs, then acts."""

    def verdict(self, obs: Observation) -> Verdict:
        raise NotImplementedError

    def order_id(self, obs: Observation) -> str:
        raise NotImplementedError

    def __init__(self) -> None:
        self.stage = 0

    def act(self, obs: Observation) -> Action:
        task = get_task(obs.task_id)
        v = self.verdict(obs)
        oid = self.order_id(obs)
        if v.gold == "request_info" and asks_before_answering(task):
            return Action(decision="request_info", reply=_QUESTIONS[v.ask_topic or "details"])
        if task.grades("policy_lookup") and self.stage == 0:
            self.stage = 1
            return Action(lookup="policy")

        def reply(role: ReplyRole) -> str:
            if role == "holding":
                return holding_reply(v.queue, oid)
            reason = v.reason if v.gold == "reject" else None
            return resolution_reply(v.gold, reason, oid, v.refund_amount if v.gold == "approve_refund" else None)

        return task_action(task, v.gold, v.tag, v.queue, reply)


class OracleAgent(_PolicyPlayer):
    """Reads the verdict (gold) of its ticket: proves every task can be solved with score 1.0."""

    def __init__(self, ticket_id: str, dataset: Dataset = PUBLIC) -> None:
        super().__init__()
        self.ticket = dataset.ticket(ticket_id)
        self.revealed: frozenset[str] = frozenset()

    def verdict(self, obs: Observation) -> Verdict:
        v = evaluate(self.ticket, self.revealed)
        if v.gold == "request_info":  # it will ask: what the answer states becomes known (volunteered facts too)
            question = _QUESTIONS[v.ask_topic or "details"]
            self.revealed = self.revealed | customer.answer(self.ticket, question, 0)[1]
        return v

    def order_id(self, obs: Observation) -> str:
        return self.ticket.order.order_id


class ObservableOracleAgent(_PolicyPlayer):
    """Solves tickets from what any agent can see — the ticket text, its lookups, the customer's
    answers and the policy — read with knowledge of the customers' phrasings
    (:class:`tests.env.readers.TicketReader`), then the policy engine. Tests only: it proves every
    ticket is solvable from visible information; any ticket it cannot solve is a generator bug."""

    def __init__(self) -> None:
        super().__init__()
        self.reader = TicketReader()

    def act(self, obs: Observation) -> Action:
        if self.reader.needs(obs) is not None:
            self.reader.absorb(obs)
            target = self.reader.needs(obs)
            if target is not None:
                return Action(lookup=target)
        return super().act(obs)

    def verdict(self, obs: Observation) -> Verdict:
        return self.reader.verdict(obs)

    def order_id(self, obs: Observation) -> str:
        return self.reader.order_id()


ORACLES = ("oracle", "observable-oracle")


def make_reference(name: str, seed: int, ticket_id: str, dataset: Dataset = PUBLIC) -> Agent:
    """A shipped baseline (``random``, ``heuristic``) or one of the oracles."""
    if name == "oracle":
        return OracleAgent(ticket_id, dataset)
    if name == "observable-oracle":
        return ObservableOracleAgent()
    return make_agent(name, seed, ticket_id, dataset)


def play_reference(
    name: str, task_id: str, seed: int, split: str, dataset: Dataset = PUBLIC
) -> tuple[float, list[Action]]:
    """Play one episode of a reference agent (oracles included) to the end; returns (score, actions)."""
    ticket_id = reset(task_id, seed, split, dataset)[0].ticket_id
    grade, actions = play(make_reference(name, seed, ticket_id, dataset), task_id, seed, split, dataset)
    return grade.score, actions


@cache
def pool_grades(name: str, task_id: str, split: str) -> tuple[Grade, ...]:
    """Every ticket of a public task pool played to the end by a reference agent (oracles included),
    in seed order. Played once per agent, pool and test process: the tests that sweep whole pools (the
    oracles solve everything, the agents' ladder, the gaming suite's reference places) share it.
    Grades are frozen values."""
    task = get_task(task_id)
    pool = PUBLIC.pool(split, task.family, task.difficulty)
    grades = []
    for seed in range(len(pool)):
        ticket_id = reset(task_id, seed, split)[0].ticket_id
        grades.append(play(make_reference(name, seed, ticket_id), task_id, seed, split)[0])
    return tuple(grades)
