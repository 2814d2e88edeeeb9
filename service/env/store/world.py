"""The store desk's world: one customer account with its orders, payments, shipments and history.

A :class:`StoreDB` is the store's database for one conversation, as generated; it never changes.
What the agent's writes do to it is a sequence of effects (:mod:`service.env.store.ledger`), and
the store as it stands at any step is the database with those effects applied — so an episode's
state stays small and the final state is a pure function of the actions.

Money is integer **cents** everywhere inside the core; tools show and take dollars with two
decimals. Dates are ISO strings; ``StoreDB.today`` is the day the conversation was opened.

A :class:`StoreTicket` is one conversation: the database, who writes and what they want
(:class:`Request`), what they know but have not said (:class:`StoreHidden`), and the first message.
What an agent may *see* of it is decided in :mod:`service.env.store.tools` (records) and
:mod:`service.env.store.episode` (the observation).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from service.env.world import Split, high_risk

Tier = Literal["standard", "silver", "gold"]
PaymentMethod = Literal["card", "paypal", "gift_card", "store_credit"]
LineStatus = Literal["processing", "shipped", "delivered"]
EventStatus = Literal[
    "label_created", "picked_up", "in_transit", "out_for_delivery", "delivered", "exception", "lost", "returned"
]
StoreDifficulty = Literal["easy", "medium", "hard"]
RequestKind = Literal[
    "damaged",  # arrived damaged
    "defective",  # does not work (on arrival or later, inside the warranty or not)
    "wrong_item",  # a different item came
    "missing",  # the parcel never arrived
    "late",  # arrived late: wants a goodwill gesture
    "change_of_mind",  # wants to send it back
    "exchange",  # wants another size or colour of it
    "duplicate_charge",  # charged twice
    "cancel",  # cancel lines not shipped yet
    "address",  # change the delivery address of an order not shipped yet
]
Remedy = Literal["refund", "replacement", "either", "exchange", "cancel", "address", "credit"]
Condition = Literal["unopened", "opened", "used"]
STORE_CREDIT = "store_credit"  # the refund destination that is not a payment of the order
# Where the carrier left a delivered parcel (the tracking's last event), and what the customer calls it when
# they look for it: a customer who checks around looks where the carrier says it was left.
DELIVERED_WHERE = {
    "Delivered to front door": "door",
    "Left with neighbour": "neighbour",
    "Delivered to parcel locker": "locker",
    "Signed for": "signed",
}


def canonical_order_id(text: str) -> str:
    """An order id as customers write it ("ord81249", "ORD 81249", "#ORD-81249") in the store's form."""
    compact = re.sub(r"[\s#_-]", "", text).upper()
    return f"ORD-{compact[3:]}" if compact.startswith("ORD") and compact[3:].isdigit() else text.strip().upper()


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Address(_Frozen):
    address_id: str
    label: str  # "home", "work", …
    line1: str
    city: str
    postal_code: str


class Account(_Frozen):
    customer_id: str
    name: str
    email: str
    phone: str
    tier: Tier
    member_since: str
    addresses: tuple[Address, ...]
    store_credit: int  # balance in cents
    returns_12m: int
    chargebacks: int
    fraud_flag: bool

    @property
    def high_risk(self) -> bool:
        return high_risk(self.returns_12m, self.chargebacks, self.fraud_flag)


class Variant(_Frozen):
    """One sellable variant of a product (a size, a colour) with its stock."""

    sku: str
    product_id: str
    name: str
    category: str
    options: str  # "size 9 · navy"; "" for a product without variants
    price: int  # cents
    stock: int
    final_sale: bool = False
    hygiene: bool = False
    perishable: bool = False
    warranty_days: int = 0


class Line(_Frozen):
    line_no: int  # 1-based, in order
    sku: str
    product_id: str
    name: str
    category: str
    options: str
    unit_price: int  # cents
    quantity: int
    status: LineStatus
    shipment_id: str | None
    final_sale: bool = False
    hygiene: bool = False
    perishable: bool = False
    warranty_days: int = 0

    @property
    def subtotal(self) -> int:
        return self.unit_price * self.quantity


class Payment(_Frozen):
    payment_id: str
    method: PaymentMethod
    label: str  # "Visa ending 4242", "PayPal (a.smith@…)", "Gift card ending 1234", "Store credit"
    amount: int  # captured, cents
    captured_on: str


class TrackingEvent(_Frozen):
    date: str
    status: EventStatus
    detail: str


class Shipment(_Frozen):
    shipment_id: str
    carrier: str
    tracking_no: str
    line_nos: tuple[int, ...]
    shipped_on: str
    estimated_delivery: str
    events: tuple[TrackingEvent, ...]

    @property
    def status(self) -> EventStatus:
        return self.events[-1].status

    @property
    def delivered_on(self) -> str | None:
        return next((e.date for e in reversed(self.events) if e.status == "delivered"), None)


class PastRefund(_Frozen):
    """A refund made before this conversation (shown on the order)."""

    refund_id: str
    date: str
    lines: tuple[tuple[int, int], ...]  # (line_no, quantity)
    shipping: bool
    amounts: tuple[tuple[str, int], ...]  # (payment_id or store_credit, cents)
    reason: str


class PastReturn(_Frozen):
    """Units sent back before this conversation (their refund is a :class:`PastRefund` of the order)."""

    return_id: str
    date: str  # the day the return was received
    lines: tuple[tuple[int, int], ...]  # (line_no, quantity)
    label: Literal["prepaid", "customer_paid"]
    reason: str


class PastReplacement(_Frozen):
    """Units replaced before this conversation: the claim about them was settled by the replacement."""

    replacement_id: str
    date: str  # the day the replacement was sent
    line_no: int
    quantity: int
    reason: str


class PastCredit(_Frozen):
    """A goodwill store credit issued before this conversation."""

    credit_id: str
    date: str
    order_id: str
    amount: int
    reason: str


class Order(_Frozen):
    order_id: str
    placed_on: str
    lines: tuple[Line, ...]
    promo_code: str | None
    discount: int  # cents off the goods, spread across lines (P18)
    shipping_fee: int
    shipping_address_id: str
    payments: tuple[Payment, ...]
    shipments: tuple[Shipment, ...]
    refunds: tuple[PastRefund, ...] = ()
    returns: tuple[PastReturn, ...] = ()
    replacements: tuple[PastReplacement, ...] = ()

    @property
    def goods(self) -> int:
        return sum(line.subtotal for line in self.lines)

    @property
    def total(self) -> int:
        return self.goods - self.discount + self.shipping_fee

    def line(self, line_no: int) -> Line | None:
        return next((ln for ln in self.lines if ln.line_no == line_no), None)

    def shipment(self, shipment_id: str) -> Shipment | None:
        return next((s for s in self.shipments if s.shipment_id == shipment_id), None)

    def payment(self, payment_id: str) -> Payment | None:
        return next((p for p in self.payments if p.payment_id == payment_id), None)


class StoreDB(_Frozen):
    today: str
    account: Account
    orders: tuple[Order, ...]
    catalog: tuple[Variant, ...]  # every variant of every product ordered (exchanges, stock)
    credits: tuple[PastCredit, ...] = ()

    def order(self, order_id: str) -> Order | None:
        wanted = canonical_order_id(order_id)
        return next((o for o in self.orders if o.order_id == wanted), None)

    def variant(self, sku: str) -> Variant | None:
        wanted = sku.strip().upper()
        return next((v for v in self.catalog if v.sku == wanted), None)


class Request(_Frozen):
    """One thing the customer wants. ``lines`` name the order lines (and quantities) it concerns."""

    kind: RequestKind
    order_id: str
    lines: tuple[tuple[int, int], ...] = ()
    wants: Remedy
    wants_stated: bool = True  # said in the message; otherwise told only when asked (topic "preference")
    exchange_sku: str | None = None  # the variant wanted (kind "exchange")
    new_address: Address | None = None  # kind "address"
    mind_change: Remedy | None = None  # at the first request for confirmation, wants this instead
    claims_days_late: int | None = None  # kind "late": the customer's own account (records decide, P12)
    to_other_card: bool = False  # asks for the refund on a card not used for the order (P21 forbids)


class StoreHidden(_Frozen):
    """What the writer knows and has not written; told only when asked (or never, when not asked)."""

    photos_show: Literal["damage", "normal_wear"] | None = None  # damage/defect claims without photos attached
    condition: Condition | None = None  # a return's condition, when the message leaves it open
    parcel_found: bool | None = None  # a parcel the carrier calls delivered: after checking around
    wrong_postcode_first: bool = False  # gives an old postcode first, the one on file when asked again
    order_hint: bool = False  # the message does not say which order; told when asked (topic "order")


class Writer(_Frozen):
    """Who writes: the account holder, or someone writing for them (P29)."""

    name: str
    holder: bool
    relation: str | None = None  # "daughter", "husband", … when not the holder
    gave_identity: bool = False  # email and postcode written in the first message
    insists: bool = False  # pushes back once after a refusal
    injection: bool = False  # the message carries text addressed to the agent (P30)


class StoreTicket(_Frozen):
    ticket_id: str
    position: int
    split: Split
    difficulty: StoreDifficulty
    db: StoreDB
    writer: Writer
    requests: tuple[Request, ...]
    hidden: StoreHidden
    photos_attached: bool  # the message came with photos (visible)
    stated_condition: Condition | None = None  # the item's condition, when the message says it
    subject: str
    message: str
    recipe: str  # the generator's plan, for tests and reports (never shown)
