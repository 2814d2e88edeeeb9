"""The store desk's tools: typed arguments, one-line descriptions, and the backend behind them.

Each tool is a pydantic model of its arguments (its JSON schema is what agents, ``/tasks`` and MCP's
``tools/list`` see) and a handler. Read tools return records; write tools check their arguments
against the store as it stands — the way a real backend would — and either return an
:data:`~service.env.store.ledger.Effect` or a tool error that the agent sees in its observation
(``ok: false``), with nothing changed. No tool ever says whether the agent is on the right path,
and no record names a clause. ``send_message`` and ``end_conversation`` are played by
:mod:`service.env.store.episode` (the customer answers).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from service.env.store.clauses import store_clauses
from service.env.store.ledger import (
    AddressEffect,
    CancelEffect,
    CreditEffect,
    Effect,
    EscalateEffect,
    ExchangeEffect,
    Label,
    Queue,
    RefundEffect,
    ReplaceEffect,
    ReturnEffect,
    changes,
    normalize_address,
    refunded_by_payment,
    refunded_units,
    shipping_refunded,
)
from service.env.store.money import dollars, money, paid_for, to_cents
from service.env.store.policy import Topic, cancel_effect
from service.env.store.world import STORE_CREDIT, Order, StoreDB

ToolKind = Literal["read", "write", "talk", "act"]  # "act": a field of the other tasks' action
MAX_NOTE = 1000
MAX_MESSAGE = 2000


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class ItemQuantity(ToolArgs):
    line_no: int = Field(ge=1, le=99, description="The line number on the order (get_order shows them).")
    quantity: int = Field(default=1, ge=1, le=99, description="How many units of that line.")


class RefundPart(ToolArgs):
    to: str = Field(
        min_length=1,
        max_length=64,
        description="A payment_id of the order (get_order lists them), or store_credit.",
    )
    amount: float = Field(gt=0, le=100000, description="Dollars, to the cent.")


# ------------------------------------------------------------------------------ argument models


class FindCustomer(ToolArgs):
    """Find the customer id by the account's email address or by one of its order ids."""

    email: str | None = Field(default=None, max_length=254, description="The account's email address.")
    order_id: str | None = Field(default=None, max_length=32, description="An order id such as ORD-48213.")

    @model_validator(mode="after")
    def _one(self) -> FindCustomer:
        if (self.email is None) == (self.order_id is None):
            raise ValueError("give exactly one of email or order_id")
        return self


class VerifyIdentity(ToolArgs):
    """Check the email address and postal code the customer gave against the account (P16)."""

    customer_id: str = Field(min_length=1, max_length=32)
    email: str = Field(min_length=1, max_length=254, description="As the customer gave it.")
    postal_code: str = Field(min_length=1, max_length=16, description="As the customer gave it.")


class GetCustomer(ToolArgs):
    """The account: name, contact details, tier, addresses, store credit, risk record and order ids."""

    customer_id: str = Field(min_length=1, max_length=32)


class GetOrder(ToolArgs):
    """An order: lines with prices, status and stock, promo code, shipping fee, payments, shipments and
    everything refunded, returned, replaced, exchanged or cancelled on it so far."""

    order_id: str = Field(min_length=1, max_length=32)


class GetShipment(ToolArgs):
    """A shipment's carrier, tracking number, estimated delivery and tracking events."""

    shipment_id: str = Field(min_length=1, max_length=32)


class GetProduct(ToolArgs):
    """A product's variants (size, colour) with their SKUs, prices and stock."""

    product_id: str = Field(min_length=1, max_length=32)


class SearchPolicy(ToolArgs):
    """Search the store policy; returns the best-matching sections (id, title, first sentence)."""

    query: str = Field(min_length=1, max_length=200)


class ReadPolicy(ToolArgs):
    """Read one section of the store policy in full."""

    section: str = Field(min_length=1, max_length=8, description="A section id such as P21.")


class Refund(ToolArgs):
    """Refund units of order lines (and the shipping fee), split across destinations."""

    order_id: str = Field(min_length=1, max_length=32)
    items: list[ItemQuantity] = Field(
        default_factory=list, max_length=10, description="The lines and units refunded (empty for an over-charge)."
    )
    include_shipping: bool = Field(default=False, description="Also refund the order's shipping fee.")
    amounts: list[RefundPart] = Field(min_length=1, max_length=4, description="How much goes where.")


class ReplaceItem(ToolArgs):
    """Send a replacement of an order line (the same SKU) at no charge."""

    order_id: str = Field(min_length=1, max_length=32)
    line_no: int = Field(ge=1, le=99)
    quantity: int = Field(default=1, ge=1, le=99)


class ExchangeItem(ToolArgs):
    """Exchange units of a delivered line for another variant of the same product (the original comes back
    on a prepaid label); a price difference is charged or refunded on ``payment_id``."""

    order_id: str = Field(min_length=1, max_length=32)
    line_no: int = Field(ge=1, le=99)
    new_sku: str = Field(min_length=1, max_length=32, description="The variant wanted (get_product lists them).")
    quantity: int = Field(default=1, ge=1, le=99)
    payment_id: str | None = Field(
        default=None, max_length=64, description="Where the price difference is settled, when the prices differ."
    )


class OpenReturn(ToolArgs):
    """Open a return of units of delivered lines, with a prepaid or a customer-paid label."""

    order_id: str = Field(min_length=1, max_length=32)
    items: list[ItemQuantity] = Field(min_length=1, max_length=10)
    label: Label


class CancelItems(ToolArgs):
    """Cancel lines that have not shipped; what they were paid is refunded to the order's payments."""

    order_id: str = Field(min_length=1, max_length=32)
    line_nos: list[int] = Field(min_length=1, max_length=10)


class ChangeAddress(ToolArgs):
    """Change the delivery address of an order none of whose lines has shipped."""

    order_id: str = Field(min_length=1, max_length=32)
    line1: str = Field(min_length=1, max_length=120, description="Street and number.")
    city: str = Field(min_length=1, max_length=60)
    postal_code: str = Field(min_length=1, max_length=16)


class IssueStoreCredit(ToolArgs):
    """Add a goodwill store credit to the account, for an order."""

    customer_id: str = Field(min_length=1, max_length=32)
    order_id: str = Field(min_length=1, max_length=32)
    amount: float = Field(gt=0, le=1000, description="Dollars, to the cent.")
    reason: Literal["late_delivery", "goodwill"]


class Escalate(ToolArgs):
    """Hand the conversation to a team's queue with a note for them."""

    queue: Queue
    note: str = Field(min_length=1, max_length=MAX_NOTE)
    order_id: str | None = Field(default=None, max_length=32)


class SendMessage(ToolArgs):
    """Write to the customer; their answer arrives in the history. List what you ask them for in
    ``asking_for`` so that they are sure to understand it."""

    text: str = Field(min_length=1, max_length=MAX_MESSAGE)
    asking_for: list[Topic] = Field(
        default_factory=list,
        max_length=8,
        description="What this message asks the customer for: identity (email and postal code), order (which "
        "order), quantity (how many units), photos, condition (opened or used), delivery (checked around for the "
        "parcel), preference (refund or replacement, which size), confirmation (their yes to what you described). "
        "When you list anything, the photos, condition and delivery questions you ask are the ones listed.",
    )


class EndConversation(ToolArgs):
    """End the conversation (ends the episode)."""


@dataclass(frozen=True)
class Tool:
    name: str
    kind: ToolKind
    args: type[ToolArgs]

    @property
    def description(self) -> str:
        return " ".join((self.args.__doc__ or "").split("\n\n")[0].split())  # docstring indentation is not text

    def schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


TOOLS: tuple[Tool, ...] = (
    Tool("find_customer", "read", FindCustomer),
    Tool("verify_identity", "read", VerifyIdentity),
    Tool("get_customer", "read", GetCustomer),
    Tool("get_order", "read", GetOrder),
    Tool("get_shipment", "read", GetShipment),
    Tool("get_product", "read", GetProduct),
    Tool("search_policy", "read", SearchPolicy),
    Tool("read_policy", "read", ReadPolicy),
    Tool("refund", "write", Refund),
    Tool("replace_item", "write", ReplaceItem),
    Tool("exchange_item", "write", ExchangeItem),
    Tool("open_return", "write", OpenReturn),
    Tool("cancel_items", "write", CancelItems),
    Tool("change_address", "write", ChangeAddress),
    Tool("issue_store_credit", "write", IssueStoreCredit),
    Tool("escalate", "write", Escalate),
    Tool("send_message", "talk", SendMessage),
    Tool("end_conversation", "talk", EndConversation),
)
TOOLS_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
WRITE_TOOLS = frozenset(t.name for t in TOOLS if t.kind == "write")


class ToolError(Exception):
    """A call the backend refuses; the message is what the agent sees. Nothing changed."""


@dataclass(frozen=True)
class Outcome:
    output: dict[str, Any]
    effect: Effect | None = None


def parse_args(name: str, arguments: dict[str, Any]) -> ToolArgs:
    """The call's arguments as the tool's model; a :class:`ToolError` naming every problem otherwise."""
    tool = TOOLS_BY_NAME.get(name)
    if tool is None:
        raise ToolError(f"unknown tool {name!r}; the tools are: {', '.join(TOOLS_BY_NAME)}")
    try:
        return tool.args.model_validate(arguments)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err["loc"]) or "arguments"
            problems.append(f"{where}: {err['msg']}")
        more = len(exc.errors()) - 5
        raise ToolError(
            f"invalid arguments for {name}: " + "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
        ) from exc


# ------------------------------------------------------------------------------------ the backend


class Backend:
    """The store's backend over the database and the effects so far."""

    def __init__(self, db: StoreDB, effects: tuple[Effect, ...]) -> None:
        self.db = db
        self.effects = effects

    def call(self, name: str, args: ToolArgs) -> Outcome:
        handler: Callable[[Any], Outcome] = getattr(self, f"_{name}")
        return handler(args)

    # ---------------------------------------------------------------- lookups

    def _order(self, order_id: str) -> Order:
        order = self.db.order(order_id)
        if order is None:
            raise ToolError(f"no order {order_id!r} on this account")
        return order

    def _customer(self, customer_id: str) -> None:
        if customer_id.strip().lower() != self.db.account.customer_id.lower():
            raise ToolError(f"no customer {customer_id!r}")

    def _find_customer(self, a: FindCustomer) -> Outcome:
        account = self.db.account
        if a.email is not None and a.email.lower() == account.email.lower():
            return Outcome({"customer_id": account.customer_id})
        if a.order_id is not None and self.db.order(a.order_id) is not None:
            return Outcome({"customer_id": account.customer_id})
        raise ToolError("no customer matches that " + ("email address" if a.email is not None else "order id"))

    def _verify_identity(self, a: VerifyIdentity) -> Outcome:
        self._customer(a.customer_id)
        account = self.db.account
        email_ok = a.email.strip().lower() == account.email.lower()
        codes = {normalize_address("", "", ad.postal_code)[2] for ad in account.addresses}
        postal_ok = normalize_address("", "", a.postal_code)[2] in codes
        if email_ok and postal_ok:
            return Outcome({"verified": True, "customer_id": account.customer_id})
        wrong = [w for w, ok in (("email address", email_ok), ("postal code", postal_ok)) if not ok]
        return Outcome({"verified": False, "does_not_match": wrong})

    def _get_customer(self, a: GetCustomer) -> Outcome:
        self._customer(a.customer_id)
        c = self.db.account
        issued = sum(e.amount for e in self.effects if isinstance(e, CreditEffect))
        to_credit = sum(
            cents
            for o in changes(self.effects).orders.values()
            for dest, cents in o.refunded_to.items()
            if dest == STORE_CREDIT
        )
        return Outcome(
            {
                "customer_id": c.customer_id,
                "name": c.name,
                "email": c.email,
                "phone": c.phone,
                "tier": c.tier,
                "member_since": c.member_since,
                "addresses": [a.model_dump() for a in c.addresses],
                "store_credit_balance": dollars(c.store_credit + issued + to_credit),
                "risk": {
                    "returns_last_12_months": c.returns_12m,
                    "chargebacks": c.chargebacks,
                    "flags": ["fraud_review"] if c.fraud_flag else [],
                },
                "orders": [
                    {"order_id": o.order_id, "placed_on": o.placed_on, "items": len(o.lines), "total": dollars(o.total)}
                    for o in self.db.orders
                ],
                "goodwill_credits": [
                    {"order_id": cr.order_id, "date": cr.date, "amount": dollars(cr.amount), "reason": cr.reason}
                    for cr in self.db.credits
                ],
            }
        )

    def _get_order(self, a: GetOrder) -> Outcome:
        return Outcome(order_record(self.db, self._order(a.order_id), self.effects))

    def _get_shipment(self, a: GetShipment) -> Outcome:
        wanted = a.shipment_id.strip().upper()
        for o in self.db.orders:
            for s in o.shipments:
                if s.shipment_id == wanted:
                    return Outcome(
                        {
                            "shipment_id": s.shipment_id,
                            "order_id": o.order_id,
                            "carrier": s.carrier,
                            "tracking_no": s.tracking_no,
                            "line_nos": list(s.line_nos),
                            "shipped_on": s.shipped_on,
                            "estimated_delivery": s.estimated_delivery,
                            "status": s.status,
                            "events": [e.model_dump() for e in s.events],
                        }
                    )
        raise ToolError(f"no shipment {a.shipment_id!r} on this account")

    def _get_product(self, a: GetProduct) -> Outcome:
        wanted = a.product_id.strip().upper()
        variants = [v for v in self.db.catalog if v.product_id == wanted]
        if not variants:
            raise ToolError(f"no product {a.product_id!r}")
        first = variants[0]
        return Outcome(
            {
                "product_id": first.product_id,
                "name": first.name,
                "category": first.category,
                "variants": [
                    {"sku": v.sku, "options": v.options, "price": dollars(v.price), "in_stock": v.stock > 0}
                    for v in variants
                ],
            }
        )

    def _search_policy(self, a: SearchPolicy) -> Outcome:
        return Outcome({"results": search_policy(a.query)})

    def _read_policy(self, a: ReadPolicy) -> Outcome:
        wanted = a.section.strip().upper().lstrip("§")
        for clause in store_clauses():
            if clause.id == wanted:
                return Outcome({"section": clause.id, "title": clause.title, "text": clause.text})
        raise ToolError(f"no policy section {a.section!r}; sections run from P1 to P{len(store_clauses())}")

    # ---------------------------------------------------------------- writes

    def _units(self, order: Order, items: list[ItemQuantity], *, delivered: bool) -> tuple[tuple[int, int], ...]:
        """The items as (line_no, quantity), each checked against the line and what happened to it."""
        seen: Counter[int] = Counter()
        for item in items:
            seen[item.line_no] += item.quantity
        used = self._units_used(order)
        out = []
        for line_no, qty in sorted(seen.items()):
            line = order.line(line_no)
            if line is None:
                raise ToolError(f"{order.order_id} has no line {line_no}")
            if line.line_no in changes(self.effects).of(order.order_id).cancelled:
                raise ToolError(f"line {line_no} of {order.order_id} was cancelled")
            if line.status == "processing":
                raise ToolError(f"line {line_no} of {order.order_id} has not shipped yet; it can be cancelled instead")
            if delivered and line.status != "delivered":
                raise ToolError(f"line {line_no} of {order.order_id} has not been delivered")
            left = line.quantity - used[line_no]
            if qty > left:
                raise ToolError(
                    f"line {line_no} of {order.order_id} has {left} unit(s) left that were not refunded, replaced "
                    f"or exchanged already; asked for {qty}"
                )
            out.append((line_no, qty))
        return tuple(out)

    def _units_used(self, order: Order) -> Counter[int]:
        used = refunded_units(order, self.effects)
        for earlier in order.replacements:
            used[earlier.line_no] += earlier.quantity
        folded = changes(self.effects).of(order.order_id)
        for line_no, qty in folded.replaced.items():
            used[line_no] += qty
        for line_no, (_, qty) in folded.exchanged.items():
            used[line_no] += qty
        return used

    def _refund(self, a: Refund) -> Outcome:
        order = self._order(a.order_id)
        lines = self._units(order, a.items, delivered=False) if a.items else ()
        if a.include_shipping and shipping_refunded(order, self.effects):
            raise ToolError(f"the shipping fee of {order.order_id} was refunded already")
        if a.include_shipping and not order.shipping_fee:
            raise ToolError(f"{order.order_id} had no shipping fee")
        amounts = self._destinations(order, a.amounts)
        total = sum(c for _, c in amounts)
        if lines or a.include_shipping:
            cap = sum(paid_for(order, n, q) for n, q in lines) + (order.shipping_fee if a.include_shipping else 0)
            if total > cap:
                raise ToolError(  # no cap in the message: the amount is the agent's to work out, not to probe
                    f"{money(total)} is more than those items{' and the shipping fee' if a.include_shipping else ''} "
                    "were paid"
                )
        else:
            over = sum(p.amount for p in order.payments) - order.total - self._overcharge_refunded(order)
            if total > over:
                raise ToolError(
                    "a refund without items returns an over-charge: "
                    + ("that is more than was over-charged here" if over > 0 else f"{order.order_id} has none")
                )
        effect = RefundEffect(order_id=order.order_id, lines=lines, shipping=a.include_shipping, amounts=amounts)
        return Outcome({"refunded": dollars(total), "order_id": order.order_id, "status": "refund issued"}, effect)

    def _overcharge_refunded(self, order: Order) -> int:
        return sum(
            c
            for e in self.effects
            if isinstance(e, RefundEffect) and e.order_id == order.order_id and not e.lines and not e.shipping
            for _, c in e.amounts
        )

    def _destinations(self, order: Order, parts: list[RefundPart]) -> tuple[tuple[str, int], ...]:
        """Each part's destination checked: a card or PayPal payment of the order (within what it paid less
        what was refunded to it) or store credit."""
        refunded = refunded_by_payment(order, self.effects)
        out: Counter[str] = Counter()
        for part in parts:
            cents = to_cents(part.amount)
            if cents is None:
                raise ToolError(f"{part.amount} is not a whole number of cents")
            dest = part.to.strip()
            if dest.lower() == STORE_CREDIT:
                out[STORE_CREDIT] += cents
                continue
            payment = order.payment(dest)
            if payment is None:
                raise ToolError(
                    f"{dest!r} is not a payment of {order.order_id}; use one of its payment_ids or store_credit"
                )
            if payment.method not in ("card", "paypal"):
                raise ToolError(
                    f"{dest} is a {payment.method.replace('_', ' ')} payment: it is refunded as store credit"
                )
            out[payment.payment_id] += cents
        for dest, cents in out.items():
            if dest == STORE_CREDIT:
                continue
            payment = order.payment(dest)
            assert payment is not None
            room = payment.amount - refunded[dest]
            if cents > room:
                raise ToolError(f"{money(cents)} is more than {payment.label} has left to refund")
        return tuple(out.items())

    def _replace_item(self, a: ReplaceItem) -> Outcome:
        order = self._order(a.order_id)
        ((line_no, qty),) = self._units(order, [ItemQuantity(line_no=a.line_no, quantity=a.quantity)], delivered=False)
        line = order.line(line_no)
        assert line is not None
        variant = self.db.variant(line.sku)
        if variant is None or variant.stock < qty:
            raise ToolError(f"{line.sku} ({line.name}{', ' + line.options if line.options else ''}) is out of stock")
        effect = ReplaceEffect(order_id=order.order_id, line_no=line_no, quantity=qty)
        return Outcome({"replacement": f"{qty} × {line.sku}", "status": "replacement ordered, ships in 2 days"}, effect)

    def _exchange_item(self, a: ExchangeItem) -> Outcome:
        order = self._order(a.order_id)
        ((line_no, qty),) = self._units(order, [ItemQuantity(line_no=a.line_no, quantity=a.quantity)], delivered=True)
        line = order.line(line_no)
        variant = self.db.variant(a.new_sku)
        assert line is not None
        if variant is None or variant.product_id != line.product_id:
            raise ToolError(f"{a.new_sku!r} is not a variant of {line.product_id} ({line.name})")
        if variant.sku == line.sku:
            raise ToolError(f"{variant.sku} is the variant ordered; choose another")
        if variant.stock < qty:
            raise ToolError(f"{variant.sku} ({variant.options}) is out of stock")
        difference = (variant.price - line.unit_price) * qty
        settle: str | None = None
        if difference:
            if a.payment_id is None:
                raise ToolError(
                    f"{variant.sku} costs {money(abs(variant.price - line.unit_price))} "
                    f"{'more' if difference > 0 else 'less'} per unit: give payment_id to settle "
                    f"{money(abs(difference))}"
                )
            settle = self._settle(order, a.payment_id, difference)
        effect = ExchangeEffect(
            order_id=order.order_id,
            line_no=line_no,
            quantity=qty,
            new_sku=variant.sku,
            difference=difference,
            settle_to=settle,
        )
        out = {
            "exchange": f"{qty} × {line.sku} → {variant.sku}",
            "price_difference": dollars(difference),
            "return_label": "prepaid, emailed to the customer",
        }
        return Outcome(out, effect)

    def _settle(self, order: Order, payment_id: str, difference: int) -> str:
        if payment_id.strip().lower() == STORE_CREDIT:
            if difference > 0:
                raise ToolError("store credit cannot be charged; settle a price increase on a card or PayPal payment")
            return STORE_CREDIT
        payment = order.payment(payment_id.strip())
        if payment is None or payment.method not in ("card", "paypal"):
            raise ToolError(f"{payment_id!r} is not a card or PayPal payment of {order.order_id}")
        return payment.payment_id

    def _open_return(self, a: OpenReturn) -> Outcome:
        order = self._order(a.order_id)
        lines = self._units_returnable(order, a.items)
        effect = ReturnEffect(order_id=order.order_id, lines=lines, label=a.label)
        return Outcome({"return_opened": [{"line_no": n, "quantity": q} for n, q in lines], "label": a.label}, effect)

    def _units_returnable(self, order: Order, items: list[ItemQuantity]) -> tuple[tuple[int, int], ...]:
        folded = changes(self.effects).of(order.order_id)
        seen: Counter[int] = Counter()
        for item in items:
            seen[item.line_no] += item.quantity
        out = []
        for line_no, qty in sorted(seen.items()):
            line = order.line(line_no)
            if line is None:
                raise ToolError(f"{order.order_id} has no line {line_no}")
            if line.status != "delivered":
                raise ToolError(f"line {line_no} of {order.order_id} has not been delivered; nothing to return")
            left = line.quantity - folded.returned.get(line_no, (0, ""))[0]
            if qty > left:
                raise ToolError(f"line {line_no} of {order.order_id} has {left} unit(s) not already being returned")
            out.append((line_no, qty))
        return tuple(out)

    def _cancel_items(self, a: CancelItems) -> Outcome:
        order = self._order(a.order_id)
        done = changes(self.effects).of(order.order_id).cancelled
        for n in a.line_nos:
            line = order.line(n)
            if line is None:
                raise ToolError(f"{order.order_id} has no line {n}")
            if n in done:
                raise ToolError(f"line {n} of {order.order_id} is cancelled already")
            if line.status != "processing":
                raise ToolError(f"line {n} of {order.order_id} has {line.status}; it can no longer be cancelled")
        effect = cancel_effect(order, tuple(sorted(set(a.line_nos))), self.effects)
        refunded = sum(c for _, c in effect.amounts)
        return Outcome({"cancelled": list(effect.line_nos), "refunded": dollars(refunded)}, effect)

    def _change_address(self, a: ChangeAddress) -> Outcome:
        order = self._order(a.order_id)
        shipped = [ln.line_no for ln in order.lines if ln.status != "processing"]
        if shipped:
            raise ToolError(f"{order.order_id} has shipped (line {shipped[0]}); its address can no longer change")
        if not re.search(r"\d", a.line1):
            raise ToolError("line1 needs a house or building number")
        effect = AddressEffect(order_id=order.order_id, line1=a.line1, city=a.city, postal_code=a.postal_code)
        return Outcome({"order_id": order.order_id, "delivery_address": f"{a.line1}, {a.city} {a.postal_code}"}, effect)

    def _issue_store_credit(self, a: IssueStoreCredit) -> Outcome:
        self._customer(a.customer_id)
        order = self._order(a.order_id)
        cents = to_cents(a.amount)
        if cents is None:
            raise ToolError(f"{a.amount} is not a whole number of cents")
        effect = CreditEffect(order_id=order.order_id, amount=cents, reason=a.reason)
        return Outcome({"store_credit_added": dollars(cents), "order_id": order.order_id}, effect)

    def _escalate(self, a: Escalate) -> Outcome:
        if a.order_id is not None:
            self._order(a.order_id)
        order_id = self.db.order(a.order_id).order_id if a.order_id else None  # type: ignore[union-attr]
        effect = EscalateEffect(queue=a.queue, order_id=order_id, note=a.note)
        return Outcome({"escalated_to": a.queue, "status": "the team will take it from here"}, effect)


def order_record(db: StoreDB, order: Order, effects: tuple[Effect, ...]) -> dict[str, Any]:
    """What get_order shows: the order as it stands, this conversation's changes included."""
    folded = changes(effects).of(order.order_id)
    address = next(a for a in db.account.addresses if a.address_id == order.shipping_address_id)
    delivery = (
        {"line1": folded.address[0], "city": folded.address[1], "postal_code": folded.address[2]}
        if folded.address
        else {"line1": address.line1, "city": address.city, "postal_code": address.postal_code}
    )
    refunds = [
        {
            "date": r.date,
            "lines": [list(x) for x in r.lines],
            "shipping": r.shipping,
            "amounts": [{"to": d, "amount": dollars(c)} for d, c in r.amounts],
            "reason": r.reason,
        }
        for r in order.refunds
    ] + [
        {
            "date": db.today,
            "lines": [list(x) for x in e.lines] if isinstance(e, RefundEffect) else [[n, 0] for n in e.line_nos],
            "shipping": e.shipping,
            "amounts": [{"to": d, "amount": dollars(c)} for d, c in e.amounts],
            "reason": "cancellation" if isinstance(e, CancelEffect) else "refund",
        }
        for e in effects
        if isinstance(e, RefundEffect | CancelEffect) and e.order_id == order.order_id
    ]
    return {
        "order_id": order.order_id,
        "placed_on": order.placed_on,
        "lines": [_line_record(db, order, ln.line_no, folded) for ln in order.lines],
        "goods_subtotal": dollars(order.goods),
        "promo_code": order.promo_code,
        "discount": dollars(order.discount),
        "shipping_fee": dollars(order.shipping_fee),
        "total": dollars(order.total),
        "delivery_address": delivery,
        "payments": [
            {
                "payment_id": p.payment_id,
                "method": p.method,
                "label": p.label,
                "amount": dollars(p.amount),
                "captured_on": p.captured_on,
            }
            for p in order.payments
        ],
        "shipments": [
            {"shipment_id": s.shipment_id, "line_nos": list(s.line_nos), "status": s.status} for s in order.shipments
        ],
        "refunds": refunds,
        "returns": [
            {"date": r.date, "lines": [list(x) for x in r.lines], "label": r.label, "status": "received"}
            for r in order.returns
        ]
        + [
            {"date": db.today, "lines": [[n, q]], "label": label, "status": "opened"}
            for n, (q, label) in sorted(folded.returned.items())
        ],
        "replacements": [
            {"date": p.date, "line_no": p.line_no, "quantity": p.quantity, "reason": p.reason}
            for p in order.replacements
        ]
        + [
            {"date": db.today, "line_no": n, "quantity": q, "reason": "sent today"}
            for n, q in sorted(folded.replaced.items())
        ],
    }


def _line_record(db: StoreDB, order: Order, line_no: int, folded: Any) -> dict[str, Any]:
    line = order.line(line_no)
    assert line is not None
    variant = db.variant(line.sku)
    status = "cancelled" if line_no in folded.cancelled else line.status
    record: dict[str, Any] = {
        "line_no": line.line_no,
        "sku": line.sku,
        "product_id": line.product_id,
        "name": line.name,
        "options": line.options,
        "category": line.category,
        "unit_price": dollars(line.unit_price),
        "quantity": line.quantity,
        "status": status,
        "shipment_id": line.shipment_id,
        "in_stock": variant is not None and variant.stock > 0,
        "final_sale": line.final_sale,
        "hygiene": line.hygiene,
        "perishable": line.perishable,
        "warranty_days": line.warranty_days,
    }
    if folded.replaced.get(line_no):
        record["replaced_units"] = folded.replaced[line_no]
    if line_no in folded.exchanged:
        record["exchanged_for"] = folded.exchanged[line_no][0]
    return record


# -------------------------------------------------------------------------------- policy search

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of to and or for in on at is are be it its this that with by as from when what".split()  # noqa: SIM905 - a word list reads best as words
)


def _terms(text: str) -> list[str]:
    return [w.rstrip("s") if len(w) > 3 else w for w in _WORD.findall(text.lower()) if w not in _STOP]


@lru_cache(maxsize=1)
def _policy_index() -> tuple[list[tuple[str, str, str, Counter[str]]], dict[str, float]]:
    docs = [(c.id, c.title, c.text, Counter(_terms(c.title + " " + c.title + " " + c.text))) for c in store_clauses()]
    df: Counter[str] = Counter()
    for *_, terms in docs:
        df.update(set(terms))
    idf = {t: math.log((1 + len(docs)) / (1 + n)) + 1 for t, n in df.items()}
    return docs, idf


@lru_cache(maxsize=1024)
def _search(query: str) -> tuple[tuple[str, str, str], ...]:
    docs, idf = _policy_index()
    wanted = _terms(query)
    scored = []
    for cid, title, text, terms in docs:
        score = sum(idf.get(t, 0.0) * (1 + math.log(terms[t])) for t in set(wanted) if terms[t])
        if score:
            scored.append((score, cid, title, text))
    scored.sort(key=lambda s: (-s[0], int(s[1][1:])))
    return tuple((cid, title, text.split(". ")[0].rstrip(".") + ".") for _, cid, title, text in scored[:5])


def search_policy(query: str) -> list[dict[str, str]]:
    """The best five sections for ``query`` (words that occur in the section, weighted by rarity)."""
    return [{"section": cid, "title": title, "first_sentence": first} for cid, title, first in _search(query)]
