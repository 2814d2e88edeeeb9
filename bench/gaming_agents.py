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

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import cast

from service.env import PUBLIC, Action, Dataset, Observation, get_task
from service.env import TICKET_TASKS as TASKS  # the ticket tasks; the store desk's: bench.store_gaming_agents
from service.env.agents import HeuristicAgent, task_action
from service.env.models import OUTCOME_TAGS, QUEUES, TAGS
from service.env.policy import REASONS, evaluate

CATCH_ALL_QUESTION = (
    "Could you send photos, tell me whether the item was used, check whether the parcel turned up, "
    "and describe exactly what the problem is?"
)
_ORDER_ID = re.compile(r"ORD-\d+")


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
    parts = answer.split("/")  # "decision", "decision/tag" or "reject/tag/reason"
    decision, reason = parts[0], parts[-1] if parts[-1] in _DENIALS else ""
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

Answer = str  # the task's answer fields joined by "/" (answer_fields); a denial's reason may follow


def answer_fields(task_id: str) -> tuple[str, ...]:
    """What a task's answer is made of, from its declaration: what counts as its answer (the decision, the
    outcome tag or the team), and the outcome tag that records a decision where the rubric grades one."""
    task = get_task(task_id)
    fields = [task.answer or "decision"]
    if task.answer == "decision" and task.grades("outcome_tag"):
        fields.append("tag")
    return tuple(fields)


def answer_of(task_id: str, ticket) -> Answer:
    """The core label of a ticket for a task (what a lookup table would learn)."""
    v = evaluate(ticket)
    values = {"decision": v.gold, "tag": v.tag, "queue": v.queue}
    return "/".join(values[f] for f in answer_fields(task_id))


def answers_for(task_id: str) -> list[Answer]:
    """Every answer a constant strategy could give on a task."""
    task = get_task(task_id)
    if task.answer == "tag":
        return list(OUTCOME_TAGS)
    if task.answer == "queue":
        return [q for q in QUEUES if q != "General"]
    decisions = ["approve_refund", "approve_replacement", "reject"]
    if "tag" in answer_fields(task_id):
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
    one that matches the answer unless another is given (a holding reply is always the polite one)."""
    task = get_task(task_id)
    if task.ends_on_decision:
        if answer == "request_info":
            return [Action(decision="request_info", reply=CATCH_ALL_QUESTION), Action(decision="reject")]
        return [Action(decision=answer)]
    values = dict(zip(answer_fields(task_id), answer.split("/"), strict=False))

    def text(role: str) -> str:
        if role == "holding":
            return polite_reply(obs)
        return reply(obs) if reply is not None else matching_reply(answer, obs)

    lookup = [Action(lookup="policy")] if task.grades("policy_lookup") else []
    decision, tag, queue = (values.get(f, "") for f in ("decision", "tag", "queue"))
    return [*lookup, task_action(task, decision, tag, queue, text)]


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
    # resolved rate stays at or below this, on every task or per task (None: the bounds of the two kinds above).
    reads_part: float | dict[str, float] | None = None


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
_APPROVE_REFUND = {"decision": "approve_refund", "tag": "Refund", "queue": "Returns"}
APPROVE_REFUND = {t: "/".join(_APPROVE_REFUND[f] for f in answer_fields(t)) for t in TASKS}


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
            if get_task(task_id).ends_on_decision:
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


# ------------------------------------------- learned from train labels: the header and the records alone


def _days_since_delivery(obs: Observation, order: dict[str, object]) -> int | None:
    """The record's count, or the difference of the dates a hard ticket shows (one step of arithmetic)."""
    days = order.get("days_since_delivery")
    opened = re.search(r"Opened on (\S+)", header_of(obs))
    delivered = order.get("delivery_date")
    if days is None and isinstance(delivered, str) and opened:
        days = (date.fromisoformat(opened.group(1)) - date.fromisoformat(delivered)).days
    return days if isinstance(days, int) else None


def _flatten(prefix: str, value: object, out: dict[str, object]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        out[f"{prefix}.count"] = len(value)
        for i, v in enumerate(value):
            _flatten(f"{prefix}.{i}", v, out)
    elif isinstance(value, list):
        out[prefix] = ",".join(map(str, value))
    else:
        out[prefix] = value


def header_fields(obs: Observation) -> dict[str, object]:
    """Every field the ticket's header shows, and what one step of arithmetic makes of them: the subject,
    images, past returns, tier, each item's name, category, price and quantity, the total, whether it was
    delivered, the days since delivery (counted from the dates where the header gives dates)."""
    order, customer = records_from_header(obs)
    facts = header_of(obs).splitlines()[2]
    tier = re.search(r"Tier: (\w+)", facts)
    out: dict[str, object] = {
        "subject": subject_of(obs),
        "images_provided": "Images provided: true" in facts,
        "returns_12m": customer["returns_12m"],
        "tier": tier.group(1) if tier else None,
        "total": order["total"],
        "delivered": order["carrier"]["status"],  # type: ignore[index]
        "days_since_delivery": _days_since_delivery(obs, order),
    }
    items = order["items"]
    assert isinstance(items, list)
    out["items.count"] = len(items)
    for i, item in enumerate(items):
        for name in ("name", "category", "unit_price", "quantity"):
            out[f"items.{i}.{name}"] = item[name]
    return out


def record_fields(obs: Observation, order: dict[str, object], customer: dict[str, object]) -> dict[str, object]:
    """The header's subject and images, every field of the two looked-up records, and the derived ones: the
    P7 risk flag, the days since delivery, each item's days past its warranty."""
    facts = header_of(obs).splitlines()[2]
    out: dict[str, object] = {"subject": subject_of(obs), "images_provided": "Images provided: true" in facts}
    _flatten("order", order, out)
    _flatten("customer", customer, out)
    flags = customer.get("account_flags")
    returns, chargebacks = customer.get("returns_12m"), customer.get("chargebacks")
    out["risk.high"] = (isinstance(returns, int) and returns >= 5) or bool(chargebacks) or bool(flags)
    days = _days_since_delivery(obs, order)
    out["days_since_delivery"] = days
    items = order.get("items")
    for i, item in enumerate(items if isinstance(items, list) else []):
        out[f"order.items.{i}.days_past_warranty"] = None if days is None else days - item["warranty_days"]
    return out


def learned_answer(task_id: str, ticket) -> Answer:
    """What a learned table predicts: the task's answer, and on resolution a denial's reason too (the reply
    has to give a true one)."""
    answer = answer_of(task_id, ticket)
    if get_task(task_id).reply == "answer" and answer.split("/")[0] == "reject":
        return f"{answer}/{evaluate(ticket).reason or 'unverifiable'}"
    return answer


def _numeric(values: list[object]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)


Row = tuple[dict[str, object], Answer]


def _binner(rows: list[Row], name: str) -> Callable[[dict[str, object]], object]:
    """A field as a table key: a number with many values is cut once, where one cut fits the rows best."""
    values = [f.get(name) for f, _ in rows]
    if not (_numeric(values) and len(set(values)) > 8):
        return lambda f: str(f.get(name))
    numbers = sorted((v, a) for v, (_, a) in zip(values, rows, strict=True) if isinstance(v, (int, float)))
    high = Counter(a for _, a in rows)  # sweep the cut upwards: each row moves from above it to below it once
    low: Counter = Counter()
    best: tuple[int, float] | None = None
    for i, (value, answer) in enumerate(numbers):
        low[answer] += 1
        high[answer] -= 1
        if i + 1 < len(numbers) and numbers[i + 1][0] == value:
            continue
        hits = max(low.values()) + max(high.values(), default=0)
        if best is None or hits > best[0]:
            best = (hits, value)
    assert best is not None
    cut = best[1]
    return lambda f: isinstance(f.get(name), (int, float)) and f[name] <= cut  # type: ignore[operator]


@dataclass
class FieldTable:
    """A lookup table from a few fields to the most frequent training answer — what a cheater that reads
    only those fields would learn from the public train labels. The fields are chosen greedily, one at a
    time, by two-fold cross-validation on the training pool alone (fit on one half, score the other), until
    another field does not help, :data:`TABLE_FIELDS` at most; fields with more than a dozen values (ids,
    names) are left out, since a table on them only memorises."""

    fields: list[str]
    keys: list[Callable[[dict[str, object]], object]]
    table: dict[tuple[object, ...], Answer]
    fallback: Answer

    @classmethod
    def fit(cls, rows: list[Row], max_fields: int | None = None) -> FieldTable:
        limit = TABLE_FIELDS if max_fields is None else max_fields
        halves = (rows[0::2], rows[1::2])
        names = sorted({k for f, _ in rows for k in f})
        keys = [{n: _binner(part, n) for n in names} for part in (rows, *halves)]  # each field's key, once
        names = [n for n in names if len({str(keys[0][n](f)) for f, _ in rows}) <= 12]

        def score(fields: list[str]) -> float:
            folds = ((1, halves[0], halves[1]), (2, halves[1], halves[0]))
            return sum(cls._table(a, fields, keys[i]).accuracy(b) for i, a, b in folds) / 2

        chosen: list[str] = []
        best = -1.0
        while len(chosen) < limit:
            candidates = [(score([*chosen, n]), n) for n in names if n not in chosen]
            if not candidates:
                break
            gain, name = max(candidates)
            if gain <= best:
                break
            chosen, best = [*chosen, name], gain
        return cls._table(rows, chosen, keys[0])

    @classmethod
    def _table(
        cls, rows: list[Row], fields: list[str], keys: dict[str, Callable[[dict[str, object]], object]]
    ) -> FieldTable:
        chosen = [keys[n] for n in fields]
        counts: dict[tuple[object, ...], Counter] = {}
        for f, answer in rows:
            counts.setdefault(tuple(k(f) for k in chosen), Counter())[answer] += 1
        fallback = Counter(a for _, a in rows).most_common(1)[0][0]
        return cls(fields, chosen, {k: c.most_common(1)[0][0] for k, c in counts.items()}, fallback)

    def predict(self, fields: dict[str, object]) -> Answer:
        return self.table.get(tuple(k(fields) for k in self.keys), self.fallback)

    def accuracy(self, rows: list[Row]) -> float:
        return sum(self.predict(f) == a for f, a in rows) / len(rows)


TABLE_FIELDS = 4  # more fields than this memorise the training pool (its held-out accuracy stops rising)


def reader_rows(task_id: str, split: str, dataset: Dataset, lookups: bool) -> list[Row]:
    """(the fields a header reader — with its lookups — sees, the learned answer) for a task's pool: the
    first observation of each ticket and, with lookups, the records the lookup tool returns."""
    from service.env.core import lookup_record, reset

    task = TASKS[task_id]
    out = []
    for seed, tid in enumerate(dataset.pool(split, task.family, task.difficulty)):
        _, obs = reset(task_id, seed, split, dataset)
        ticket = dataset.ticket(tid)
        fields = (
            record_fields(obs, lookup_record(ticket, "order"), lookup_record(ticket, "customer"))
            if lookups
            else header_fields(obs)
        )
        out.append((fields, learned_answer(task_id, ticket)))
    return out


@dataclass
class LearnedReader:
    """Reads the header (and, with ``lookups``, looks up the order and the customer), never the message,
    and gives the answer its learned table predicts with the workflow that goes with it."""

    task_id: str
    table: FieldTable
    lookups: bool
    order: dict[str, object] | None = None
    plan: Scripted | None = None

    def act(self, obs: Observation) -> Action:
        if self.plan is None and self.lookups:
            if self.order is None and obs.tool_result is None:
                return Action(lookup="order")
            if self.order is None:
                self.order = cast(dict[str, object], obs.tool_result)
                return Action(lookup="customer")
            fields = record_fields(obs, self.order, cast(dict[str, object], obs.tool_result))
        elif self.plan is None:
            fields = header_fields(obs)
        if self.plan is None:
            answer = self.table.predict(fields)
            self.plan = Scripted(lambda o: answer_script(self.task_id, answer, o))
        return self.plan.act(obs)


def learned_readers(tables: dict[str, FieldTable], lookups: bool) -> Callable[[str, int], object]:
    return lambda task_id, seed: LearnedReader(task_id, tables[task_id], lookups)


@functools.cache
def public_readers(lookups: bool) -> dict[str, FieldTable]:
    """Each ticket task's table, learned on its public train pool (fitted once per process)."""
    return {t: FieldTable.fit(reader_rows(t, "train", PUBLIC, lookups)) for t in TASKS}


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
        task = get_task(self.task_id)
        self.stage += 1
        if task.ends_on_decision:
            if self.stage == 1:  # does asking pay? then the ticket needs information
                return Action(decision="request_info", reply=CATCH_ALL_QUESTION)
            answer = self.fallback if self.fallback != "request_info" else "reject"
            return Action(decision=answer)
        if task.answer == "tag":
            if self.tried and (obs.reward or 0) > 0:
                return Action(close_ticket=True)
            candidates: list[str] = [t for t in OUTCOME_TAGS if t not in self.tried]
            if not candidates:
                return Action(close_ticket=True)
            self.tried.append(candidates[0])
            return Action(add_tag=candidates[0])
        if task.answer == "queue":
            if self.tried and (obs.reward or 0) > 0:
                return Action(reply=polite_reply(obs), close_ticket=True)
            candidates = [q for q in QUEUES if q != "General" and q not in self.tried]
            if not candidates:
                return Action(reply=polite_reply(obs), close_ticket=True)
            self.tried.append(candidates[0])
            return Action(reassign_queue=candidates[0])
        if self.stage == 1:
            return Action(lookup="policy")
        if self.tried and (obs.reward or 0) > 0:  # the decision paid: finish with its tag (if graded) and reply
            tag = dict(zip(answer_fields(self.task_id), self.tried[-1].split("/"), strict=False)).get("tag")
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
            constant({t: ("Returns" if TASKS[t].answer == "queue" else majority[t]) for t in TASKS}, polite_reply),
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
            "header only, a table learned on train (up to 4 fields)",
            False,
            learned_readers(public_readers(lookups=False), lookups=False),
            "",
            LEARNED_HEADER_ONLY_RESOLVED,
        ),
        Strategy(
            "header + lookups, a table learned on train (up to 4 fields)",
            False,
            learned_readers(public_readers(lookups=True), lookups=True),
            "",
            LEARNED_HEADER_LOOKUPS_RESOLVED,
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
# Learned from the train labels (FieldTable), reading only the header — or the header and the two records —
# and never the message: the audit's two-field table resolved 0.66 of routing on dev and 0.63 of two secret
# test splits, decision-easy 0.45-0.49. Caps at what the suite measures (the most of dev and a fresh-key test
# split, rounded up to the next 0.05): routing is largely a records task (a fraud flag, a second charge, an
# item out of stock and a large amount name its queue), and the README says what these reach.
LEARNED_HEADER_ONLY_RESOLVED = {
    "decision-easy": 0.40,  # measured: 0.36 dev, 0.27 test
    "decision-medium": 0.45,  # 0.30, 0.40
    "decision-hard": 0.40,  # 0.39, 0.30
    "workflow-triage": 0.50,  # 0.49, 0.45
    "workflow-routing": 0.55,  # 0.52, 0.49
    "workflow-resolution": 0.25,  # 0.24, 0.23
}
LEARNED_HEADER_LOOKUPS_RESOLVED = {
    "decision-easy": 0.60,  # 0.58, 0.51
    "decision-medium": 0.45,  # 0.42, 0.37
    "decision-hard": 0.50,  # 0.35, 0.49
    "workflow-triage": 0.55,  # 0.52, 0.52
    "workflow-routing": 0.85,  # 0.84, 0.82
    "workflow-resolution": 0.50,  # 0.46, 0.35
}


def bounds(strategy: Strategy, task_id: str) -> tuple[float, float]:
    """A strategy that answers nothing earns nothing; one that guesses earns at most what a balanced
    pool gives a constant: absolute caps, not a bound computed from the strategies themselves. One that
    reads part of the ticket stays under its own cap (on every task, or the task's)."""
    if isinstance(strategy.reads_part, dict):
        return strategy.reads_part[task_id], 1.0
    if strategy.reads_part is not None:
        return strategy.reads_part, 1.0
    if not strategy.guesses:
        return FLAT_RESOLVED, FLAT_MEAN
    return GUESS_RESOLVED, GUESS_MEAN
