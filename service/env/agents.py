"""Reference agents and a deterministic evaluator.

- ``random``: uniformly random valid actions (a floor).
- ``heuristic``: honest keyword rules over what it observes — the ticket text, the customer's
  answers and its own lookups. It never reads gold labels or hidden facts.
- ``oracle``: reads the policy verdict of the ticket. For tests only: it proves every task can be
  solved with score 1.0.
"""

from __future__ import annotations

import random
import re
from statistics import mean
from typing import Any, Protocol

from service.env.core import reset, step
from service.env.dataset import PUBLIC, Dataset
from service.env.generator import stable_seed
from service.env.grading import grade_episode
from service.env.models import DECISIONS, LOOKUP_TARGETS, QUEUES, TAGS, Action, Grade, Observation
from service.env.policy import ESCALATION_THRESHOLD, evaluate
from service.env.tasks import TASKS, get_task


class Agent(Protocol):
    def act(self, obs: Observation) -> Action: ...


# ----------------------------------------------------------------------------------- random

class RandomAgent:
    """Random valid actions; decision tasks get a random decision, workflow tasks random parts."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(stable_seed("random-agent", seed))

    def act(self, obs: Observation) -> Action:
        rng = self.rng
        if get_task(obs.task_id).family == "decision":
            decision = rng.choice(DECISIONS)
            return Action(decision=decision, reply="Could you send photos and tell me more?" if decision == "request_info" else None)
        parts: dict[str, Any] = {}
        choice = rng.randrange(6)
        if choice == 0:
            parts["add_tag"] = rng.choice(TAGS)
        elif choice == 1:
            parts["reassign_queue"] = rng.choice(QUEUES)
        elif choice == 2:
            parts["decision"] = rng.choice(DECISIONS)
        elif choice == 3:
            parts["reply"] = rng.choice(("Thanks for reaching out, we are looking into it.", "We cannot help with this.", "Your refund is approved."))
        elif choice == 4:
            parts["lookup"] = rng.choice(LOOKUP_TARGETS)
        else:
            parts["close_ticket"] = True
        return Action(**parts)


# -------------------------------------------------------------------------------- heuristic

_ISSUE_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("duplicate_charge", ("charged twice", "two charges", "two payments", "double charge", "charged me twice", "billed twice", "double-charged", "charged double")),
    ("not_received", ("never arrived", "hasn't arrived", "has not arrived", "didn't arrive", "not arrived", "never got", "never received", "not received", "still waiting", "nothing here", "where is my", "no sign of")),
    ("wrong_item", ("wrong item", "wrong colour", "wrong color", "wrong size", "different item", "not what i ordered", "sent me the wrong", "different product", "wrong one", "instead of")),
    ("damaged", ("broken", "cracked", "smashed", "dent", "damaged", "shattered", "crushed", "torn", "ripped", "scratched")),
    ("defective", ("stopped working", "won't turn on", "wont turn on", "doesn't work", "does not work", "faulty", "defective", "dead", "won't charge", "malfunction", "not working", "broke down")),
    ("size_issue", ("too small", "too big", "too large", "too tight", "too loose", "doesn't fit", "does not fit", "didn't fit", "size")),
    ("item_used", ("used it", "i've used", "i have used", "after using", "tried it for", "been using")),
    ("changed_mind", ("changed my mind", "don't need", "do not need", "don't want", "no longer", "by mistake", "cheaper", "not for me", "don't like", "return it")),
)
_USED = ("worn", "wore", "washed", "used it", "been using", "tried it on a few", "used a few", "used once", "used twice")
_UNUSED = ("unused", "unworn", "tags on", "tags still", "never used", "never worn", "unopened", "sealed", "original packaging", "not used", "brand new", "still in the box")
_WEAR = ("wear", "worn", "faded", "scuff", "months of use", "normal use", "used a lot", "everyday use")
_FOUND = ("found it", "found the", "turned up", "neighbour had", "neighbor had", "was there", "sorry for the trouble", "located it")
_QUESTIONS = {
    "photos": "Could you please send photos of the item showing the problem?",
    "usage": "Could you tell me the item's condition — has it been used, worn or washed, and are the tags still on?",
    "delivery": "Could you please check with your neighbours, the porch and any parcel locker to see whether the parcel was delivered there?",
    "details": "Could you describe what happened and what exactly the problem with your order is?",
}
_DAYS = re.compile(r"delivered (\d+) days? ago")


def read_issue(text: str) -> str:
    low = text.lower()
    for issue, words in _ISSUE_WORDS:
        if any(w in low for w in words):
            return issue
    return "vague"


class HeuristicAgent:
    """Keyword rules over the observation, plus the order and customer lookups it makes itself."""

    def __init__(self, seed: int = 0) -> None:
        self.order: dict[str, Any] | None = None
        self.customer: dict[str, Any] | None = None
        self.asked: set[str] = set()
        self.decided: str | None = None
        self.replied = False
        self.tagged = False
        self.routed = False
        self.looked_policy = False

    # what the agent believes the policy outcome is, from what it has seen
    def _judge(self, obs: Observation) -> tuple[str, str | None, str | None]:
        """Returns (decision, topic to ask about, denial reason)."""
        assert self.order is not None and self.customer is not None
        msg = obs.customer_message.lower()
        answers = " ".join(e.text.lower() for e in obs.history[1:] if e.role == "customer")
        issue = read_issue(msg)
        if issue == "vague" and answers:
            issue = read_issue(answers)
        product, carrier = self.order["product"], self.order["carrier"]
        days = self.order["days_since_delivery"]
        in_stock = product["in_stock"]
        approve = "approve_replacement" if in_stock else "approve_refund"
        high_risk = self.customer["returns_12m"] >= 5 or self.customer["chargebacks"] > 0 or bool(self.customer["account_flags"])
        if issue == "vague":
            return "request_info", "details", None
        if issue == "duplicate_charge":
            return ("approve_refund", None, None) if self.order["payment"]["charges"] > 1 else ("reject", None, "not_charged_twice")
        verified = issue == "not_received" and (carrier["status"] in ("lost", "returned") or (carrier["status"] == "in_transit" and carrier["days_past_estimate"] > 7))
        if high_risk and not verified:
            return "reject", None, "unverifiable"
        if issue == "not_received":
            if verified:
                return approve, None, None
            if carrier["status"] == "in_transit":
                return "reject", None, "in_transit"
            if "delivery" not in self.asked:
                return "request_info", "delivery", None
            return ("reject", None, "parcel_found") if any(w in answers for w in _FOUND) else (approve, None, None)
        in_window = days is not None and days <= 30
        if issue == "wrong_item":
            return (approve, None, None) if in_window else ("reject", None, "window")
        if issue in ("damaged", "defective"):
            if in_window:
                images = "images attached: yes" in obs.ticket.lower()
                if not images and "photos" not in self.asked:
                    return "request_info", "photos", None
                if not images and any(w in answers for w in _WEAR):
                    return "reject", None, "normal_wear"
                return approve, None, None
            if issue == "defective" and days is not None and days <= product["warranty_days"]:
                return approve, None, None
            return "reject", None, "warranty" if issue == "defective" else "window"
        if product["final_sale"] or product["hygiene"] or product["perishable"]:
            return "reject", None, "final_sale"
        if not in_window:
            return "reject", None, "window"
        text = msg + " " + answers
        if issue == "item_used" or any(w in text for w in _USED):
            return "reject", None, "used"
        if not any(w in text for w in _UNUSED):
            if "usage" not in self.asked:
                return "request_info", "usage", None
            return "reject", None, "used"
        return (approve if issue == "size_issue" else "approve_refund"), None, None

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
        decision, topic, reason = self._judge(obs)
        order_id = self.order["order_id"]
        if task.family == "decision":
            if decision == "request_info":
                self.asked.add(topic or "details")
                return Action(decision="request_info", reply=_QUESTIONS[topic or "details"])
            return Action(decision=decision)
        if task.id == "workflow-triage":
            if decision == "request_info":
                return Action(add_tag="Needs_Info", close_ticket=True)
            tag = "Fraud_Risk" if reason == "unverifiable" else {"approve_refund": "Refund", "approve_replacement": "Replacement", "reject": "Policy_Denied"}[decision]
            return Action(add_tag=tag, close_ticket=True)
        if task.id == "workflow-routing":
            if reason == "unverifiable":
                queue = "Fraud"
            elif read_issue(obs.customer_message) == "duplicate_charge":
                queue = "Billing"
            elif decision == "approve_refund" and self.order["amount"] > ESCALATION_THRESHOLD:
                queue = "Escalations"
            else:
                queue = "Returns"
            return Action(
                reassign_queue=queue,
                reply=f"Thank you for contacting us about order {order_id}. I have passed your request to the right team and they will get back to you shortly.",
                close_ticket=True,
            )
        # resolution
        if not self.looked_policy:
            self.looked_policy = True
            return Action(lookup="policy")
        if decision == "request_info":
            self.asked.add(topic or "details")
            return Action(decision="request_info", reply=_QUESTIONS[topic or "details"])
        return Action(decision=decision, add_tag=_outcome_tag(decision, reason), reply=_resolution_reply(decision, reason, order_id), close_ticket=True)


def _outcome_tag(decision: str, reason: str | None) -> str:
    if reason == "unverifiable":
        return "Fraud_Risk"
    return {"approve_refund": "Refund", "approve_replacement": "Replacement", "reject": "Policy_Denied", "request_info": "Needs_Info"}[decision]


_REASON_SENTENCES = {
    "window": "our return window is 30 days from delivery and this request falls outside it",
    "used": "only unused items can be returned within our 30-day return window, and this item has been used",
    "final_sale": "this is a final sale or hygiene item, which cannot be returned for a change of mind or size",
    "warranty": "the warranty period for this product has ended",
    "normal_wear": "the photos show normal wear rather than a defect, which our 30-day return policy does not cover",
    "in_transit": "your parcel is still in transit and on its way to you",
    "parcel_found": "we are glad the parcel was found",
    "not_charged_twice": "our payment record shows a single charge for this order",
    "unverifiable": "we are unable to approve this request",
}


def _resolution_reply(decision: str, reason: str | None, order_id: str) -> str:
    if decision == "reject":
        why = _REASON_SENTENCES.get(reason or "", "we are unable to approve this request")
        return f"Thank you for contacting us about order {order_id}. I'm sorry, but {why}, so we cannot accept this claim."
    what = "a refund to your original payment method" if decision == "approve_refund" else "a replacement at no cost"
    return f"Thank you for contacting us about order {order_id}. I'm sorry for the trouble; we have arranged {what}."


# ----------------------------------------------------------------------------------- oracle

class OracleAgent:
    """Reads the verdict (gold) of its ticket. Tests only — never served as a baseline."""

    def __init__(self, ticket_id: str, dataset: Dataset = PUBLIC) -> None:
        self.ticket = dataset.ticket(ticket_id)
        self.revealed: frozenset[str] = frozenset()
        self.stage = 0

    def act(self, obs: Observation) -> Action:
        task = get_task(obs.task_id)
        t = self.ticket
        v = evaluate(t, self.revealed)
        if v.gold == "request_info" and task.id != "workflow-routing":
            self.revealed = self.revealed | {v.ask_topic or "details"}
            return Action(decision="request_info", reply=_QUESTIONS[v.ask_topic or "details"])
        if task.family == "decision":
            return Action(decision=v.gold)
        if task.id == "workflow-triage":
            return Action(add_tag=v.tag, close_ticket=True)
        if task.id == "workflow-routing":
            return Action(reassign_queue=v.queue, reply=f"Thank you for your patience with order {t.order.order_id}; the right team will contact you shortly.", close_ticket=True)
        if self.stage == 0:
            self.stage = 1
            return Action(lookup="policy")
        reason = v.reason if v.gold == "reject" else None
        reply = _resolution_reply(v.gold, reason, t.order.order_id)
        return Action(decision=v.gold, add_tag=v.tag, reply=reply, close_ticket=True)


# --------------------------------------------------------------------------------- evaluator

AGENT_NAMES = ("random", "heuristic", "oracle")


def make_agent(name: str, seed: int, ticket_id: str, dataset: Dataset = PUBLIC) -> Agent:
    if name == "random":
        return RandomAgent(seed)
    if name == "heuristic":
        return HeuristicAgent(seed)
    if name == "oracle":
        return OracleAgent(ticket_id, dataset)
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


def play_episode(agent_name: str, task_id: str, seed: int, split: str, dataset: Dataset = PUBLIC) -> tuple[float, list[Action]]:
    """Play one episode of a reference agent to the end; returns (score, actions)."""
    ticket_id = reset(task_id, seed, split, dataset)[0].ticket_id
    grade, actions = play(make_agent(agent_name, seed, ticket_id, dataset), task_id, seed, split, dataset)
    return grade.score, actions


def evaluate_agent(agent_name: str, split: str, seeds_per_task: int, task_ids: list[str] | None = None) -> dict[str, Any]:
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

