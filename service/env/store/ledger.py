"""What the agent's writes do: effects, and the store's state with them applied.

An :data:`Effect` is one accepted write, with every argument that matters (which order and lines,
how much, to which payment, which variant, which queue). The episode keeps the effects in order;
the store as it stands is the generated database plus them, and grading compares the
:func:`final_state` the effects reach with the one the policy's gold effects reach — field by field,
so that equivalent write sequences (two lines refunded in one call or in two) count the same.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.env.store.money import money
from service.env.store.world import STORE_CREDIT, Order, StoreDB

Label = Literal["prepaid", "customer_paid"]
Queue = Literal["Escalations", "Fraud", "Billing", "Returns"]


class _Effect(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RefundEffect(_Effect):
    kind: Literal["refund"] = "refund"
    order_id: str
    lines: tuple[tuple[int, int], ...]  # (line_no, quantity)
    shipping: bool
    amounts: tuple[tuple[str, int], ...]  # (payment_id or store_credit, cents)


class ReplaceEffect(_Effect):
    kind: Literal["replace"] = "replace"
    order_id: str
    line_no: int
    quantity: int


class ExchangeEffect(_Effect):
    kind: Literal["exchange"] = "exchange"
    order_id: str
    line_no: int
    quantity: int
    new_sku: str
    difference: int  # cents: > 0 charged to ``settle_to``, < 0 refunded to it
    settle_to: str | None


class ReturnEffect(_Effect):
    kind: Literal["return"] = "return"
    order_id: str
    lines: tuple[tuple[int, int], ...]
    label: Label


class CancelEffect(_Effect):
    kind: Literal["cancel"] = "cancel"
    order_id: str
    line_nos: tuple[int, ...]
    amounts: tuple[tuple[str, int], ...]  # refunded by the backend, P21's order
    shipping: bool  # the shipping fee went back too (the whole order cancelled)


class AddressEffect(_Effect):
    kind: Literal["address"] = "address"
    order_id: str
    line1: str
    city: str
    postal_code: str


class CreditEffect(_Effect):
    kind: Literal["credit"] = "credit"
    order_id: str
    amount: int
    reason: str


class EscalateEffect(_Effect):
    kind: Literal["escalate"] = "escalate"
    queue: Queue
    order_id: str | None
    note: str


Effect = Annotated[
    RefundEffect
    | ReplaceEffect
    | ExchangeEffect
    | ReturnEffect
    | CancelEffect
    | AddressEffect
    | CreditEffect
    | EscalateEffect,
    Field(discriminator="kind"),
]


@dataclass
class OrderChanges:
    """What the conversation's writes changed on one order (the fields grading compares)."""

    refunded: Counter[int] = field(default_factory=Counter)  # line_no → units refunded
    refunded_to: Counter[str] = field(default_factory=Counter)  # destination → cents
    shipping_refunded: bool = False
    replaced: Counter[int] = field(default_factory=Counter)
    exchanged: dict[int, tuple[str, int]] = field(default_factory=dict)  # line_no → (new sku, units)
    settled: Counter[str] = field(default_factory=Counter)  # exchange differences, by payment (+ charged)
    returned: dict[int, tuple[int, str]] = field(default_factory=dict)  # line_no → (units, label)
    cancelled: set[int] = field(default_factory=set)
    address: tuple[str, str, str] | None = None
    credit: int = 0


@dataclass
class StoreChanges:
    orders: defaultdict[str, OrderChanges] = field(default_factory=lambda: defaultdict(OrderChanges))
    escalations: list[tuple[str, str | None]] = field(default_factory=list)  # (queue, order id)

    def of(self, order_id: str) -> OrderChanges:
        return self.orders[order_id]


def changes(effects: Iterable[_Effect]) -> StoreChanges:
    """Fold the effects into what they changed, per order."""
    out = StoreChanges()
    for e in effects:
        if isinstance(e, RefundEffect):
            o = out.of(e.order_id)
            for line_no, qty in e.lines:
                o.refunded[line_no] += qty
            for dest, cents in e.amounts:
                o.refunded_to[dest] += cents
            o.shipping_refunded = o.shipping_refunded or e.shipping
        elif isinstance(e, ReplaceEffect):
            out.of(e.order_id).replaced[e.line_no] += e.quantity
        elif isinstance(e, ExchangeEffect):
            o = out.of(e.order_id)
            o.exchanged[e.line_no] = (e.new_sku, o.exchanged.get(e.line_no, ("", 0))[1] + e.quantity)
            if e.difference and e.settle_to:
                o.settled[e.settle_to] += e.difference
        elif isinstance(e, ReturnEffect):
            o = out.of(e.order_id)
            for line_no, qty in e.lines:
                units = o.returned.get(line_no, (0, e.label))[0] + qty
                o.returned[line_no] = (units, e.label)
        elif isinstance(e, CancelEffect):
            o = out.of(e.order_id)
            o.cancelled.update(e.line_nos)
            for dest, cents in e.amounts:
                o.refunded_to[dest] += cents
            o.shipping_refunded = o.shipping_refunded or e.shipping
        elif isinstance(e, AddressEffect):
            out.of(e.order_id).address = (e.line1, e.city, e.postal_code)
        elif isinstance(e, CreditEffect):
            out.of(e.order_id).credit += e.amount
        elif isinstance(e, EscalateEffect):
            out.escalations.append((e.queue, e.order_id))
    return out


def final_state(db: StoreDB, effects: Iterable[_Effect]) -> dict[str, str]:
    """The fields that matter, flattened to ``name → value`` (absent = unchanged): what grading
    compares with the gold state. Names read like ``refund on ORD-48213 to Visa ending 4242``."""
    labels = {p.payment_id: p.label for o in db.orders for p in o.payments} | {STORE_CREDIT: "store credit"}
    folded = changes(effects)
    fields: dict[str, str] = {}
    for order_id, o in sorted(folded.orders.items()):
        fields.update(_order_fields(order_id, o, labels))
    for queue in sorted({q for q, _ in folded.escalations}):
        fields[f"escalation to {queue}"] = "yes"
    return fields


def _order_fields(order_id: str, o: OrderChanges, labels: dict[str, str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line_no, qty in sorted(o.refunded.items()):
        if qty:
            fields[f"units refunded on {order_id} line {line_no}"] = str(qty)
    for dest, cents in sorted(o.refunded_to.items()):
        if cents:
            fields[f"refund on {order_id} to {labels.get(dest, dest)}"] = money(cents)
    if o.shipping_refunded:
        fields[f"shipping refunded on {order_id}"] = "yes"
    for line_no, qty in sorted(o.replaced.items()):
        fields[f"replacement of {order_id} line {line_no}"] = f"{qty} unit(s)"
    for line_no, (sku, qty) in sorted(o.exchanged.items()):
        fields[f"exchange of {order_id} line {line_no}"] = f"{qty} × {sku}"
    for dest, cents in sorted(o.settled.items()):
        if cents:
            verb = "charged to" if cents > 0 else "refunded to"
            fields[f"price difference on {order_id} {verb} {labels.get(dest, dest)}"] = money(abs(cents))
    for line_no, (qty, label) in sorted(o.returned.items()):
        fields[f"return of {order_id} line {line_no}"] = f"{qty} unit(s), {label.replace('_', ' ')} label"
    for line_no in sorted(o.cancelled):
        fields[f"cancellation of {order_id} line {line_no}"] = "cancelled"
    if o.address is not None:
        fields[f"delivery address of {order_id}"] = ", ".join(o.address)
    if o.credit:
        fields[f"goodwill credit for {order_id}"] = money(o.credit)
    return fields


def normalize_address(line1: str, city: str, postal_code: str) -> tuple[str, str, str]:
    """An address as compared: case, spacing and a trailing comma do not matter."""

    def tidy(s: str) -> str:
        return " ".join(s.replace(",", " ").split()).lower()

    return tidy(line1), tidy(city), tidy(postal_code).replace(" ", "")


# ------------------------------------------------------------------------ what the backend knows


def refunded_units(order: Order, effects: Iterable[_Effect]) -> Counter[int]:
    """Units of each line refunded so far: earlier refunds plus this conversation's."""
    units: Counter[int] = Counter()
    for r in order.refunds:
        for line_no, qty in r.lines:
            units[line_no] += qty
    for e in effects:
        if isinstance(e, RefundEffect) and e.order_id == order.order_id:
            for line_no, qty in e.lines:
                units[line_no] += qty
    return units


def refunded_by_payment(order: Order, effects: Iterable[_Effect]) -> Counter[str]:
    """Cents refunded so far to each destination of the order (earlier refunds included)."""
    paid: Counter[str] = Counter()
    for r in order.refunds:
        for dest, cents in r.amounts:
            paid[dest] += cents
    for e in effects:
        if isinstance(e, RefundEffect | CancelEffect) and e.order_id == order.order_id:
            for dest, cents in e.amounts:
                paid[dest] += cents
        elif isinstance(e, ExchangeEffect) and e.order_id == order.order_id and e.difference < 0 and e.settle_to:
            paid[e.settle_to] += -e.difference
    return paid


def shipping_refunded(order: Order, effects: Iterable[_Effect]) -> bool:
    if any(r.shipping for r in order.refunds):
        return True
    return any(
        isinstance(e, RefundEffect | CancelEffect) and e.order_id == order.order_id and e.shipping for e in effects
    )
