"""The support world: catalog items, customers, orders, claims and the tickets built from them.

Every value here is immutable and JSON-serialisable. A :class:`Ticket` carries everything the
policy engine needs (including facts the agent only learns by asking) and the rendered customer
message; what an agent may *see* of it is decided in :mod:`service.env.observe`.
"""

from __future__ import annotations

from typing import Literal

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
Difficulty = Literal["easy", "medium", "hard"]
Family = Literal["decision", "workflow"]
Split = Literal["train", "dev", "test"]

SPLITS: tuple[Split, ...] = ("train", "dev", "test")
DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "medium", "hard")
FAMILIES: tuple[Family, ...] = ("decision", "workflow")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Product(_Frozen):
    sku: str
    name: str
    category: Category
    price: float
    in_stock: bool
    final_sale: bool
    hygiene: bool
    perishable: bool
    warranty_days: int


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
        """P7's definition: 5+ returns in 12 months, any chargeback, or a fraud flag."""
        return self.returns_12m >= 5 or self.chargebacks > 0 or self.fraud_flag


class Order(_Frozen):
    order_id: str
    product: Product
    quantity: int
    amount: float
    order_date: str  # ISO date
    delivery_date: str | None  # ISO date; None when the parcel never arrived
    days_since_delivery: int | None
    carrier_status: CarrierStatus
    days_past_estimate: int  # > 0 only while in transit / lost
    payment_method: Literal["card", "paypal", "gift_card"]
    charged_twice: bool


class HiddenFacts(_Frozen):
    """Facts the customer knows but has not written down; revealed only when asked."""

    photos_show: Literal["damage", "normal_wear"] | None = None  # what photos would show
    item_used: bool | None = None  # the true usage state when the message leaves it open
    parcel_found: bool | None = None  # after checking with neighbours / the porch
    actual_issue: IssueType | None = None  # what a vague message was really about


class Claim(_Frozen):
    issue: IssueType  # what the message is about (``vague`` when it cannot be told)
    images_provided: bool
    item_used: bool | None  # None: the message does not say
    tone: Tone
    secondary_issue: IssueType | None = None  # multi-issue messages mention a second complaint


class Ticket(_Frozen):
    ticket_id: str  # opaque (see service.env.generator.ticket_id_for)
    position: int  # its place in the pool: what ``seed`` selects
    split: Split
    family: Family
    difficulty: Difficulty
    scenario: str  # the generator recipe that produced it (internal)
    opened_on: str  # ISO date the ticket was opened
    customer: Customer
    order: Order
    claim: Claim
    hidden: HiddenFacts
    subject: str
    message: str
