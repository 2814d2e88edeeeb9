"""Degenerate agents: ways to score without doing the job. The gaming suite (``tests/env/test_gaming.py``)
bounds each of them, and ``python -m bench.gaming`` prints their table for the README. They live in
bench/ (not installed, and importing nothing from tests/) so that both the table and the suite use them.

None of them reads the customer's message to decide. Each plays every task (an action that means
nothing for a task still plays out, and the episode ends at the step limit at worst). A constant
answer comes with the reply a competent agent would send for that answer ("we have approved a full
refund for order X"), so the reply checks pass whenever the constant happens to be right: what a
constant earns is what the label distribution gives away. Strategies that *guess* one answer — a
constant, the most frequent training label, a position lookup table — are held to an absolute cap
(:data:`GUESS_RESOLVED`, :data:`GUESS_MEAN`), never to a bound computed from themselves; the others
must earn nothing. Every exploit found becomes an agent here, with its bound.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from service.env import TICKET_TASKS as TASKS  # the ticket tasks; the store desk's: bench.store_gaming_agents
from service.env import Action, Dataset, Observation, get_task
from service.env.agents import HeuristicAgent
from service.env.models import QUEUES, TAGS
from service.env.policy import REASONS, evaluate

OUTCOME_TAGS = ("Refund", "Replacement", "Policy_Denied", "Needs_Info", "Fraud_Risk")
CATCH_ALL_QUESTION = (
    "Could you send photos, tell me whether the item was used, check whether the parcel turned up, "
    "and describe exactly what the problem is?"
)
_ORDER_ID = re.compile(r"ORD-\d+")
_TAG_OF = {
    "approve_refund": "Refund",
    "approve_replacement": "Replacement",
    "reject": "Policy_Denied",
    "request_info": "Needs_Info",
}


def order_id(obs: Observation) -> str:
    found = _ORDER_ID.search(obs.ticket)
    return found.group(0) if found else ""


def polite_reply(obs: Observation) -> str:
    return (
        f"Thank you for contacting us about order {order_id(obs)}. I'm sorry for the trouble; "
        "the right team will look into it and get back to you shortly."
    )


def matching_reply(answer: Answer, obs: Observation) -> str:
    """The plain, courteous reply for a constant answer, written without reading the ticket: an approval
    says what is approved, a denial gives the one reason the constant names."""
    oid = order_id(obs)
    decision, _, reason = answer.partition("/")
    if decision == "approve_refund":
        return (
            f"Thank you for contacting us about order {oid}, and I'm sorry for the trouble. "
            f"We have approved a full refund for order {oid}."
        )
    if decision == "approve_replacement":
        return (
            f"Thank you for contacting us about order {oid}, and I'm sorry for the trouble. "
            f"We have approved a replacement "
            f"for order {oid}: the new item ships today."
        )
    denial = _DENIALS.get(reason, _DENIALS["unverifiable"])
    return f"Thank you for contacting us about order {oid}. I'm sorry, but {denial}."


_DENIALS = {
    "window": (
        "the item was delivered more than 30 days ago, outside our 30-day return window, so we can't accept the return"
    ),
    "used": "the item has been used, so we can't accept the return: only unused items can be returned",
    "final_sale": "this is a final-sale item, so it can't be returned",
    "warranty": "the warranty on this item has ended, so we can't replace or refund it",
    "normal_wear": "the photos show normal wear and tear, not a defect, so we can't replace it",
    "in_transit": "your parcel is still in transit and not yet late, so it's too early for a refund or replacement",
    "parcel_found": "as the parcel has turned up, there's nothing to refund or replace",
    "not_charged_twice": "our records show you were charged only once, so there's no second charge to refund",
    "unverifiable": "we're unable to verify this claim from our order and carrier records, so we can't approve it",
}


def stuffed_reply(obs: Observation) -> str:
    """Every reason and approval word the old substring grader looked for, in one courteous reply."""
    return (
        f"Thank you for contacting us about order {order_id(obs)}, and I'm sorry. Under our 30-day return "
        "window, used or worn items, final sale and hygiene items, the warranty, parcels still in transit and "
        "on their way, a payment record with a single charge, and items found, we are unable to approve some "
        "claims; otherwise we arrange a refund or a replacement."
    )


# ------------------------------------------------------------------------------- answers

Answer = str  # decision tasks: a decision; triage: a tag; routing: a queue; resolution: "decision/tag"


def answer_of(task_id: str, ticket) -> Answer:
    """The core label of a ticket for a task (what a lookup table would learn)."""
    v = evaluate(ticket)
    if task_id == "workflow-triage":
        return v.tag
    if task_id == "workflow-routing":
        return v.queue
    if task_id == "workflow-resolution":
        return f"{v.gold}/{v.tag}"
    return v.gold


def answers_for(task_id: str) -> list[Answer]:
    """Every answer a constant strategy could give on a task."""
    if task_id == "workflow-triage":
        return list(OUTCOME_TAGS)
    if task_id == "workflow-routing":
        return [q for q in QUEUES if q != "General"]
    decisions = ["approve_refund", "approve_replacement", "reject"]
    if task_id == "workflow-resolution":
        return (
            ["approve_refund/Refund", "approve_replacement/Replacement"]
            + [f"reject/Policy_Denied/{r}" for r in REASONS if r != "unverifiable"]
            + ["reject/Fraud_Risk/unverifiable"]
        )
    return decisions + ["request_info"]


def answer_script(
    task_id: str, answer: Answer, obs: Observation, reply: Callable[[Observation], str] | None = None
) -> list[Action]:
    """The actions that give ``answer`` on ``task_id`` with a complete-looking workflow; the reply is the
    one that matches the answer unless another is given."""
    family = get_task(task_id).family
    if family == "decision":
        if answer == "request_info":
            return [Action(decision="request_info", reply=CATCH_ALL_QUESTION), Action(decision="reject")]
        return [Action(decision=answer)]
    if task_id == "workflow-triage":
        return [Action(add_tag=answer, close_ticket=True)]
    if task_id == "workflow-routing":
        return [Action(reassign_queue=answer, reply=polite_reply(obs), close_ticket=True)]
    decision, tag = answer.split("/")[:2]
    text = reply(obs) if reply is not None else matching_reply(answer, obs)
    return [Action(lookup="policy"), Action(decision=decision, add_tag=tag, reply=text, close_ticket=True)]


@dataclass
class Scripted:
    """Plays a fixed list of actions (computed from the first observation), then repeats a harmless lookup."""

    plan: Callable[[Observation], list[Action]]
    queue: list[Action] | None = None

    def act(self, obs: Observation) -> Action:
        if self.queue is None:
            self.queue = self.plan(obs)
        return self.queue.pop(0) if self.queue else Action(lookup="policy")


# ---------------------------------------------------------------------------- strategies


@dataclass(frozen=True)
class Strategy:
    name: str
    guesses: bool  # gives one answer without reading: bounded by the best constant answer
    make: Callable[[str, int], object]  # (task_id, seed) -> agent
    note: str = ""
    # A strategy that reads only part of what an agent sees (the header, the customer's answers): its
    # resolved rate on every task stays at or below this (None: the bounds of the two kinds above).
    reads_part: float | None = None


def constant(
    answer_by_task: dict[str, Answer], reply: Callable[[Observation], str] | None = None
) -> Callable[[str, int], object]:
    return lambda task_id, seed: Scripted(lambda obs: answer_script(task_id, answer_by_task[task_id], obs, reply))


def ask_then_constant(
    answer_by_task: dict[str, Answer], reply: Callable[[Observation], str] | None = None
) -> Callable[[str, int], object]:
    """Look up the policy, ask the catch-all question, then give the constant answer (with its reply)."""

    def plan(task_id: str, obs: Observation) -> list[Action]:
        answer = answer_by_task[task_id]
        if answer == "request_info":
            answer = "reject"
        script = answer_script(task_id, answer, obs, reply)
        lookup = [] if script[0].lookup == "policy" else [Action(lookup="policy")]
        return [*lookup, *script[:-1], Action(decision="request_info", reply=CATCH_ALL_QUESTION), script[-1]]

    return lambda task_id, seed: Scripted(lambda obs: plan(task_id, obs))


# The audit's agent: it never reads the ticket — policy lookup, the catch-all question, then an approved
# refund with the Refund tag and a plain approval reply, close. Each task's version of "approve a refund".
APPROVE_REFUND = {
    "decision-easy": "approve_refund",
    "decision-medium": "approve_refund",
    "decision-hard": "approve_refund",
    "workflow-triage": "Refund",
    "workflow-routing": "Returns",
    "workflow-resolution": "approve_refund/Refund",
}


def every_tag(task_id: str, seed: int) -> object:
    return Scripted(lambda obs: [Action(add_tag=t) for t in TAGS] + [Action(close_ticket=True)])


def outcome_tags(task_id: str, seed: int) -> object:
    return Scripted(
        lambda obs: (
            [Action(add_tag=t) for t in ("Refund", "Replacement", "Policy_Denied")] + [Action(close_ticket=True)]
        )
    )


def every_queue(task_id: str, seed: int) -> object:
    return Scripted(
        lambda obs: (
            [Action(reassign_queue=q) for q in QUEUES if q != "General"]
            + [Action(reply=polite_reply(obs), close_ticket=True)]
        )
    )


def close_immediately(task_id: str, seed: int) -> object:
    return Scripted(lambda obs: [Action(close_ticket=True)])


def policy_text_reply(task_id: str, seed: int) -> object:
    """Look up the policy and send the policy document back as the reply, with a constant decision."""

    @dataclass
    class Agent:
        step: int = 0
        policy: str = ""

        def act(self, obs: Observation) -> Action:
            self.step += 1
            if self.step == 1:
                return Action(lookup="policy")
            if isinstance(obs.tool_result, str):
                self.policy = obs.tool_result
            text = self.policy[:2000]
            family = get_task(task_id).family
            if family == "decision":
                return Action(decision="reject", reply=text)
            return Action(
                decision="reject", add_tag="Policy_Denied", reassign_queue="Returns", reply=text, close_ticket=True
            )

    return Agent()


# --------------------------------------------------------- reading part of what an agent sees

_ITEM = re.compile(r"(?P<name>[^·(]+?) \((?P<category>[a-z]+)\)(?: (?:(?P<qty>\d+) × )?\$(?P<price>[\d.]+))?")
_HYGIENE_CATEGORIES = frozenset({"beauty"})  # a guess a header reader can make: the header shows no flags


def header_of(obs: Observation) -> str:
    """The ticket's header lines (subject, order, images, past returns, tier, the day it was opened):
    everything above the customer's message."""
    return obs.ticket.split("\n\n", 1)[0]


def subject_of(obs: Observation) -> str:
    first = header_of(obs).splitlines()[0]
    return first.split(": ", 1)[1] if ": " in first else ""


def records_from_header(obs: Observation) -> tuple[dict[str, object], dict[str, object]]:
    """The order and customer records as far as the header shows them; what it does not show (stock,
    flags, carrier data, charges, chargebacks) is given its most common value."""
    lines = header_of(obs).splitlines()
    order_line, facts = lines[1], lines[2]
    days = re.search(r"delivered (\d+) days? ago", order_line)
    dates = re.findall(r"\d{4}-\d{2}-\d{2}", order_line)
    delivered = "not delivered" not in order_line
    body = order_line.split(" · ", 1)[1]
    items = [
        {
            "name": m["name"].strip().removeprefix("3 items: ").removeprefix("2 items: "),
            "category": m["category"],
            "unit_price": float(m["price"]) if m["price"] else float(re.findall(r"total \$([\d.]+)", body)[0]),
            "quantity": int(m["qty"] or 1),
            "in_stock": True,
            "final_sale": False,
            "hygiene": m["category"] in _HYGIENE_CATEGORIES,
            "perishable": m["category"] == "grocery",
            "warranty_days": 365,
        }
        for m in _ITEM.finditer(body)
    ]
    order: dict[str, object] = {
        "order_id": order_id(obs),
        "order_date": dates[0] if dates else None,
        "delivery_date": dates[1] if len(dates) > 1 and delivered else None,
        "items": items,
        "total": float(re.findall(r"total \$([\d.]+)", order_line)[0]),
        "carrier": {"status": "delivered" if delivered else "in_transit", "days_past_estimate": 0},
        "payment": {"method": "card", "charges": 1},
    }
    if days:
        order["days_since_delivery"] = int(days.group(1))
    returns = re.search(r"Past returns: (\d+)", facts)
    customer = {
        "customer_id": "",
        "returns_12m": int(returns.group(1)) if returns else 0,
        "chargebacks": 0,
        "account_flags": [],
    }
    return order, customer


class _MaskedHeuristic(HeuristicAgent):
    """The heuristic's rules over a masked view of the observation: the ticket is its header only, and
    the "message" is what the strategy reads instead of the customer's message."""

    def message(self, obs: Observation) -> str:
        raise NotImplementedError

    def act(self, obs: Observation) -> Action:
        masked = obs.model_copy(update={"ticket": header_of(obs) + "\n\n", "customer_message": self.message(obs)})
        return super().act(masked)


class HeaderAndLookups(_MaskedHeuristic):
    """Reads the header (the subject line as its message) and looks the records up; never the message,
    and it never asks (a question the header cannot justify fails the episode): where the heuristic's
    rules would ask, it declines."""

    def message(self, obs: Observation) -> str:
        return subject_of(obs)

    def _judge(self, obs: Observation) -> tuple[str, str | None, str | None, float]:
        decision, topic, reason, amount = super()._judge(obs)
        if decision == "request_info":
            return "reject", None, None, amount
        return decision, topic, reason, amount


class HeaderOnly(HeaderAndLookups):
    """Reads the header only: no lookups, the records as far as the header shows them."""

    def act(self, obs: Observation) -> Action:
        if self.order is None:
            self.order, self.customer = records_from_header(obs)
        return super().act(obs)


class AnswerOnly(_MaskedHeuristic):
    """Never reads the message: asks the catch-all question first, then applies the heuristic's rules to
    the customer's answer instead (with the header and its own lookups)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.asked_once = False

    def message(self, obs: Observation) -> str:
        return " ".join(e.text for e in obs.history[1:] if e.role == "customer")

    def act(self, obs: Observation) -> Action:
        if not self.asked_once:
            self.asked_once = True
            return Action(decision="request_info", reply=CATCH_ALL_QUESTION)
        return super().act(obs)


# ------------------------------------------------------------------ learned from train labels


def majority_answers(rows_by_task: dict[str, list[tuple[int, str, Answer]]]) -> dict[str, Answer]:
    return {t: Counter(a for *_, a in rows).most_common(1)[0][0] for t, rows in rows_by_task.items()}


def position_features(seed: int, ticket_id: str) -> dict[str, int]:
    """Everything a ticket's position says: the seed, its residues, and the id's digits."""
    id_number = int(re.sub(r"[^0-9a-f]", "", ticket_id.removeprefix("tk_").lower()) or "0", 16)
    features = {"seed": seed}
    for period in range(2, 65):
        features[f"seed%{period}"] = seed % period
        features[f"id%{period}"] = id_number % period
    return features


@dataclass
class PositionClassifier:
    """A lookup table from one position feature to the most frequent training label.

    The feature is chosen on the training pool itself (fit on one half, scored on the other), the
    way an attacker without the held-out labels would choose it.
    """

    feature: str
    table: dict[int, Answer]
    fallback: Answer

    @classmethod
    def fit(cls, rows: list[tuple[int, str, Answer]]) -> PositionClassifier:
        halves = (rows[: len(rows) // 2], rows[len(rows) // 2 :])
        names = list(position_features(0, "tk_0"))
        best = max(names, key=lambda name: sum(cls._table(a, name).accuracy(b) for a, b in (halves, halves[::-1])))
        return cls._table(rows, best)

    @classmethod
    def _table(cls, rows: list[tuple[int, str, Answer]], name: str) -> PositionClassifier:
        counts: dict[int, Counter] = {}
        for seed, tid, answer in rows:
            counts.setdefault(position_features(seed, tid)[name], Counter())[answer] += 1
        fallback = Counter(a for *_, a in rows).most_common(1)[0][0]
        return cls(name, {k: c.most_common(1)[0][0] for k, c in counts.items()}, fallback)

    def predict(self, seed: int, ticket_id: str) -> Answer:
        return self.table.get(position_features(seed, ticket_id)[self.feature], self.fallback)

    def accuracy(self, rows: list[tuple[int, str, Answer]]) -> float:
        return sum(self.predict(s, t) == a for s, t, a in rows) / len(rows)


def labelled_rows(task_id: str, split: str, dataset: Dataset) -> list[tuple[int, str, Answer]]:
    """(seed, ticket id, answer) for every ticket of a task's pool."""
    task = TASKS[task_id]
    pool = dataset.pool(split, task.family, task.difficulty)
    return [(k, tid, answer_of(task_id, dataset.ticket(tid))) for k, tid in enumerate(pool)]


def position_lookup(
    classifiers: dict[str, PositionClassifier], dataset: Dataset, split: str
) -> Callable[[str, int], object]:
    def make(task_id: str, seed: int) -> object:
        task = TASKS[task_id]
        pool = dataset.pool(split, task.family, task.difficulty)
        answer = classifiers[task_id].predict(seed, pool[seed % len(pool)])
        return Scripted(lambda obs: answer_script(task_id, answer, obs))

    return make


@dataclass
class RewardProber:
    """Tries answers in turn and keeps the first that paid a positive step reward (needs dense
    rewards: plain train episodes). Falls back to the most frequent training answer."""

    task_id: str
    fallback: Answer
    tried: list[Answer] = field(default_factory=list)
    pending: list[Action] = field(default_factory=list)
    stage: int = 0

    def act(self, obs: Observation) -> Action:
        if self.pending:
            return self.pending.pop(0)
        family = get_task(self.task_id).family
        self.stage += 1
        if family == "decision":
            if self.stage == 1:  # does asking pay? then the ticket needs information
                return Action(decision="request_info", reply=CATCH_ALL_QUESTION)
            answer = self.fallback if self.fallback != "request_info" else "reject"
            return Action(decision=answer)
        if self.task_id == "workflow-triage":
            if self.tried and (obs.reward or 0) > 0:
                return Action(close_ticket=True)
            candidates = [t for t in OUTCOME_TAGS if t not in self.tried]
            if not candidates:
                return Action(close_ticket=True)
            self.tried.append(candidates[0])
            return Action(add_tag=candidates[0])
        if self.task_id == "workflow-routing":
            if self.tried and (obs.reward or 0) > 0:
                return Action(reply=polite_reply(obs), close_ticket=True)
            candidates = [q for q in QUEUES if q != "General" and q not in self.tried]
            if not candidates:
                return Action(reply=polite_reply(obs), close_ticket=True)
            self.tried.append(candidates[0])
            return Action(reassign_queue=candidates[0])
        if self.stage == 1:
            return Action(lookup="policy")
        if self.tried and (obs.reward or 0) > 0:
            tag = self.tried[-1].split("/")[1]
            return Action(add_tag=tag, reply=matching_reply(self.tried[-1], obs), close_ticket=True)
        candidates = [
            a
            for a in answers_for(self.task_id)
            if a not in self.tried and a.split("/")[0] not in {t.split("/")[0] for t in self.tried}
        ]
        if not candidates:
            return Action(
                reply=matching_reply(self.tried[-1], obs) if self.tried else stuffed_reply(obs), close_ticket=True
            )
        self.tried.append(candidates[0])
        return Action(decision=candidates[0].split("/")[0])


def strategies(train: dict[str, list[tuple[int, str, Answer]]], dataset: Dataset, split: str) -> list[Strategy]:
    """Every degenerate strategy, fitted on the training labels where it learns something."""
    majority = majority_answers(train)
    classifiers = {t: PositionClassifier.fit(rows) for t, rows in train.items()}
    return [
        Strategy("position lookup table (learned on train)", True, position_lookup(classifiers, dataset, split)),
        Strategy("most frequent train answer per task", True, constant(majority)),
        Strategy("request_info, then a constant answer", True, ask_then_constant(majority)),
        Strategy("policy, catch-all question, approve refund + plain reply", True, ask_then_constant(APPROVE_REFUND)),
        Strategy("every tag, then close", False, every_tag),
        Strategy("the three outcome tags, then close", False, outcome_tags),
        Strategy("every queue in turn, polite reply, close", False, every_queue),
        Strategy(
            "constant queue (Returns) + polite reply",
            True,
            constant({t: ("Returns" if t == "workflow-routing" else majority[t]) for t in TASKS}, polite_reply),
        ),
        Strategy("policy text as the reply, constant reject", True, policy_text_reply),
        Strategy("keyword-stuffed reply + constant decision", True, constant(majority, stuffed_reply)),
        Strategy("close immediately", False, close_immediately),
        Strategy("reward prober (dense rewards)", True, lambda task_id, seed: RewardProber(task_id, majority[task_id])),
        Strategy(
            "header only (the heuristic's rules, no message, no lookups)",
            False,
            _agent(HeaderOnly),
            "",
            HEADER_ONLY_RESOLVED,
        ),
        Strategy(
            "header + lookups (the heuristic's rules, no message)",
            False,
            _agent(HeaderAndLookups),
            "",
            HEADER_LOOKUPS_RESOLVED,
        ),
        Strategy(
            "answer only (catch-all question, the heuristic's rules on the answer)",
            False,
            _agent(AnswerOnly),
            "",
            ANSWER_ONLY_RESOLVED,
        ),
    ]


def _agent(cls: type[HeuristicAgent]) -> Callable[[str, int], object]:
    return lambda task_id, seed: cls(seed)


# ------------------------------------------------------------------------------- evaluation


def play_pool(make: Callable[[str, int], object], task_id: str, split: str, dataset: Dataset) -> tuple[float, float]:
    """(resolved rate, mean score) of an agent factory over every ticket of a task's pool."""
    from service.env.agents import play

    task = TASKS[task_id]
    n = len(dataset.pool(split, task.family, task.difficulty))
    grades = [play(make(task_id, seed), task_id, seed, split, dataset)[0] for seed in range(n)]  # type: ignore[arg-type]
    return sum(g.resolved for g in grades) / n, sum(g.score for g in grades) / n


def constant_ceiling(task_id: str, split: str, dataset: Dataset) -> tuple[float, float]:
    """What the best constant answer genuinely earns on a pool: (resolved, mean score), each maximised
    over every answer, given plainly or after a catch-all question."""
    best_resolved, best_mean = 0.0, 0.0
    for answer in answers_for(task_id):
        for factory in (constant, ask_then_constant):
            resolved, mean = play_pool(factory({task_id: answer}), task_id, split, dataset)
            best_resolved, best_mean = max(best_resolved, resolved), max(best_mean, mean)
    return best_resolved, best_mean


FLAT_RESOLVED, FLAT_MEAN, MARGIN = 0.15, 0.30, 0.05
# Every pool deals its four outcomes round-robin, none to more than 2/7 of a pool (routing's Returns,
# Fraud and Escalations; the four decisions and tags get 1/4 each), and the quarter that needs asking is
# dealt evenly among three answers after asking. A guess that never reads the ticket — plainly or after a
# catch-all question — is therefore right on at most 1/4 + 1/12 = 1/3 of a pool: 23 of 66 (0.348) with
# the rounding of a dev pool, 67 of 200 (0.335) on train. A generator change that skews a pool's labels
# lets some constant through this cap and fails the suite.
GUESS_RESOLVED = 0.35
# The mean adds partial credit: asking first earns the information check (0.3 of a decision ticket's
# score) on the quarter of tickets that need asking, and an acceptable alternative earns half the
# decision — a constant approve_refund after a catch-all question measures 0.49-0.50 on the decision pools.
GUESS_MEAN = 0.55


# Strategies that read part of the ticket: caps on their resolved rate on every task. Before #21 (a free
# question, answered by restating the claim) the audit measured header only 0.51 / 0.54 of two secret test
# splits, header + lookups 0.65 / 0.68, answer only 0.97 / 0.98 (these agents, on dev: header + lookups 1.00
# of decision-easy, answer only 0.84 overall). The targets were 0.35 and 0.50: header + lookups meets its
# target (at most 0.45, routing); header only does not on routing (0.39 of dev: the total names the
# Escalations queue, the subject a double charge's Billing, the past returns a Fraud account), so its cap is
# what it reaches and the README says so. An answer-only agent resolves what a guess does, far below the
# heuristic that reads the message.
HEADER_ONLY_RESOLVED = 0.40
HEADER_LOOKUPS_RESOLVED = 0.50
ANSWER_ONLY_RESOLVED = GUESS_RESOLVED


def bounds(strategy: Strategy) -> tuple[float, float]:
    """A strategy that answers nothing earns nothing; one that guesses earns at most what a balanced
    pool gives a constant: absolute caps, not a bound computed from the strategies themselves. One that
    reads part of the ticket stays under its own cap."""
    if strategy.reads_part is not None:
        return strategy.reads_part, 1.0
    if not strategy.guesses:
        return FLAT_RESOLVED, FLAT_MEAN
    return GUESS_RESOLVED, GUESS_MEAN
