"""Reference agents and a deterministic evaluator.

- ``random``: uniformly random valid actions (a floor).
- ``heuristic``: honest keyword rules over what it observes — the ticket text, the customer's
  answers and its own lookups. It never reads gold labels or hidden facts.

The oracles that prove every ticket solvable (one reads the gold verdict, one rebuilds the facts from
what an agent sees) live with the tests (``tests/env/oracles.py``): shipped, either would be a
script that tops the test board.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from statistics import mean
from typing import Any, Protocol, cast

from service.env.core import reset, step
from service.env.dataset import PUBLIC, Dataset
from service.env.generator import stable_seed
from service.env.grading import grade_episode
from service.env.language import WORD_NUMBERS
from service.env.models import DECISIONS, LOOKUP_TARGETS, QUEUES, TAGS, Action, Decision, Grade, Observation
from service.env.policy import (
    ESCALATION_THRESHOLD,
    LATE_IN_TRANSIT_DAYS,
    OUTCOME_TAG,
    RETURN_WINDOW_DAYS,
)
from service.env.store.agents import StoreHeuristicAgent, StoreRandomAgent
from service.env.store.generator import STORE_TICKET_PREFIX
from service.env.tasks import TASKS, ReplyRole, TaskSpec, get_task
from service.env.world import TICKET_FAMILIES, high_risk


class Agent(Protocol):
    def act(self, obs: Observation) -> Action: ...


# ----------------------------------------------------------------------------------- random


class RandomAgent:
    """Random valid actions: a random decision where the decision ends the episode, else random parts."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(stable_seed("random-agent", seed))

    def act(self, obs: Observation) -> Action:
        rng = self.rng
        if get_task(obs.task_id).ends_on_decision:
            decision = rng.choice(DECISIONS)
            return Action(
                decision=decision,
                reply="Could you send photos and tell me more?" if decision == "request_info" else None,
            )
        parts: dict[str, Any] = {}
        choice = rng.randrange(6)
        if choice == 0:
            parts["add_tag"] = rng.choice(TAGS)
        elif choice == 1:
            parts["reassign_queue"] = rng.choice(QUEUES)
        elif choice == 2:
            parts["decision"] = rng.choice(DECISIONS)
        elif choice == 3:
            parts["reply"] = rng.choice(
                (
                    "Thanks for reaching out, we are looking into it.",
                    "We cannot help with this.",
                    "Your refund is approved.",
                )
            )
        elif choice == 4:
            parts["lookup"] = rng.choice(LOOKUP_TARGETS)
        else:
            parts["close_ticket"] = True
        return Action(**parts)


# ------------------------------------------------------------------------------------ replies

_QUESTIONS = {
    "photos": "Could you please send photos of the item showing the problem?",
    "usage": "Could you tell me the item's condition — has it been used, worn or washed, and are the tags still on?",
    "delivery": (
        "Could you please check with your neighbours, the porch and any parcel locker to see whether the parcel "
        "has turned up?"
    ),
    "details": "Could you describe what happened and what exactly the problem with your order is?",
}
_REASON_SENTENCES = {
    "window": f"this falls outside our {RETURN_WINDOW_DAYS}-day return window, so we can't accept it",
    "used": "the item has been used, so we can't accept this return: only unused items can be returned",
    "final_sale": (
        "this is a final-sale, hygiene or perishable item, so it can't be returned for a change of mind or size"
    ),
    "warranty": "the warranty on this item has ended, so we can't cover the fault",
    "normal_wear": "the photos show ordinary wear and tear rather than a defect, so we can't accept this claim",
    "in_transit": (
        "your parcel is still in transit with the carrier and on its way to you, so we can't issue a refund or "
        "replacement yet"
    ),
    "parcel_found": "we're glad the parcel has turned up, so there is nothing for us to refund or replace",
    "not_charged_twice": "our payment record shows only one charge for this order, so there is no duplicate to refund",
    "unverifiable": "we're unable to verify this claim from our order and carrier records, so we can't approve it",
}
_TEAMS = {"Returns": "returns", "Billing": "billing", "Escalations": "escalations", "Fraud": "claims review"}


def resolution_reply(decision: str, reason: str | None, order_id: str, amount: float | None = None) -> str:
    """A reply that states the decision (and, declining, the reason) plainly and courteously."""
    opening = f"Thank you for contacting us about order {order_id}."
    if decision == "reject":
        return f"{opening} I'm sorry, but {_REASON_SENTENCES.get(reason or '', _REASON_SENTENCES['unverifiable'])}."
    if decision == "approve_refund":
        what = f"a full refund of ${amount:.2f}" if amount is not None else "a full refund"
        return f"{opening} I'm sorry for the trouble: I've issued {what} to your original payment method."
    return f"{opening} I'm sorry for the trouble: we're sending you a replacement at no cost, and it will ship shortly."


def holding_reply(queue: str, order_id: str) -> str:
    return (
        f"Thank you for your patience with order {order_id}. I've passed your request to our "
        f"{_TEAMS.get(queue, 'support')} "
        "team, who will review it and get back to you shortly."
    )


def task_action(
    task: TaskSpec, decision: str, tag: str, queue: str, reply: Callable[[ReplyRole], str] | None = None
) -> Action:
    """A ticket task's whole answer in one action, as its declaration asks: the decision, the team and the
    outcome tag where the rubric grades them, the reply it grades (``reply`` writes it, by role), and the
    close — unless the decision ends the episode."""
    parts: dict[str, Any] = {}
    if task.grades("decision"):
        parts["decision"] = decision
    if task.grades("queue"):
        parts["reassign_queue"] = queue
    if task.grades("outcome_tag"):
        parts["add_tag"] = tag
    if task.reply is not None and reply is not None:
        parts["reply"] = reply(task.reply)
    if not task.ends_on_decision:
        parts["close_ticket"] = True
    return Action(**parts)


def asks_before_answering(task: TaskSpec) -> bool:
    """Whether the task's answer is judged on what the customer tells (the decision, the outcome tag) and
    not on the ticket as first seen (the team): then a ticket that needs information is asked about first."""
    return task.answer in ("decision", "tag")


def _outcome_tag(decision: str, reason: str | None) -> str:
    return "Fraud_Risk" if reason == "unverifiable" else OUTCOME_TAG[cast(Decision, decision)]


# -------------------------------------------------------------------------------- heuristic

_ISSUE_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "duplicate_charge",
        (
            "charged twice",
            "two charges",
            "two payments",
            "double charge",
            "charged me twice",
            "billed twice",
            "double-charged",
            "charged double",
            "two times",
        ),
    ),
    (
        "not_received",
        (
            "never arrived",
            "hasn't arrived",
            "has not arrived",
            "didn't arrive",
            "not arrived",
            "never got",
            "never received",
            "not received",
            "still waiting",
            "nothing here",
            "where is my",
            "no sign of",
            "hasn't turned up",
            "never showed up",
            "haven't received",
        ),
    ),
    (
        "wrong_item",
        (
            "wrong item",
            "wrong colour",
            "wrong color",
            "wrong size",
            "different item",
            "not what i ordered",
            "sent me the wrong",
            "different product",
            "wrong one",
            "instead of",
            "different colour",
            "different model",
            "something else instead",
        ),
    ),
    (
        "damaged",
        (
            "broken",
            "cracked",
            "smashed",
            "dent",
            "damaged",
            "shattered",
            "crushed",
            "torn",
            "ripped",
            "scratched",
            "in pieces",
            "rip down",
        ),
    ),
    (
        "defective",
        (
            "stopped working",
            "won't turn on",
            "wont turn on",
            "doesn't work",
            "does not work",
            "faulty",
            "defective",
            "dead",
            "won't charge",
            "malfunction",
            "not working",
            "broke down",
            "fault with",
            "switching itself off",
        ),
    ),
    (
        "size_issue",
        (
            "too small",
            "too big",
            "too large",
            "too tight",
            "too loose",
            "doesn't fit",
            "does not fit",
            "didn't fit",
            "comes up large",
            "size too",
        ),
    ),
    (
        "item_used",
        (
            "used it",
            "i've used",
            "i have used",
            "after using",
            "tried it for",
            "been using",
            "proper try",
            "worn it a few",
            "trying",
            "for a while",
            "used the",
            "used my",
        ),
    ),
    (
        "changed_mind",
        (
            "changed my mind",
            "don't need",
            "do not need",
            "don't want",
            "no longer",
            "by mistake",
            "cheaper",
            "not for me",
            "don't like",
            "return it",
            "accidentally",
        ),
    ),
)
_USED = (
    "worn",
    "wore",
    "washed",
    "used it",
    "been using",
    "tried it on a few",
    "used a few",
    "used once",
    "used twice",
    "has been used",
    "did use",
)
_UNUSED = (
    "unused",
    "unworn",
    "tags on",
    "tags still",
    "tags are still",
    "never used",
    "never been used",
    "never worn",
    "unopened",
    "sealed",
    "original packaging",
    "not used",
    "brand new",
    "still in the box",
    "haven't used",
    "hasn't been used",
    "kept all the packaging",
)
_WEAR = (
    "wear",
    "worn",
    "faded",
    "scuff",
    "normal use",
    "used a lot",
    "everyday use",
    "daily use",
    "regular use",
    "bobbly",
)
_FOUND = (
    "found it",
    "found the",
    "turned up",
    "neighbour had",
    "neighbor had",
    "was there",
    "sorry for the trouble",
    "located it",
    "had it all along",
    "was sitting",
    "had it in the back",
    "behind the bins",
)


def _has(text: str, phrases: tuple[str, ...]) -> bool:
    """Whole-word keyword match ("accidentally" does not contain "dent")."""
    return any(re.search(rf"\b{re.escape(p)}\b", text) for p in phrases)


def read_issue(text: str) -> str:
    low = text.lower()
    for issue, words in _ISSUE_WORDS:
        if issue == "item_used" and _has(low, _UNUSED):
            continue  # "I haven't used it" is not a used-item return
        if _has(low, words):
            return issue
    return "vague"


_HEADER_DAYS = re.compile(r"delivered (\d+) days? ago")
_SAID_AGO = re.compile(r"\b(\d+|a|one|two|three|four|five|six|seven|eight|ten|twelve)\s+(day|week|month)s?\s+ago")


_Rule = tuple[str, str | None, str | None]  # (decision, topic to ask about, denial reason)
_Judged = tuple[str, str | None, str | None, float]  # ... and the refund amount


class HeuristicAgent:
    """Keyword rules over the observation, plus the order and customer lookups it makes itself.

    Honest and shallow, as a quick script would be: the claim from keywords (the first one it
    recognises), the day count from the record or the header — or, when the ticket gives only dates,
    from what the customer says ("about two weeks ago") —, the order's first item and its total. It
    does not do date arithmetic, match the claimed item among several, weigh two claims (P13), or
    know that a warranty claim needs photos too (P11)."""

    def __init__(self, seed: int = 0) -> None:
        self.order: dict[str, Any] | None = None
        self.customer: dict[str, Any] | None = None
        self.asked: set[str] = set()
        self.looked_policy = False

    def _days(self, obs: Observation) -> int | None:
        assert self.order is not None
        if self.order.get("days_since_delivery") is not None:
            return self.order["days_since_delivery"]
        header = _HEADER_DAYS.search(obs.ticket)
        if header:
            return int(header.group(1))
        said = _SAID_AGO.search(obs.customer_message.lower())
        if said:
            n = said.group(1)
            count = int(n) if n.isdigit() else WORD_NUMBERS.get(n, 1)
            return count * {"day": 1, "week": 7, "month": 30}[said.group(2)]
        return None

    def _judge(self, obs: Observation) -> _Judged:
        """Returns (decision, topic to ask about, denial reason, refund amount)."""
        assert self.order is not None and self.customer is not None
        msg = obs.customer_message.lower()
        answers = " ".join(e.text.lower() for e in obs.history[1:] if e.role == "customer")
        issue = read_issue(msg)
        if issue == "vague" and answers:
            issue = read_issue(answers)
        amount = self.order["total"]
        if issue == "vague":
            return "request_info", "details", None, amount
        if issue == "duplicate_charge":
            if self.order["payment"]["charges"] > 1:
                return "approve_refund", None, None, amount
            return "reject", None, "not_charged_twice", amount
        carrier = self.order["carrier"]
        verified = issue == "not_received" and (
            carrier["status"] in ("lost", "returned")
            or (carrier["status"] == "in_transit" and carrier["days_past_estimate"] > LATE_IN_TRANSIT_DAYS)
        )
        c = self.customer
        if high_risk(c["returns_12m"], c["chargebacks"], bool(c["account_flags"])) and not verified:
            return "reject", None, "unverifiable", amount
        decision, topic, reason = (
            self._parcel(verified, answers)
            if issue == "not_received"
            else self._by_claim(obs, issue, msg + " " + answers, answers)
        )
        return decision, topic, reason, amount

    def _approve(self) -> str:
        """The remedy it grants: a replacement of the first item when it is in stock, else a refund."""
        assert self.order is not None
        return "approve_replacement" if self.order["items"][0]["in_stock"] else "approve_refund"

    def _parcel(self, verified: bool, answers: str) -> _Rule:
        assert self.order is not None
        if verified:
            return self._approve(), None, None
        if self.order["carrier"]["status"] == "in_transit":
            return "reject", None, "in_transit"
        if "delivery" not in self.asked:
            return "request_info", "delivery", None
        return ("reject", None, "parcel_found") if _has(answers, _FOUND) else (self._approve(), None, None)

    def _by_claim(self, obs: Observation, issue: str, text: str, answers: str) -> _Rule:
        """The rule for a delivered item: wrong item, damage or defect, or a return."""
        assert self.order is not None
        days = self._days(obs)
        in_window = days is None or days <= RETURN_WINDOW_DAYS
        item = self.order["items"][0]
        if issue == "wrong_item":
            return (self._approve(), None, None) if in_window else ("reject", None, "window")
        if issue in ("damaged", "defective"):
            if in_window:
                images = "images provided: true" in obs.ticket.lower()
                if not images and "photos" not in self.asked:
                    return "request_info", "photos", None
                if not images and _has(answers, _WEAR):
                    return "reject", None, "normal_wear"
                return self._approve(), None, None
            if issue == "defective" and days is not None and days <= item["warranty_days"]:
                return self._approve(), None, None
            return "reject", None, "warranty" if issue == "defective" else "window"
        if item["final_sale"] or item["hygiene"] or item["perishable"]:
            return "reject", None, "final_sale"
        if not in_window:
            return "reject", None, "window"
        refund = self._approve() if issue == "size_issue" else "approve_refund"
        if issue != "item_used" and _has(text, _UNUSED):
            return refund, None, None
        if issue == "item_used" or _has(text, _USED):
            return "reject", None, "used"
        if "usage" not in self.asked:
            return "request_info", "usage", None
        return refund, None, None

    def act(self, obs: Observation) -> Action:
        # remember what lookups returned (the observation only carries the latest result)
        if isinstance(obs.tool_result, dict):
            if "carrier" in obs.tool_result:
                self.order = obs.tool_result
            elif "customer_id" in obs.tool_result:
                self.customer = obs.tool_result
        if self.order is None:
            return Action(lookup="order")
        if self.customer is None:
            return Action(lookup="customer")
        task = get_task(obs.task_id)
        decision, topic, reason, amount = self._judge(obs)
        order_id = self.order["order_id"]
        if task.grades("policy_lookup") and not self.looked_policy:
            self.looked_policy = True
            return Action(lookup="policy")
        if task.answer == "decision" and decision == "request_info":
            self.asked.add(topic or "details")
            return Action(decision="request_info", reply=_QUESTIONS[topic or "details"])
        queue = self._queue(obs, decision, reason, amount) if task.grades("queue") else "Returns"

        def reply(role: ReplyRole) -> str:
            if role == "holding":
                return holding_reply(queue, order_id)
            return resolution_reply(decision, reason, order_id, amount if decision == "approve_refund" else None)

        return task_action(task, decision, _outcome_tag(decision, reason), queue, reply)

    @staticmethod
    def _queue(obs: Observation, decision: str, reason: str | None, amount: float) -> str:
        """The team it routes to: Fraud for what P7 declines, Billing for a double charge, Escalations for a
        large refund, Returns for the rest."""
        if reason == "unverifiable":
            return "Fraud"
        if read_issue(obs.customer_message) == "duplicate_charge":
            return "Billing"
        if decision == "approve_refund" and amount > ESCALATION_THRESHOLD:
            return "Escalations"
        return "Returns"


# --------------------------------------------------------------------------------- evaluator

AGENT_NAMES = ("random", "heuristic")


def make_agent(name: str, seed: int, ticket_id: str, dataset: Dataset = PUBLIC) -> Agent:
    """The reference agent ``name`` for the ticket ``ticket_id`` (its family's own agent)."""
    return family_agent(name, "store" if ticket_id.startswith(STORE_TICKET_PREFIX) else "ticket", seed)


def family_agent(name: str, family: str, seed: int) -> Agent:
    """The reference agent ``name`` (``random`` or ``heuristic``) of a task family: the ticket families'
    play the ticket actions, any other (the store desk's) tool calls."""
    store = family not in (*TICKET_FAMILIES, "ticket")
    if name == "random":
        return StoreRandomAgent(seed) if store else RandomAgent(seed)
    if name == "heuristic":
        return StoreHeuristicAgent(seed) if store else HeuristicAgent(seed)
    raise ValueError(f"unknown agent {name!r}; choose one of: {', '.join(AGENT_NAMES)}")


def play(agent: Agent, task_id: str, seed: int, split: str, dataset: Dataset = PUBLIC) -> tuple[Grade, list[Action]]:
    """Play one episode of ``agent`` to the end; returns (grade, actions)."""
    state, obs = reset(task_id, seed, split, dataset)
    actions: list[Action] = []
    while not state.done:
        action = agent.act(obs)
        actions.append(action)
        result = step(state, action, dataset)
        state, obs = result.state, result.observation
    return grade_episode(state, dataset), actions


def play_episode(
    agent_name: str, task_id: str, seed: int, split: str, dataset: Dataset = PUBLIC
) -> tuple[float, list[Action]]:
    """Play one episode of a reference agent to the end; returns (score, actions)."""
    ticket_id = reset(task_id, seed, split, dataset)[0].ticket_id
    grade, actions = play(make_agent(agent_name, seed, ticket_id, dataset), task_id, seed, split, dataset)
    return grade.score, actions


def evaluate_agent(
    agent_name: str, split: str, seeds_per_task: int, task_ids: list[str] | None = None
) -> dict[str, Any]:
    """Resolved rate and mean score per task over seeds ``0 .. seeds_per_task-1``. Deterministic."""
    tasks: dict[str, Any] = {}
    for task_id in task_ids or list(TASKS):
        grades = []
        for seed in range(seeds_per_task):
            ticket_id = reset(task_id, seed, split)[0].ticket_id
            grades.append(play(make_agent(agent_name, seed, ticket_id), task_id, seed, split)[0])
        tasks[task_id] = {
            "resolved": round(mean(g.resolved for g in grades), 4),
            "mean": round(mean(g.score for g in grades), 4),
            "episodes": len(grades),
        }
    return {
        "agent": agent_name,
        "split": split,
        "tasks": tasks,
        "resolved": round(mean(t["resolved"] for t in tasks.values()), 4),
        "overall": round(mean(t["mean"] for t in tasks.values()), 4),
    }
