"""Single-field rules: how well one visible field predicts a task's answer.

A *field* is one value an agent can read without combining anything: one entry of the order or
customer record (what ``lookup`` returns), the product's category, the customer's tier, the subject
line, or the message's claim type — and the values one step away from those (#21.6): the claimed
item's own fields (once the message names the item), the P7 risk flag, the days since delivery
counted from the dates, and how far that is past the item's warranty. A *rule* maps each value of
the field to the most frequent training answer (numbers are cut at the single threshold that fits
the training pool best). If one field decides the label, the task is a lookup, not a judgement:
``test_grading`` bounds the best rule's dev accuracy on every medium and hard pool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import date
from typing import Any

from service.env import TICKET_TASKS as TASKS  # the ticket tasks: the store desk has its own tests
from service.env import Dataset
from service.env.core import lookup_record
from service.env.policy import evaluate


def answer(task_id: str, ticket: Any) -> str:
    """The ticket's label for the task: what counts as its answer (the decision, the tag or the team)."""
    v = evaluate(ticket)
    return {"decision": v.gold, "tag": v.tag, "queue": v.queue}[TASKS[task_id].answer or "decision"]


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        out[f"{prefix}.count"] = len(value)
        for i, v in enumerate(value):  # each item's own fields ("order.items.0.in_stock")
            _flatten(f"{prefix}.{i}", v, out)
    elif isinstance(value, list):
        out[prefix] = ",".join(map(str, value))
    else:
        out[prefix] = value


def fields(ticket: Any) -> dict[str, Any]:
    """Every single field an agent could read off the ticket on its own, derived ones included."""
    out: dict[str, Any] = {}
    order = lookup_record(ticket, "order")
    customer = lookup_record(ticket, "customer")
    _flatten("order", order, out)
    _flatten("customer", customer, out)
    out["claim_type"] = ticket.claim.issue
    out["subject"] = ticket.subject
    out["images_provided"] = ticket.claim.images_provided
    claimed = order["items"][ticket.claim.line]
    for name, value in claimed.items():
        out[f"claimed.{name}"] = value
    out["risk.high"] = customer["returns_12m"] >= 5 or customer["chargebacks"] > 0 or bool(customer["account_flags"])
    days = ticket.order.days_since_delivery  # the record's count, or the dates' difference (P12: count it)
    if days is None and ticket.order.delivery_date is not None:
        days = (date.fromisoformat(ticket.opened_on) - date.fromisoformat(ticket.order.delivery_date)).days
    out["days_since_delivery"] = days
    out["days_past_warranty"] = None if days is None else days - claimed["warranty_days"]
    for i, item in enumerate(order["items"]):  # every item's, not only the claimed one's
        out[f"order.items.{i}.days_past_warranty"] = None if days is None else days - item["warranty_days"]
    opened = date.fromisoformat(ticket.opened_on)
    out["days_since_order"] = (
        (opened - date.fromisoformat(order["order_date"])).days if order.get("order_date") else None
    )
    out["delivered"] = order["carrier"]["status"] == "delivered"
    out["tier"] = customer["tier"]
    out["second_claim"] = ticket.claim.second_issue  # a second claim in the message ("and I was charged twice")
    return out


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values if v is not None) and any(
        v is not None for v in values
    )


def fit_rule(rows: list[tuple[dict[str, Any], str]], name: str) -> Callable[[dict[str, Any]], str]:
    values = [f.get(name) for f, _ in rows]
    fallback = Counter(a for _, a in rows).most_common(1)[0][0]
    if _numeric(values) and len(set(values)) > 8:
        best: tuple[int, float, str, str] | None = None
        for cut in sorted({v for v in values if v is not None}):
            lo = Counter(a for f, a in rows if f.get(name) is not None and f[name] <= cut)
            hi = Counter(a for f, a in rows if f.get(name) is None or f[name] > cut)
            lo_label = lo.most_common(1)[0][0] if lo else fallback
            hi_label = hi.most_common(1)[0][0] if hi else fallback
            hits = lo[lo_label] + hi[hi_label]
            if best is None or hits > best[0]:
                best = (hits, cut, lo_label, hi_label)
        assert best is not None
        _, cut, lo_label, hi_label = best
        return lambda f: lo_label if f.get(name) is not None and f[name] <= cut else hi_label
    table: dict[Any, Counter] = {}
    for f, a in rows:
        table.setdefault(f.get(name), Counter())[a] += 1
    mapping = {k: c.most_common(1)[0][0] for k, c in table.items()}
    return lambda f: mapping.get(f.get(name), fallback)


def best_single_field(
    task_id: str, dataset: Dataset, train: str = "train", held_out: str = "dev"
) -> tuple[str, float, float]:
    """(field, its dev accuracy, the dev majority share) of the single-field rule that fits train best."""
    task = TASKS[task_id]

    def rows(split: str) -> list[tuple[dict[str, Any], str]]:
        return [
            (fields(dataset.ticket(t)), answer(task_id, dataset.ticket(t)))
            for t in dataset.pool(split, task.family, task.difficulty)
        ]

    train_rows, dev_rows = rows(train), rows(held_out)
    names = sorted({k for f, _ in train_rows for k in f})
    halves = (train_rows[0::2], train_rows[1::2])

    def cross_validated(name: str) -> float:  # chosen the way an attacker would: fit one half, score the other
        fitted = [(fit_rule(a, name), b) for a, b in (halves, halves[::-1])]  # each half's rule, fitted once
        return sum(rule(f) == y for rule, b in fitted for f, y in b) / len(train_rows)

    name = max(names, key=lambda n: (cross_validated(n), n))
    rule = fit_rule(train_rows, name)
    dev_acc = sum(rule(f) == a for f, a in dev_rows) / len(dev_rows)
    majority = Counter(a for _, a in dev_rows).most_common(1)[0][1] / len(dev_rows)
    return name, dev_acc, majority
