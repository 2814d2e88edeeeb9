"""The store desk's policy engine: for a conversation, the gold outcome of every request.

:func:`decide` applies P1–P14 and P15–P32 (:mod:`service.env.store.clauses`) to each request of a
:class:`~service.env.store.world.StoreTicket`, with every hidden fact known (what the customer tells
an agent that asks what the policy needs), and returns a :class:`Gold`:

- the **effects** the policy's writes make (which order, lines, amounts, destinations, variant, queue);
- the **reads** the procedure requires before them (the order, the shipment, the product);
- the **topics** the agent must learn from the customer before deciding (photos, condition, …);
- the **facts** the customer must be told (amount, timeline, the reason for a refusal, …).

Grading compares the state an agent's writes reach with the state the gold effects reach
(:func:`service.env.store.ledger.final_state`); the generator never writes a label. A test applies
every gold effect through the tools' own checks, so a gold the backend would refuse is a bug caught
over every generated ticket.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_serializer

from service.env.policy import LATE_IN_TRANSIT_DAYS, REASONS, RETURN_WINDOW_DAYS
from service.env.store.clauses import (
    ESCALATION_CENTS,
    FREE_RETURN_TIERS,
    LATE_CREDIT_MAX,
    LATE_CREDIT_MIN,
    LATE_CREDIT_PERCENT,
    LATE_DELIVERY_DAYS,
    RESTOCKING_PERCENT,
    RETURN_WITHOUT_ITEM_LIMIT,
)
from service.env.store.ledger import (
    AddressEffect,
    CancelEffect,
    CreditEffect,
    Effect,
    EscalateEffect,
    ExchangeEffect,
    RefundEffect,
    ReplaceEffect,
    ReturnEffect,
    refunded_by_payment,
)
from service.env.store.money import discount_shares, money, paid_for, percent_of
from service.env.store.world import STORE_CREDIT, Line, Order, Request, Shipment, StoreDB, StoreTicket
from service.env.world import per_ticket

FactKind = Literal["amount", "timeline", "reason", "holding", "replacement", "variant"]
Topic = Literal["identity", "order", "quantity", "photos", "condition", "delivery", "preference", "confirmation"]
# Topics whose asking the policy governs: asking one it did not need is a needless question.
GOVERNED_TOPICS: frozenset[str] = frozenset({"photos", "condition", "delivery"})

# Every reason a refusal can rest on; the reply reader reads each in any words.
STORE_REASONS = (
    "already_settled",
    *REASONS,  # the ticket tasks' (service.env.policy)
    "shipped",
    "not_late",
    "already_credited",
    "not_holder",
    "original_payment",
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Fact(_Frozen):
    """Something the customer must be told (P32)."""

    kind: FactKind
    value: str  # cents for an amount, "card"/"paypal" for a timeline, a reason code, a variant's options


class Outcome(_Frozen):
    """The policy's answer to one request."""

    request: int
    kind: str
    order_id: str
    lines: tuple[int, ...]
    granted: bool
    effects: tuple[Effect, ...] = ()
    reason: str | None = None
    tell: tuple[Fact, ...] = ()
    needs: frozenset[str] = frozenset()
    reads: tuple[tuple[str, str], ...] = ()  # ("order" | "shipment" | "product", id)
    clauses: tuple[str, ...]
    rationale: str
    rules: tuple[str, ...] = ()  # the rules its refund, credit or escalated amount combines (for reports)
    escalated: int = 0  # cents: the refund P28 escalated instead of making (its note must state it)

    @field_serializer("needs")
    def _sorted(self, needs: frozenset[str]) -> list[str]:  # a set's order is not stable across processes
        return sorted(needs)


class Gold(_Frozen):
    outcomes: tuple[Outcome, ...]
    holder: bool

    @property
    def effects(self) -> tuple[Effect, ...]:
        return tuple(e for o in self.outcomes for e in o.effects)

    @property
    def needs(self) -> frozenset[str]:
        return frozenset(t for o in self.outcomes for t in o.needs)


# ----------------------------------------------------------------------------------- records


def days_between(earlier: str, later: str) -> int:
    return (date.fromisoformat(later) - date.fromisoformat(earlier)).days


def shipment_of(order: Order, line_no: int) -> Shipment | None:
    line = order.line(line_no)
    return order.shipment(line.shipment_id) if line is not None and line.shipment_id else None


def days_since_delivery(db: StoreDB, order: Order, line_no: int) -> int | None:
    shipment = shipment_of(order, line_no)
    delivered = shipment.delivered_on if shipment is not None else None
    return days_between(delivered, db.today) if delivered else None


def carrier_confirms_loss(db: StoreDB, shipment: Shipment) -> bool:
    """P5: lost, returned to sender, or in transit more than seven days past its estimate."""
    if shipment.status in ("lost", "returned"):
        return True
    late = days_between(shipment.estimated_delivery, db.today)
    return shipment.status in ("in_transit", "out_for_delivery", "exception") and late > LATE_IN_TRANSIT_DAYS


def days_late(shipment: Shipment) -> int | None:
    """P27: from the estimate to the delivery event (None while not delivered)."""
    delivered = shipment.delivered_on
    return days_between(shipment.estimated_delivery, delivered) if delivered else None


def allocate(order: Order, cents: int, earlier: tuple[Effect, ...]) -> tuple[tuple[str, int], ...]:
    """P21: card or PayPal first, up to what each paid less what was refunded to it; the rest as store
    credit."""
    refunded = refunded_by_payment(order, earlier)
    out: list[tuple[str, int]] = []
    left = cents
    for p in order.payments:
        if left and p.method in ("card", "paypal"):
            room = max(0, p.amount - refunded[p.payment_id])
            take = min(room, left)
            if take:
                out.append((p.payment_id, take))
                left -= take
    if left:
        out.append((STORE_CREDIT, left))
    return tuple(out)


def timeline_facts(order: Order, amounts: tuple[tuple[str, int], ...]) -> tuple[Fact, ...]:
    methods = {p.payment_id: p.method for p in order.payments}
    kinds = dict.fromkeys(methods.get(dest) for dest, _ in amounts)
    return tuple(Fact(kind="timeline", value=k) for k in kinds if k in ("card", "paypal"))


def duplicate_capture(order: Order) -> str | None:
    """The payment id of a second capture identical to an earlier one (P31), if any."""
    seen: set[tuple[str, str, int]] = set()
    for p in order.payments:
        key = (p.method, p.label, p.amount)
        if key in seen:
            return p.payment_id
        seen.add(key)
    return None


def settle_to(order: Order) -> str:
    """P24: where an exchange's price difference is settled."""
    return next((p.payment_id for p in order.payments if p.method in ("card", "paypal")), STORE_CREDIT)


def true_reasons(ticket: StoreTicket, revealed: frozenset[str]) -> frozenset[str]:
    """The refusal reasons whose facts hold for some request of ``ticket`` — on its records, and on what the
    customer has told (``revealed`` topics): what a reply may assert without telling something untrue."""
    db, out = ticket.db, {"original_payment"}  # P21's rule itself is true of every refund
    if not ticket.writer.holder:
        out.add("not_holder")
    if db.account.high_risk:
        out.add("unverifiable")
    for r in ticket.requests:
        order = db.order(r.order_id)
        if order is not None:
            out |= _request_facts(ticket, r, order, revealed)
            for n in [n for n, _ in r.lines] or [ln.line_no for ln in order.lines]:
                out |= _line_facts(db, order, n)
    return frozenset(out)


def _request_facts(ticket: StoreTicket, r: Request, order: Order, revealed: frozenset[str]) -> set[str]:
    """What holds of a request as a whole: the customer's own facts, the order's payments and credits."""
    hidden, out = ticket.hidden, set()
    condition = ticket.stated_condition or (hidden.condition if "condition" in revealed else None)
    if r.kind in ("change_of_mind", "exchange") and condition == "used":
        out.add("used")
    if r.kind in ("damaged", "defective") and hidden.photos_show == "normal_wear" and "photos" in revealed:
        out.add("normal_wear")
    if r.kind == "missing" and hidden.parcel_found and "delivery" in revealed:
        out.add("parcel_found")
    if duplicate_capture(order) is None:
        out.add("not_charged_twice")
    if any(c.order_id == order.order_id for c in ticket.db.credits):
        out.add("already_credited")
    if r.kind == "address" and _any_shipped(order):
        out.add("shipped")
    return out


def _line_facts(db: StoreDB, order: Order, line_no: int) -> set[str]:
    """What holds of one line of a request: its flags, its days, its parcel, what was settled on it."""
    line, out = order.line(line_no), set[str]()
    if line is None:
        return out
    days = days_since_delivery(db, order, line_no)
    shipment = shipment_of(order, line_no)
    late = days_late(shipment) if shipment is not None else None
    facts = {
        "final_sale": line.final_sale or line.hygiene or line.perishable,
        "window": days is not None and days > RETURN_WINDOW_DAYS,
        "warranty": days is not None and days > line.warranty_days,
        "shipped": line.status != "processing",
        "in_transit": shipment is not None
        and shipment.delivered_on is None
        and not carrier_confirms_loss(db, shipment),
        "not_late": late is not None and late <= LATE_DELIVERY_DAYS,
        "already_settled": settled_units(order).get(line_no, 0) > 0,
    }
    return {name for name, holds in facts.items() if holds}


def _any_shipped(order: Order) -> bool:
    return any(line.status != "processing" for line in order.lines)


def settled_units(order: Order) -> dict[int, int]:
    """Units of each line settled before this conversation: refunded or replaced (P18)."""
    units: dict[int, int] = {}
    for r in order.refunds:
        for n, q in r.lines:
            units[n] = units.get(n, 0) + q
    for p in order.replacements:
        units[p.line_no] = units.get(p.line_no, 0) + p.quantity
    return units


def _settled_or_risky(
    d: _Decider, i: int, r: Request, order: Order, reads: tuple[tuple[str, str], ...]
) -> Outcome | None:
    """What comes before an item's own rules: a line already settled (P18), then the account's risk (P7)."""
    settled = _settled(d, i, r, order, reads)
    return settled if settled is not None else _risk(d, i, r, order, reads)


def _settled(d: _Decider, i: int, r: Request, order: Order, reads: tuple[tuple[str, str], ...]) -> Outcome | None:
    """P18: units refunded or replaced before this conversation were settled; a claim about them again is
    declined (only the units left on the line can be claimed)."""
    done = settled_units(order)
    if not any(q > _line(order, n).quantity - done.get(n, 0) for n, q in r.lines):
        return None
    order_only = tuple(x for x in reads if x[0] == "order")  # the order's records decide it, not the delivery
    return d.refuse(
        i, r, "already_settled", ("P18",), "Those units were refunded or replaced already.", reads=order_only
    )


# ----------------------------------------------------------------------------------- deciding


class _Decider:
    """Decides the requests of one ticket in order, keeping the effects decided so far (P21's
    allocation and P18's 'never twice' read them)."""

    def __init__(self, ticket: StoreTicket) -> None:
        self.t = ticket
        self.db = ticket.db
        self.effects: list[Effect] = []

    def refuse(self, i: int, r: Request, reason: str, clauses: tuple[str, ...], why: str, **kw: object) -> Outcome:
        return Outcome(
            request=i,
            kind=r.kind,
            order_id=r.order_id,
            lines=tuple(n for n, _ in r.lines),
            granted=False,
            reason=reason,
            tell=(Fact(kind="reason", value=reason),),
            clauses=clauses,
            rationale=why,
            **kw,
        )

    def grant(self, i: int, r: Request, effects: list[Effect], tell: list[Fact], **kw: object) -> Outcome:
        self.effects += effects
        return Outcome(
            request=i,
            kind=r.kind,
            order_id=r.order_id,
            lines=tuple(n for n, _ in r.lines),
            granted=True,
            effects=tuple(effects),
            tell=tuple(dict.fromkeys(tell)),
            **kw,
        )

    def refund_worth(
        self, order: Order, r: Request, *, shipping: bool, restocking: bool
    ) -> tuple[int, tuple[str, ...], bool]:
        """(refund in cents, the rules it combines, shipping included) for the request's lines (P18-P20). A
        rule counts only where it changes the amount: the line's price, then each adjustment."""
        cents, rules = 0, ["P18 price"]
        for line_no, qty in r.lines:
            worth = paid_for(order, line_no, qty)
            if restocking:
                worth -= percent_of(worth, RESTOCKING_PERCENT)
            cents += worth
        shares = discount_shares(order)
        if any(shares[n] for n, _ in r.lines):
            rules.append("P18 discount share")
            # part of a line's units is that fraction of what the line was paid (without a discount it is the
            # unit price, no rule at all)
            if any(shares[n] and qty < order.line(n).quantity for n, qty in r.lines):  # type: ignore[union-attr]
                rules.append("P18 part of a line")
        if restocking:
            rules.append("P20 restocking fee")
        with_shipping = shipping and order.shipping_fee > 0 and not self._shipping_refunded(order)
        if with_shipping:
            cents += order.shipping_fee
            rules.append("P19 shipping fee")
        return cents, tuple(rules), with_shipping

    def _shipping_refunded(self, order: Order) -> bool:
        if any(p.shipping for p in order.refunds):
            return True
        return any(
            isinstance(e, RefundEffect | CancelEffect) and e.order_id == order.order_id and e.shipping
            for e in self.effects
        )

    def refund(
        self,
        i: int,
        r: Request,
        order: Order,
        *,
        at_fault: bool,
        restocking: bool = False,
        extra: list[Effect] | None = None,
        clauses: tuple[str, ...],
        why: str,
        reads: tuple[tuple[str, str], ...],
        needs: frozenset[str] = frozenset(),
    ) -> Outcome:
        """A refund of the request's lines (P18-P21), escalated instead above the threshold (P28)."""
        cents, rules, with_shipping = self.refund_worth(order, r, shipping=at_fault, restocking=restocking)
        if cents > ESCALATION_CENTS:
            return self.escalate(i, r, order, cents, rules, clauses, why, reads, needs)
        amounts = allocate(order, cents, tuple(self.effects))
        if len(amounts) > 1:  # P21 split it between the card and store credit
            rules += ("P21 card then store credit",)
        effects: list[Effect] = [
            RefundEffect(order_id=order.order_id, lines=r.lines, shipping=with_shipping, amounts=amounts)
        ]
        effects += extra or []
        tell = [Fact(kind="amount", value=str(cents)), *timeline_facts(order, amounts)]
        if r.to_other_card:  # P21: it can only go back to the original payment
            tell.append(Fact(kind="reason", value="original_payment"))
        return self.grant(
            i,
            r,
            effects,
            tell,
            clauses=clauses,
            rationale=f"{why} Refund {money(cents)}.",
            reads=reads,
            needs=needs,
            rules=rules,
        )

    def escalate(
        self,
        i: int,
        r: Request,
        order: Order,
        cents: int,
        rules: tuple[str, ...],
        clauses: tuple[str, ...],
        why: str,
        reads: tuple[tuple[str, str], ...],
        needs: frozenset[str],
    ) -> Outcome:
        """P28: the refund handed to Escalations, with a note that quotes the order id and the amount (the
        amount counts as computed: the note must state it to the cent)."""
        effect = EscalateEffect(queue="Escalations", order_id=order.order_id, note=f"{order.order_id} {money(cents)}")
        return self.grant(
            i,
            r,
            [effect],
            [Fact(kind="holding", value="Escalations")],
            clauses=(*clauses, "P8", "P28"),
            rationale=f"{why} The refund ({money(cents)}) is above the threshold: escalate.",
            reads=reads,
            needs=needs,
            rules=rules,
            escalated=cents,
        )

    def fault_return(self, order: Order, r: Request) -> list[Effect]:
        """P22: faulty or wrong items worth more than the limit come back on a prepaid label."""
        lines = tuple((n, q) for n, q in r.lines if paid_for(order, n, q) > RETURN_WITHOUT_ITEM_LIMIT)
        return [ReturnEffect(order_id=order.order_id, lines=lines, label="prepaid")] if lines else []

    def replace_or_refund(
        self,
        i: int,
        r: Request,
        order: Order,
        *,
        at_fault: bool,
        send_back: bool,
        clauses: tuple[str, ...],
        why: str,
        reads: tuple[tuple[str, str], ...],
        needs: frozenset[str],
    ) -> Outcome:
        """P23, item by item: a replacement of what is in stock unless the customer chooses a refund; a refund of
        the rest. P28 escalates the request when its refund is above the threshold."""
        stocked = tuple((n, q) for n, q in r.lines if self._in_stock(order, n, q))
        wants = r.wants if r.mind_change is None else r.mind_change
        asks = needs | ({"preference"} if not r.wants_stated and stocked else frozenset())
        back = self.fault_return(order, r) if send_back else []
        replaced = stocked if wants in ("replacement", "either") else ()
        refunded = tuple(line for line in r.lines if line not in replaced)
        if not refunded:  # P8 escalates refunds only
            effects: list[Effect] = [ReplaceEffect(order_id=order.order_id, line_no=n, quantity=q) for n, q in replaced]
            return self.grant(
                i,
                r,
                effects + back,
                [Fact(kind="replacement", value="sent")],
                clauses=(*clauses, "P23"),
                rationale=f"{why} In stock: send a replacement.",
                reads=reads,
                needs=asks,
            )
        replacements: list[Effect] = [
            ReplaceEffect(order_id=order.order_id, line_no=n, quantity=q) for n, q in replaced
        ]
        part = r.model_copy(update={"lines": refunded})
        outcome = self.refund(
            i,
            part,
            order,
            at_fault=at_fault,
            extra=replacements + back,
            clauses=(*clauses, "P23", "P18", "P21"),
            why=why
            + (
                " Out of stock."
                if not stocked
                else " Refunded as the customer chose."
                if not replaced
                else " The items in stock are replaced, the rest refunded."
            ),
            reads=reads,
            needs=asks,
        )
        if replacements and outcome.granted and not any(isinstance(e, EscalateEffect) for e in outcome.effects):
            tell = (*outcome.tell, Fact(kind="replacement", value="sent"))
            outcome = outcome.model_copy(update={"tell": tell, "lines": tuple(n for n, _ in r.lines)})
        return outcome.model_copy(update={"lines": tuple(n for n, _ in r.lines)})

    def _in_stock(self, order: Order, line_no: int, qty: int) -> bool:
        line = order.line(line_no)
        variant = self.db.variant(line.sku) if line is not None else None
        return variant is not None and variant.stock >= qty


@per_ticket
def decide(ticket: StoreTicket) -> Gold:
    """The policy's gold outcome for every request of ``ticket`` (hidden facts known)."""
    d = _Decider(ticket)
    if not ticket.writer.holder:
        outcomes = tuple(
            d.refuse(i, r, "not_holder", ("P29",), "The writer is not the account holder.")
            for i, r in enumerate(ticket.requests)
        )
        return Gold(outcomes=outcomes, holder=False)
    outcomes = tuple(_decide_one(d, i, r) for i, r in enumerate(ticket.requests))
    return Gold(outcomes=outcomes, holder=True)


def _decide_one(d: _Decider, i: int, r: Request) -> Outcome:
    order = d.db.order(r.order_id)
    assert order is not None, f"request {i} names an unknown order {r.order_id}"
    handler = _HANDLERS[r.kind]
    return handler(d, i, r, order)


def _risk(d: _Decider, i: int, r: Request, order: Order, reads: tuple[tuple[str, str], ...]) -> Outcome | None:
    """P7: a high-risk account's unverifiable item claim is declined and handed to Fraud."""
    if not d.t.db.account.high_risk:
        return None
    effect = EscalateEffect(queue="Fraud", order_id=order.order_id, note=order.order_id)
    d.effects.append(effect)
    return Outcome(
        request=i,
        kind=r.kind,
        order_id=r.order_id,
        lines=tuple(n for n, _ in r.lines),
        granted=False,
        effects=(effect,),
        reason="unverifiable",
        tell=(Fact(kind="reason", value="unverifiable"),),
        reads=reads,
        clauses=("P7", "P15"),
        rationale="High-risk account; the claim cannot be verified from order or carrier data: decline, Fraud.",
    )


def _item_claim(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    """Damaged or defective items (P2, P3, P11, P19, P22, P23)."""
    first = r.lines[0][0]
    reads = _delivery_reads(order, first)
    earlier = _settled_or_risky(d, i, r, order, reads)
    if earlier is not None:
        return earlier
    days = days_since_delivery(d.db, order, first)
    assert days is not None
    in_window = days <= RETURN_WINDOW_DAYS
    if r.kind == "damaged" and not in_window:
        return d.refuse(i, r, "window", ("P2",), f"Shipping damage reported {days} days after delivery.", reads=reads)
    clause = "P2" if in_window else "P3"
    line = order.line(first)
    assert line is not None
    if clause == "P3" and days > line.warranty_days:
        return d.refuse(
            i,
            r,
            "warranty",
            ("P3",),
            f"Defect {days} days after delivery, warranty {line.warranty_days} days.",
            reads=reads,
        )
    needs = frozenset() if d.t.photos_attached else frozenset({"photos"})
    photos = "damage" if d.t.photos_attached else d.t.hidden.photos_show
    if photos == "normal_wear":
        return d.refuse(
            i, r, "normal_wear", (clause, "P11"), "The photos show ordinary wear.", reads=reads, needs=needs
        )
    what = "Damage or a defect on arrival" if clause == "P2" else "A defect inside the warranty"
    return d.replace_or_refund(
        i,
        r,
        order,
        at_fault=clause == "P2",
        send_back=True,
        clauses=(clause, "P11", "P22"),
        why=f"{what}, shown by photos.",
        reads=reads,
        needs=needs,
    )


def _delivery_reads(order: Order, line_no: int) -> tuple[tuple[str, str], ...]:
    """The order, and the shipment whose delivery event starts the claim's windows (P15)."""
    shipment = shipment_of(order, line_no)
    return (("order", order.order_id),) + ((("shipment", shipment.shipment_id),) if shipment else ())


def _wrong_item(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    reads = _delivery_reads(order, r.lines[0][0])
    earlier = _settled_or_risky(d, i, r, order, reads)
    if earlier is not None:
        return earlier
    days = days_since_delivery(d.db, order, r.lines[0][0])
    assert days is not None
    if days > RETURN_WINDOW_DAYS:
        return d.refuse(i, r, "window", ("P4",), f"Wrong item reported {days} days after delivery.", reads=reads)
    return d.replace_or_refund(
        i,
        r,
        order,
        at_fault=True,
        send_back=True,
        clauses=("P4", "P19", "P22"),
        why="We shipped the wrong item.",
        reads=reads,
        needs=frozenset(),
    )


def _missing(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    shipment = shipment_of(order, r.lines[0][0])
    assert shipment is not None
    reads = (("order", order.order_id), ("shipment", shipment.shipment_id))
    confirmed = carrier_confirms_loss(d.db, shipment)
    if not confirmed:
        risky = _risk(d, i, r, order, reads)
        if risky is not None:
            return risky
    if confirmed:
        late = shipment.status not in ("lost", "returned")
        why = f"The carrier reports the parcel {shipment.status.replace('_', ' ')}" + (
            " and far past its estimate." if late else "."
        )
        return d.replace_or_refund(
            i,
            r,
            order,
            at_fault=True,
            send_back=False,
            clauses=("P5", "P19"),
            why=why,
            reads=reads,
            needs=frozenset(),
        )
    if shipment.status != "delivered":
        return d.refuse(i, r, "in_transit", ("P5",), "In transit and not yet late: it is on its way.", reads=reads)
    needs = frozenset({"delivery"})
    if d.t.hidden.parcel_found:
        return d.refuse(i, r, "parcel_found", ("P5",), "The customer found the parcel.", reads=reads, needs=needs)
    return d.replace_or_refund(
        i,
        r,
        order,
        at_fault=True,
        send_back=False,
        clauses=("P5", "P19"),
        why="Delivered per the carrier but confirmed missing: treated as lost.",
        reads=reads,
        needs=needs,
    )


def _return(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    """Change of mind and exchanges (P1, P6, P20, P22, P24)."""
    first = r.lines[0][0]
    line = order.line(first)
    assert line is not None
    reads = _delivery_reads(order, first)
    earlier = _settled_or_risky(d, i, r, order, reads)
    if earlier is not None:
        return earlier
    if line.final_sale or line.hygiene or line.perishable:
        return d.refuse(i, r, "final_sale", ("P6",), "Final-sale, hygiene or perishable item.", reads=reads)
    days = days_since_delivery(d.db, order, first)
    assert days is not None
    if days > RETURN_WINDOW_DAYS:
        return d.refuse(i, r, "window", ("P1",), f"Return asked {days} days after delivery.", reads=reads)
    needs = frozenset({"condition"}) if d.t.stated_condition is None else frozenset()
    condition = d.t.stated_condition or d.t.hidden.condition
    if condition == "used":
        return d.refuse(i, r, "used", ("P1",), "The item was used.", reads=reads, needs=needs)
    if r.kind == "exchange" and r.exchange_sku:  # only now does the variant's stock decide anything
        reads += (("product", line.product_id),)
        variant = d.db.variant(r.exchange_sku)
        if variant is not None and variant.stock >= r.lines[0][1]:
            return _exchange(d, i, r, order, variant.sku, reads, needs)
    label = "prepaid" if d.db.account.tier in FREE_RETURN_TIERS else "customer_paid"
    restocking = line.category == "electronics" and condition == "opened" and r.kind == "change_of_mind"
    back = ReturnEffect(order_id=order.order_id, lines=r.lines, label=label)
    why = "Unused, inside the window" + (", opened electronics: restocking fee." if restocking else ".")
    if r.kind == "exchange":
        why += " The variant wanted is out of stock: return and refund."
    return d.refund(
        i,
        r,
        order,
        at_fault=False,
        restocking=restocking,
        extra=[back],
        clauses=("P1", "P18", "P21", "P22") + (("P20",) if restocking else ()),
        why=why,
        reads=reads,
        needs=needs,
    )


def _exchange(
    d: _Decider,
    i: int,
    r: Request,
    order: Order,
    sku: str,
    reads: tuple[tuple[str, str], ...],
    needs: frozenset[str],
) -> Outcome:
    line_no, qty = r.lines[0]
    line = order.line(line_no)
    variant = d.db.variant(sku)
    assert line is not None and variant is not None
    difference = (variant.price - line.unit_price) * qty
    effect = ExchangeEffect(
        order_id=order.order_id,
        line_no=line_no,
        quantity=qty,
        new_sku=sku,
        difference=difference,
        settle_to=settle_to(order) if difference else None,
    )
    tell = [Fact(kind="variant", value=variant.options)]
    if difference:
        tell.append(Fact(kind="amount", value=str(abs(difference))))
    return d.grant(
        i,
        r,
        [effect],
        tell,
        clauses=("P1", "P24"),
        rationale=f"Unused, in the window: exchange for {variant.options}.",
        reads=reads,
        needs=needs,
        rules=("P24 price difference",) if difference else (),
    )


def _late(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    shipment = shipment_of(order, r.lines[0][0]) if r.lines else order.shipments[0]
    assert shipment is not None
    reads = (("order", order.order_id), ("shipment", shipment.shipment_id))
    late = days_late(shipment)
    assert late is not None
    if late <= LATE_DELIVERY_DAYS:
        return d.refuse(i, r, "not_late", ("P27", "P12"), f"Delivered {late} day(s) after the estimate.", reads=reads)
    if any(c.order_id == order.order_id for c in d.db.credits):
        return d.refuse(
            i, r, "already_credited", ("P27",), "A goodwill credit was already given for this order.", reads=reads
        )
    tier = d.db.account.tier
    base = order.goods - order.discount
    share = percent_of(base, LATE_CREDIT_PERCENT[tier])
    credit = min(LATE_CREDIT_MAX[tier], max(LATE_CREDIT_MIN, share))
    rules = ("P27 share of the goods",) + (("P27 less the discount",) if order.discount else ())
    rules += ("P27 limits",) if credit != share else ()
    effect = CreditEffect(order_id=order.order_id, amount=credit, reason="late_delivery")
    return d.grant(
        i,
        r,
        [effect],
        [Fact(kind="amount", value=str(credit))],
        clauses=("P27",),
        rationale=f"Delivered {late} days late: a goodwill credit of {money(credit)}.",
        reads=reads,
        rules=rules,
    )


def _duplicate(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    reads = (("order", order.order_id),)
    dup = duplicate_capture(order)
    if dup is None:
        return d.refuse(i, r, "not_charged_twice", ("P10", "P31"), "The payments show a single charge.", reads=reads)
    payment = order.payment(dup)
    assert payment is not None
    effect = RefundEffect(order_id=order.order_id, lines=(), shipping=False, amounts=((dup, payment.amount),))
    return d.grant(
        i,
        r,
        [effect],
        [Fact(kind="amount", value=str(payment.amount)), *timeline_facts(order, ((dup, 1),))],
        clauses=("P10", "P31"),
        rationale=f"Captured twice: refund the duplicate {money(payment.amount)}.",
        reads=reads,
    )


def _cancel(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    reads = (("order", order.order_id),)
    shipped = [n for n, _ in r.lines if order.line(n).status != "processing"]  # type: ignore[union-attr]
    if shipped:
        return d.refuse(i, r, "shipped", ("P25",), f"Line(s) {shipped} have shipped.", reads=reads)
    line_nos = tuple(n for n, _ in r.lines)
    effect = cancel_effect(order, line_nos, tuple(d.effects))
    total = sum(c for _, c in effect.amounts)
    return d.grant(
        i,
        r,
        [effect],
        [Fact(kind="amount", value=str(total))],
        clauses=("P25", "P21"),
        rationale=f"Not shipped: cancel, {money(total)} back.",
        reads=reads,
    )


def _line(order: Order, line_no: int) -> Line:
    line = order.line(line_no)
    assert line is not None, f"{order.order_id} has no line {line_no}"
    return line


def cancel_effect(order: Order, line_nos: tuple[int, ...], earlier: tuple[Effect, ...]) -> CancelEffect:
    """What cancelling ``line_nos`` refunds (P25): what they were paid, and the shipping fee when no line of
    the order is left, back as P21 says. The backend and the policy both compute it here."""
    cancelled_before = {
        n for e in earlier if isinstance(e, CancelEffect) and e.order_id == order.order_id for n in e.line_nos
    }
    shares = discount_shares(order)
    cents = sum(_line(order, n).subtotal - shares[n] for n in line_nos)
    left = {ln.line_no for ln in order.lines} - cancelled_before - set(line_nos)
    shipping = not left and order.shipping_fee > 0
    if shipping:
        cents += order.shipping_fee
    return CancelEffect(
        order_id=order.order_id, line_nos=line_nos, amounts=allocate(order, cents, earlier), shipping=shipping
    )


def _address(d: _Decider, i: int, r: Request, order: Order) -> Outcome:
    reads = (("order", order.order_id),)
    if any(line.status != "processing" for line in order.lines):
        return d.refuse(i, r, "shipped", ("P26",), "Part of the order has shipped.", reads=reads)
    a = r.new_address
    assert a is not None
    effect = AddressEffect(order_id=order.order_id, line1=a.line1, city=a.city, postal_code=a.postal_code)
    return d.grant(i, r, [effect], [], clauses=("P26",), rationale="Not shipped: change the address.", reads=reads)


_HANDLERS = {
    "damaged": _item_claim,
    "defective": _item_claim,
    "wrong_item": _wrong_item,
    "missing": _missing,
    "change_of_mind": _return,
    "exchange": _return,
    "late": _late,
    "duplicate_charge": _duplicate,
    "cancel": _cancel,
    "address": _address,
}
