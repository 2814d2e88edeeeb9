"""The support world: catalog items, customers, orders, claims and the tickets built from them.

Every value here is immutable and JSON-serialisable. A :class:`Ticket` carries everything the
policy engine needs (including facts the agent only learns by asking) and the rendered customer
message; what an agent may *see* of it is decided in :mod:`service.env.core` (``observe``,
``ticket_text``, ``lookup_record``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict

Category = Literal["apparel", "footwear", "electronics", "home", "beauty", "grocery", "toys", "sports"]
Tier = Literal["standard", "silver", "gold"]
CarrierStatus = Literal["delivered", "in_transit", "lost", "returned"]
IssueType = Literal[
    "damaged",
    "defective",
    "wrong_item",
    "not_received",
    "size_issue",
    "changed_mind",
    "item_used",
    "duplicate_charge",
    "vague",
]
Tone = Literal["calm", "angry", "vague", "multi_issue", "typos"]
Remark = Literal["slow_delivery", "second_contact", "service"]
Presentation = Literal["days", "dates"]
Difficulty = Literal["easy", "medium", "hard"]
Family = Literal["decision", "workflow", "store"]
Split = Literal["train", "dev", "test"]

# Each value list is its Literal's arguments: one definition per list.
SPLITS: tuple[Split, ...] = get_args(Split)
DEFAULT_SPLIT: Split = "train"  # a reset's split when it names none (the core, the service, the in-memory server)
DIFFICULTIES: tuple[Difficulty, ...] = get_args(Difficulty)
FAMILIES: tuple[Family, ...] = get_args(Family)
TICKET_FAMILIES: tuple[Family, ...] = ("decision", "workflow")  # the families of this module's Ticket
InfoTopic = Literal["photos", "usage", "delivery", "details"]
# What the customer can be asked about (and answers): ``evaluate`` says which one a ticket needs.
INFO_TOPICS: tuple[InfoTopic, ...] = get_args(InfoTopic)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class CatalogItem:
    name: str
    category: str
    price: tuple[float, float]
    warranty_days: int
    hygiene: bool = False
    perishable: bool = False


CATALOG: tuple[CatalogItem, ...] = (
    CatalogItem("Merino Crew Sweater", "apparel", (45, 120), 90),
    CatalogItem("Linen Button-Down Shirt", "apparel", (30, 80), 90),
    CatalogItem("Waterproof Rain Jacket", "apparel", (70, 420), 180),
    CatalogItem("Slim Fit Chinos", "apparel", (35, 90), 90),
    CatalogItem("Seamless Underwear 3-Pack", "apparel", (18, 40), 0, hygiene=True),
    CatalogItem("Trail Running Shoes", "footwear", (80, 180), 180),
    CatalogItem("Leather Chelsea Boots", "footwear", (110, 460), 365),
    CatalogItem("Canvas Sneakers", "footwear", (40, 90), 90),
    CatalogItem("Wireless Earbuds", "electronics", (50, 350), 365, hygiene=True),
    CatalogItem("Bluetooth Speaker", "electronics", (40, 180), 365),
    CatalogItem("27-inch 4K Monitor", "electronics", (180, 650), 730),
    CatalogItem("Robot Vacuum", "electronics", (150, 900), 730),
    CatalogItem("Smartwatch", "electronics", (150, 450), 365),
    CatalogItem("Noise-Cancelling Headphones", "electronics", (120, 420), 365),
    CatalogItem("Ceramic Table Lamp", "home", (35, 110), 180),
    CatalogItem("Cast Iron Skillet", "home", (30, 80), 3650),
    CatalogItem("Espresso Machine", "home", (180, 700), 730),
    CatalogItem("Down Duvet", "home", (90, 420), 365),
    CatalogItem("Vitamin C Serum", "beauty", (20, 60), 0, hygiene=True),
    CatalogItem("Ionic Hair Dryer", "beauty", (45, 320), 365),
    CatalogItem("Lipstick Collection", "beauty", (25, 70), 0, hygiene=True),
    CatalogItem("Single-Origin Coffee Beans", "grocery", (15, 45), 0, perishable=True),
    CatalogItem("Gourmet Chocolate Box", "grocery", (20, 60), 0, perishable=True),
    CatalogItem("Building Blocks Castle Set", "toys", (40, 360), 180),
    CatalogItem("Remote Control Car", "toys", (35, 140), 180),
    CatalogItem("Cork Yoga Mat", "sports", (30, 95), 180),
    CatalogItem("Carbon Tennis Racket", "sports", (90, 360), 365),
    CatalogItem("Adjustable Dumbbells", "sports", (150, 420), 730),
)
HYGIENE_ITEMS: tuple[str, ...] = tuple(c.name for c in CATALOG if c.hygiene)


class Product(_Frozen):
    sku: str
    name: str
    category: Category
    price: float  # unit price
    in_stock: bool
    final_sale: bool
    hygiene: bool
    perishable: bool
    warranty_days: int


HIGH_RISK_RETURNS = 5


def high_risk(returns_12m: int, chargebacks: int, fraud_flag: bool) -> bool:
    """P7's definition, for the ticket tasks' customers, the store desk's accounts and the agents reading
    either: :data:`HIGH_RISK_RETURNS` or more returns in 12 months, any chargeback, or a fraud flag."""
    return returns_12m >= HIGH_RISK_RETURNS or chargebacks > 0 or fraud_flag


class Customer(_Frozen):
    customer_id: str
    name: str
    tier: Tier
    account_age_days: int
    orders_12m: int
    returns_12m: int
    chargebacks: int
    fraud_flag: bool

    @property
    def high_risk(self) -> bool:
        return high_risk(self.returns_12m, self.chargebacks, self.fraud_flag)


class OrderLine(_Frozen):
    product: Product
    quantity: int

    @property
    def amount(self) -> float:
        return round(self.product.price * self.quantity, 2)


class Order(_Frozen):
    order_id: str
    lines: tuple[OrderLine, ...]
    amount: float  # the order total
    order_date: str  # ISO date
    delivery_date: str | None  # ISO date; None when the parcel never arrived
    days_since_delivery: int | None  # from the delivery date to the day the ticket was opened
    carrier_status: CarrierStatus
    days_past_estimate: int  # > 0 only while in transit / lost
    payment_method: Literal["card", "paypal", "gift_card"]
    charges: int  # how many times the payment record shows the order charged (2 = a duplicate)


class HiddenFacts(_Frozen):
    """Facts the customer knows but has not written down; revealed only when asked (or volunteered)."""

    photos_show: Literal["damage", "normal_wear"] | None = None  # what photos would show
    item_used: bool | None = None  # the true usage state when the message leaves it open
    parcel_found: bool | None = None  # after checking with neighbours / the porch
    actual_issue: IssueType | None = None  # what a vague message was really about


class Claim(_Frozen):
    issue: IssueType  # what the message is about (``vague`` when it cannot be told)
    line: int = 0  # the order line the claim is about
    images_provided: bool
    item_used: bool | None  # None: the message does not say
    tone: Tone
    second_issue: IssueType | None = None  # a second claim about the same item (P13 decides which counts)
    remark: Remark | None = None  # a side remark that never changes the policy path
    stated_days_ago: int | None = None  # the customer's own recollection of the delivery (records decide: P12)


class Ticket(_Frozen):
    ticket_id: str  # opaque (see service.env.generator.ticket_id_for)
    position: int  # its place in the pool: what ``seed`` selects
    split: Split
    family: Family
    difficulty: Difficulty
    presentation: Presentation  # "days": the header says how long ago delivery was; "dates": only dates
    opened_on: str  # ISO date the ticket was opened
    customer: Customer
    order: Order
    claim: Claim
    hidden: HiddenFacts
    subject: str
    message: str

    @property
    def line(self) -> OrderLine:
        """The order line the claim is about."""
        return self.order.lines[self.claim.line]

    @property
    def product(self) -> Product:
        return self.line.product


_K = TypeVar("_K")
_T = TypeVar("_T")


class per_ticket(Generic[_K, _T]):  # a decorator, named like functools' caches
    """Memoize a pure function of a ticket (a ticket task's or the store desk's) by the ticket object itself:
    tickets are cached and frozen, so each step of an episode passes the same one, and hashing a whole ticket
    would cost more than the call. The cache keeps the ticket alive, so an id is never reused while its entry
    stands; it holds at most :attr:`MAX_TICKETS` tickets."""

    MAX_TICKETS = 4096

    def __init__(self, fn: Callable[[_K], _T]) -> None:
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__
        self._memo: dict[int, tuple[_K, _T]] = {}

    def __call__(self, ticket: _K) -> _T:
        hit = self._memo.get(id(ticket))
        if hit is not None and hit[0] is ticket:
            return hit[1]
        value = self.__wrapped__(ticket)
        if len(self._memo) >= self.MAX_TICKETS:
            self._memo.clear()
        self._memo[id(ticket)] = (ticket, value)
        return value

    def cache_clear(self) -> None:
        self._memo.clear()
