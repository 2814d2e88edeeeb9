"""The store desk's seeded generator: an account with its orders, a writer with requests, and a message.

A store pool (one per difficulty of each split) **deals its plans** round-robin through a keyed
permutation: a plan is a request kind and the outcome class the facts must lead to (granted, or
declined for a given reason), so that no outcome — and no constant plan — is a safe default. The facts
are then drawn at random for that plan (dates, stock, flags, prices, promo codes, payments, tracking,
earlier refunds, the customer's tier and risk record), and the policy engine decides the gold
(:func:`service.env.store.policy.decide`); a draw whose decided outcome is not the plan's is redrawn.
The generator never writes a label.

Every random draw is keyed by the split's key (as for the other families), ticket ids are an HMAC of
the key and the ticket's place, and the test split's key is the deployment's secret.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from typing import Any

from service.env.generator import _FIRST, _LAST
from service.env.policy import LATE_IN_TRANSIT_DAYS, RETURN_WINDOW_DAYS
from service.env.store import messages
from service.env.store.clauses import LATE_DELIVERY_DAYS
from service.env.store.policy import decide
from service.env.store.world import (
    DELIVERED_WHERE,
    Account,
    Address,
    Condition,
    Line,
    Order,
    PastCredit,
    PastRefund,
    PastReplacement,
    PastReturn,
    Payment,
    Remedy,
    Request,
    RequestKind,
    Shipment,
    StoreDB,
    StoreDifficulty,
    StoreHidden,
    StoreTicket,
    TrackingEvent,
    Variant,
    Writer,
)
from service.env.world import CATALOG, DIFFICULTIES, CatalogItem, Split

STORE_GENERATOR_VERSION = "1.2.0"
STORE_SPLIT_SIZES: dict[Split, int] = {"train": 300, "dev": 150, "test": 150}
W = RETURN_WINDOW_DAYS
_EPOCH = date(2026, 3, 2)


def store_pool_size(split: Split, difficulty: StoreDifficulty) -> int:
    total = STORE_SPLIT_SIZES[split]
    rank = DIFFICULTIES.index(difficulty)
    return total // 3 + (1 if rank < total % 3 else 0)


STORE_TICKET_PREFIX = "st_"


def store_ticket_id(key: bytes, difficulty: str, position: int) -> str:
    mac = hmac.new(key, f"store-ticket-id\x1f{difficulty}\x1f{position}".encode(), hashlib.sha256)
    return STORE_TICKET_PREFIX + mac.hexdigest()[:16]


def _keyed_seed(key: bytes, *parts: object) -> int:
    digest = hmac.new(key, "\x1f".join(map(str, parts)).encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


# ----------------------------------------------------------------------------------- the catalog

_SIZES = {
    "apparel": ("XS", "S", "M", "L", "XL"),
    "footwear": ("6", "7", "8", "9", "10", "11", "12"),
}
_COLOURS = {
    "apparel": ("navy", "black", "oatmeal", "forest green", "grey marl", "burgundy"),
    "footwear": ("black", "white", "navy", "tan", "grey"),
    "electronics": ("black", "white", "silver", "midnight blue"),
    "home": ("white", "charcoal", "sage", "sand"),
    "beauty": ("",),
    "grocery": ("",),
    "toys": ("",),
    "sports": ("black", "blue", "red"),
}


@dataclass(frozen=True)
class Product:
    product_id: str
    item: CatalogItem
    base_price: int  # cents
    variants: tuple[Variant, ...]


def _product(rng: random.Random, item: CatalogItem, index: int) -> Product:
    lo, hi = item.price
    base = rng.randrange(int(lo), int(hi) + 1) * 100 + rng.choice((0, 0, 50, 95, 99))
    pid = f"PRD-{rng.randrange(1000, 9999)}{index % 10}"
    colours = [c for c in rng.sample(_COLOURS[item.category], k=min(3, len(_COLOURS[item.category])))]
    sizes = _SIZES.get(item.category, ("",))
    variants = []
    for ci, colour in enumerate(colours):
        uplift = 0 if ci == 0 else rng.choice((0, 0, 500, 1000, -500))  # colours may cost more or less
        for size in sizes:
            options = " · ".join(p for p in (f"size {size}" if size else "", colour) if p)
            sku = f"{pid.replace('PRD-', 'SKU-')}-{ci}{sizes.index(size) if size else 0}"
            variants.append(
                Variant(
                    sku=sku,
                    product_id=pid,
                    name=item.name,
                    category=item.category,
                    options=options,
                    price=max(500, base + uplift),
                    stock=rng.choice((0, 3, 8, 14, 25)),
                    hygiene=item.hygiene,
                    perishable=item.perishable,
                    warranty_days=item.warranty_days,
                )
            )
    return Product(pid, item, base, tuple(variants))


# ------------------------------------------------------------------------------------ the plans


@dataclass(frozen=True)
class Plan:
    """One request to build: its kind and the outcome class its facts must lead to."""

    kind: RequestKind
    outcome: str  # "grant" or the reason it is declined ("window", "used", …), "risk", "escalate"
    variant: str = ""  # how a grant is reached ("replacement", "refund", "restocking", "exchange", …)


def _plans(kind: RequestKind, *outcomes: str) -> list[Plan]:
    out = []
    for o in outcomes:
        outcome, _, variant = o.partition(":")
        out.append(Plan(kind, outcome, variant))
    return out


# Each tier's deck of first requests: dealt round-robin through a keyed permutation. About a third of each
# deck declines (a desk where refusing is usually right measures nothing), and every kind of request has
# several outcomes, so no constant plan — and no refusal — is a safe default.
DECKS: dict[str, tuple[Plan, ...]] = {
    "easy": tuple(
        _plans("damaged", "grant:replacement", "grant:refund", "window")
        + _plans("wrong_item", "grant:replacement", "grant:refund")
        + _plans("missing", "grant:lost", "in_transit")
        + _plans("change_of_mind", "grant:plain", "grant:plain", "final_sale")
        + _plans("exchange", "grant:exchange")
        + _plans("cancel", "grant", "shipped")
        + _plans("address", "grant")
        + _plans("late", "grant", "not_late")
        + _plans("duplicate_charge", "grant", "not_charged_twice")
        + _plans("defective", "grant:replacement", "warranty")
    ),
    "medium": tuple(
        _plans("damaged", "grant:ask_photos", "grant:either", "grant:replacement", "normal_wear", "risk")
        + _plans("defective", "grant:warranty", "grant:oos")
        + _plans("wrong_item", "grant:refund", "grant:either", "already_settled")
        + _plans("missing", "grant:not_found", "grant:late_transit", "parcel_found")
        + _plans("change_of_mind", "grant:restocking", "grant:ask_condition", "escalate", "used", "not_holder")
        + _plans("exchange", "grant:exchange", "grant:oos", "grant:price_diff")
        + _plans("cancel", "grant:partial", "shipped")
        + _plans("late", "grant", "already_credited")
        + _plans("duplicate_charge", "grant")
        + _plans("address", "grant")
    ),
    "hard": tuple(
        _plans("damaged", "grant:ask_photos", "grant:either", "normal_wear", "risk", "escalate")
        + _plans("defective", "grant:warranty", "grant:either", "warranty")
        + _plans("wrong_item", "grant:refund", "grant:either", "already_settled")
        + _plans("missing", "grant:not_found", "grant:late_transit", "parcel_found")
        + _plans("change_of_mind", "grant:restocking", "grant:ask_condition", "escalate", "used", "already_settled")
        + _plans("exchange", "grant:exchange", "grant:price_diff", "grant:oos", "final_sale")
        + _plans("cancel", "grant:partial", "shipped")
        + _plans("late", "grant", "not_late")
        + _plans("duplicate_charge", "grant", "not_charged_twice")
        + _plans("address", "grant", "shipped")
    ),
}
# Second and third requests of medium and hard tickets: any kind not taken yet, granted three times in four
# (every outcome of every kind can come up, the account-wide ones — P7, P29 — aside).
_EXTRA = ("late", "cancel", "change_of_mind", "damaged", "missing", "exchange", "address", "duplicate_charge")
_EXTRA_OUTCOMES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # kind → (grants, refusals)
    "late": (("grant",), ("not_late", "already_credited")),
    "cancel": (("grant:partial", "grant"), ("shipped",)),
    "change_of_mind": (("grant:restocking", "grant:ask_condition", "grant:plain"), ("used", "window", "final_sale")),
    "damaged": (("grant:ask_photos", "grant:either", "grant:refund"), ("normal_wear", "window")),
    "missing": (("grant:not_found", "grant:late_transit", "grant:lost"), ("parcel_found", "in_transit")),
    "exchange": (("grant:exchange", "grant:price_diff", "grant:oos"), ("window", "final_sale")),
    "address": (("grant",), ("shipped",)),
    "duplicate_charge": (("grant",), ("not_charged_twice",)),
}


@lru_cache(maxsize=64)
def _deal(key: bytes, split: str, difficulty: str, size: int) -> tuple[int, ...]:
    """Position → index into the tier's deck: round-robin over the deck, shuffled by the key."""
    deck = DECKS[difficulty]
    order = [k % len(deck) for k in range(size)]
    random.Random(_keyed_seed(key, "store-deal", split, difficulty)).shuffle(order)
    return tuple(order)


# ------------------------------------------------------------------------------------ the world


@dataclass
class _Builder:
    """Builds one ticket's database: ids, dates and records drawn from one keyed RNG."""

    rng: random.Random
    difficulty: str
    today: date
    orders: list[Order] = field(default_factory=list)
    catalog: dict[str, Variant] = field(default_factory=dict)
    products: dict[str, Product] = field(default_factory=dict)
    used_ids: set[str] = field(default_factory=set)
    credits: list[PastCredit] = field(default_factory=list)
    placed_days: set[str] = field(default_factory=set)

    def uid(self, prefix: str, digits: int = 5, alphabet: str = "0123456789") -> str:
        while True:
            value = prefix + "".join(self.rng.choice(alphabet) for _ in range(digits))
            if value not in self.used_ids:
                self.used_ids.add(value)
                return value

    def placed(self, days_ago: int) -> int:
        """A day orders were placed on that no other order of the account was (writers name orders by date)."""

        def day_of_year(ago: int) -> str:
            return (self.today - timedelta(days=ago)).isoformat()[5:]  # writers give no year: "my order of 3 May"

        while day_of_year(days_ago) in self.placed_days:
            days_ago += 1
        self.placed_days.add(day_of_year(days_ago))
        return days_ago

    def day(self, days_ago: int) -> str:
        return (self.today - timedelta(days=days_ago)).isoformat()

    def product(
        self,
        *,
        category: str | None = None,
        hygiene: bool | None = None,
        electronics: bool = False,
        min_price: int = 0,
        max_price: int = 10**9,
    ) -> Product:
        fits = [
            c
            for c in CATALOG
            if (category is None or c.category == category)
            and (hygiene is None or (c.hygiene or c.perishable) == hygiene)
            and (not electronics or c.category == "electronics")
            and c.price[1] * 100 >= min_price
            and c.price[0] * 100 <= max_price
        ]
        taken = {p.item.name for p in self.products.values()}  # one product per name: the writer can name it
        item = self.rng.choice([c for c in fits if c.name not in taken] or fits)
        for _ in range(20):
            p = _product(self.rng, item, len(self.products))
            if min_price <= p.base_price <= max_price and p.product_id not in self.products:
                break
        self.products[p.product_id] = p
        for v in p.variants:
            self.catalog[v.sku] = v
        return p


def _account(b: _Builder, tier: str, high_risk: bool) -> Account:
    rng = b.rng
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    plain = last.lower().replace("ü", "u").replace("ö", "o")
    email = rng.choice(
        (
            f"{first.lower()}.{plain}@",
            f"{first.lower()}{plain[0]}{rng.randrange(10, 99)}@",
            f"{first[0].lower()}{plain}@",
        )
    ) + rng.choice(("mailbox.example", "inbox.example", "post.example", "webmail.example"))
    addresses = [_address(b, "home")]
    if rng.random() < 0.5:
        addresses.append(_address(b, rng.choice(("work", "parents", "previous home"))))
    returns, chargebacks, fraud = rng.choice(((0, 0, False), (1, 0, False), (2, 0, False), (3, 0, False)))
    if high_risk:
        returns, chargebacks, fraud = rng.choice(((6, 0, False), (2, 1, False), (1, 0, True), (7, 0, False)))
    return Account(
        customer_id=b.uid("CUS-", 6, "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"),
        name=f"{first} {last}",
        email=email,
        phone=f"07{rng.randrange(100, 999)} {rng.randrange(100000, 999999)}",
        tier=tier,
        member_since=b.day(rng.randrange(200, 2400)),
        addresses=tuple(addresses),
        store_credit=rng.choice((0, 0, 0, 500, 1250)),
        returns_12m=returns,
        chargebacks=chargebacks,
        fraud_flag=fraud,
    )


_STREETS = (
    "Harbour Road",
    "Mill Lane",
    "Station Street",
    "Queens Avenue",
    "Orchard Close",
    "Victoria Terrace",
    "Church Walk",
    "Kingsway",
    "Elm Grove",
    "Canal Side",
    "Market Place",
    "Hill Crescent",
)
_CITIES = (
    ("Leeds", "LS"),
    ("Bristol", "BS"),
    ("Manchester", "M"),
    ("Glasgow", "G"),
    ("Cardiff", "CF"),
    ("Norwich", "NR"),
    ("York", "YO"),
    ("Brighton", "BN"),
    ("Sheffield", "S"),
    ("Exeter", "EX"),
)


def _address(b: _Builder, label: str) -> Address:
    rng = b.rng
    city, prefix = rng.choice(_CITIES)
    postal = (
        f"{prefix}{rng.randrange(1, 28)} {rng.randrange(1, 9)}{rng.choice('ABDEFGHJLNPQRSTUWXYZ')}"
        f"{rng.choice('ABDEFGHJLNPQRSTUWXYZ')}"
    )
    return Address(
        address_id=b.uid("ADR-", 4),
        label=label,
        line1=f"{rng.randrange(1, 180)} {rng.choice(_STREETS)}",
        city=city,
        postal_code=postal,
    )


_CARRIERS = ("Parcelforce", "DPD", "Evri", "Royal Mail", "UPS")
_PROMOS = (
    ("SPRING15", "percent", 15),
    ("WELCOME10", "fixed", 1000),
    ("SAVE20", "percent", 20),
    ("TAKE5", "fixed", 500),
    ("FRIENDS10", "percent", 10),
    ("BUNDLE15", "fixed", 1500),
)


@dataclass
class LineSpec:
    """One line to put on an order: which variant, how many, and where it is in its journey."""

    variant: Variant
    quantity: int = 1
    final_sale: bool = False


@dataclass
class OrderSpec:
    """What an order must look like for a plan."""

    lines: list[LineSpec]
    placed_days_ago: int
    journey: str = "delivered"  # "delivered" | "processing" | "in_transit" | "lost" | "returned" | "mixed"
    delivered_days_ago: int | None = None  # for delivered journeys
    late_days: int = 0  # delivered this many days after the estimate
    transit_late_days: int = 0  # in transit: days past the estimate today
    promo: bool = False
    gift_card: bool = False
    store_credit: bool = False  # part of the order paid with the account's store credit
    paypal: bool = False
    duplicate: bool = False
    shipping_fee: int | None = None
    earlier_refund: bool = False


def _order(b: _Builder, account: Account, spec: OrderSpec) -> Order:
    rng = b.rng
    order_id = b.uid("ORD-", 5)
    # a parcel ships after its order is placed, over days that run in order: an order with one is placed
    # at least a few days ago, and before the day it was delivered
    earliest = 0 if spec.journey == "processing" else 4
    if spec.delivered_days_ago is not None:
        earliest = max(earliest, spec.delivered_days_ago + 2)
    placed = b.placed(max(spec.placed_days_ago, earliest))
    lines: list[Line] = []
    shipments: list[Shipment] = []
    delivered_groups = _journey_groups(spec)
    for index, ls in enumerate(spec.lines, start=1):
        lines.append(
            Line(
                line_no=index,
                sku=ls.variant.sku,
                product_id=ls.variant.product_id,
                name=ls.variant.name,
                category=ls.variant.category,
                options=ls.variant.options,
                unit_price=ls.variant.price,
                quantity=ls.quantity,
                status="processing",
                shipment_id=None,
                final_sale=ls.final_sale,
                hygiene=ls.variant.hygiene,
                perishable=ls.variant.perishable,
                warranty_days=ls.variant.warranty_days,
            )
        )
    for group in delivered_groups:
        shipment = _shipment(b, spec, tuple(group), placed)
        shipments.append(shipment)
        status = "delivered" if shipment.delivered_on else "shipped"
        for n in group:
            lines[n - 1] = lines[n - 1].model_copy(update={"status": status, "shipment_id": shipment.shipment_id})
    goods = sum(ln.subtotal for ln in lines)
    code, discount = None, 0
    if spec.promo:
        code, kind, value = rng.choice(_PROMOS)
        discount = round(goods * value / 100) if kind == "percent" else min(value, goods // 4)
    fee = spec.shipping_fee if spec.shipping_fee is not None else rng.choice((0, 395, 495, 695, 995))
    total = goods - discount + fee
    payments = _payments(b, account, spec, total, b.day(placed))
    refunds: tuple[PastRefund, ...] = ()
    order = Order(
        order_id=order_id,
        placed_on=b.day(placed),
        lines=tuple(lines),
        promo_code=code,
        discount=discount,
        shipping_fee=fee,
        shipping_address_id=account.addresses[0].address_id,
        payments=payments,
        shipments=tuple(shipments),
        refunds=refunds,
    )
    return order


def _journey_groups(spec: OrderSpec) -> list[list[int]]:
    """The line numbers of each shipment; lines in none are still processing."""
    n = len(spec.lines)
    every = list(range(1, n + 1))
    if spec.journey == "processing":
        return []
    if spec.journey == "mixed":
        return [every[: max(1, n // 2)]]
    return [every]


def _shipment(b: _Builder, spec: OrderSpec, line_nos: tuple[int, ...], placed: int) -> Shipment:
    """A shipment whose events run in order: labelled, collected, in transit, (delayed,) delivered — or lost or
    returned — with its estimate after it shipped. Every day is counted back from the ticket's day."""
    rng = b.rng
    journey = spec.journey if spec.journey != "mixed" else "delivered"
    day = b.day
    if journey == "delivered":
        delivered = (
            spec.delivered_days_ago if spec.delivered_days_ago is not None else max(placed - rng.randrange(3, 7), 0)
        )
        shipped = max(delivered + 1, placed - 1)
        picked = max(delivered + 1, shipped - 1)
        estimated = min(delivered + spec.late_days, shipped - 1)
        events = [
            TrackingEvent(date=day(shipped), status="label_created", detail="Label created"),
            TrackingEvent(date=day(picked), status="picked_up", detail="Collected by carrier"),
        ]
        if picked - 1 > delivered:
            events.append(TrackingEvent(date=day(picked - 1), status="in_transit", detail="In transit"))
        if delivered < estimated < picked - 1:  # the day it was due, held up
            events.append(TrackingEvent(date=day(estimated), status="exception", detail="Delayed at sorting centre"))
        detail = rng.choice(tuple(DELIVERED_WHERE))
        events.append(TrackingEvent(date=day(delivered), status="delivered", detail=detail))
    else:
        shipped = max(placed - 1, 1)
        picked = max(shipped - 1, 0)
        estimated = min(spec.transit_late_days, shipped - 1)  # days past the estimate today (negative: not due)
        events = [
            TrackingEvent(date=day(shipped), status="label_created", detail="Label created"),
            TrackingEvent(date=day(picked), status="picked_up", detail="Collected by carrier"),
            TrackingEvent(date=day(max(picked - 1, 0)), status="in_transit", detail="In transit"),
        ]
        if journey == "lost":
            events.append(
                TrackingEvent(date=day(max(picked - 2, 0)), status="lost", detail="Parcel could not be located")
            )
        elif journey == "returned":
            events.append(
                TrackingEvent(
                    date=day(max(picked - 2, 0)),
                    status="returned",
                    detail="Returned to sender: address could not be found",
                )
            )
    return Shipment(
        shipment_id=b.uid("SHP-", 6),
        carrier=rng.choice(_CARRIERS),
        tracking_no=b.uid("TRK", 10, "0123456789ABCDEFGHJKLMNPRSTUVWXYZ"),
        line_nos=line_nos,
        shipped_on=day(shipped),
        estimated_delivery=day(estimated),
        events=tuple(events),
    )


def _payments(b: _Builder, account: Account, spec: OrderSpec, total: int, day: str) -> tuple[Payment, ...]:
    rng = b.rng
    payments: list[Payment] = []
    left = total
    if (spec.gift_card or spec.store_credit) and total > 2000:
        part = rng.choice((1000, 1500, 2000, 2500, 5000) if spec.gift_card else (500, 1250, 2000, 3000))
        part = min(part, total - 500)
        payments.append(
            Payment(
                payment_id=b.uid("pay_", 6, "abcdefghjkmnpqrstuvwxyz23456789"),
                method="gift_card" if spec.gift_card else "store_credit",
                label=f"Gift card ending {rng.randrange(1000, 9999)}" if spec.gift_card else "Store credit",
                amount=part,
                captured_on=day,
            )
        )
        left -= part
    if spec.paypal:
        main = Payment(
            payment_id=b.uid("pay_", 6, "abcdefghjkmnpqrstuvwxyz23456789"),
            method="paypal",
            label=f"PayPal ({account.email})",
            amount=left,
            captured_on=day,
        )
    else:
        brand = rng.choice(("Visa", "Mastercard", "Amex"))
        main = Payment(
            payment_id=b.uid("pay_", 6, "abcdefghjkmnpqrstuvwxyz23456789"),
            method="card",
            label=f"{brand} ending {rng.randrange(1000, 9999)}",
            amount=left,
            captured_on=day,
        )
    payments.insert(0, main)
    if spec.duplicate:
        payments.append(main.model_copy(update={"payment_id": b.uid("pay_", 6, "abcdefghjkmnpqrstuvwxyz23456789")}))
    return tuple(payments)


# ---------------------------------------------------------------------------------- the requests

_TIER = {
    # (orders in the account lo, hi; lines per order lo, hi; P(promo), P(gift card or store credit), P(PayPal),
    # P(quantity > 1))
    "easy": (1, 2, 1, 2, 0.0, 0.0, 0.2, 0.0),
    "medium": (2, 3, 1, 3, 0.5, 0.3, 0.25, 0.3),
    "hard": (3, 5, 2, 5, 0.7, 0.5, 0.25, 0.45),
}
# P(a request's order has an earlier return, refund or replacement of another of its lines)
_HISTORY = {"easy": 0.0, "medium": 0.25, "hard": 0.4}


@dataclass
class _Ticket:
    """What the request builders decide besides the orders: the ticket's shared facts."""

    photos_attached: bool = False
    photos_show: str | None = None
    condition: Condition | None = None  # hidden
    stated_condition: Condition | None = None
    parcel_found: bool | None = None
    order_hint: bool = False
    needs: set[str] = field(default_factory=set)  # singleton hidden facts already taken
    high_risk: bool = False


def _lines(b: _Builder, target: LineSpec, tier: str, *, at: int | None = None) -> tuple[list[LineSpec], int]:
    """An order's lines with ``target`` among them; returns them and the target's line number."""
    _, _, lo, hi, *_ = _TIER[tier]
    n = b.rng.randrange(lo, hi + 1)
    others = [LineSpec(b.rng.choice(b.product(max_price=15000).variants), 1) for _ in range(n - 1)]
    index = at if at is not None else b.rng.randrange(n)
    index = min(index, n - 1)
    others.insert(index, target)
    return others, index + 1


def _money_facts(b: _Builder, tier: str) -> dict[str, Any]:
    *_, promo, other, paypal, _multi = _TIER[tier]
    rng = b.rng
    part = rng.random() < other
    credit = part and rng.random() < 0.5
    return {
        "promo": rng.random() < promo,
        "gift_card": part and not credit,
        "store_credit": credit,
        "paypal": rng.random() < paypal,
    }


def _quantity(b: _Builder, tier: str) -> tuple[int, int]:
    """(units ordered, units the request concerns)."""
    multi = _TIER[tier][-1]
    if b.rng.random() < multi:
        ordered = b.rng.choice((2, 2, 3))
        return ordered, b.rng.choice((1, ordered))
    return 1, 1


def _in_stock(v: Variant, stocked: bool) -> Variant:
    return v.model_copy(update={"stock": max(v.stock, 4) if stocked else 0})


def _item_request(b: _Builder, account: Account, plan: Plan, tier: str, t: _Ticket) -> tuple[Request, Order]:
    """Damaged, defective and wrong items (P2, P3, P4, P11)."""
    rng = b.rng
    kind, outcome, variant = plan.kind, plan.outcome, plan.variant
    if kind == "defective":
        product = b.product(
            category=rng.choice(("electronics", "home", "toys", "sports")),
            max_price=60000 if outcome == "escalate" else 28000,
        )
    else:
        product = b.product(
            min_price=32000 if outcome == "escalate" else 0, max_price=10**9 if outcome == "escalate" else 26000
        )
    stocked = variant in ("replacement", "either", "ask_photos", "warranty") or (
        variant not in ("oos", "refund") and rng.random() < 0.5
    )
    v = _in_stock(rng.choice(product.variants), stocked)
    b.catalog[v.sku] = v
    ordered, wanted = _quantity(b, tier)
    lines, line_no = _lines(b, LineSpec(v, ordered), tier)
    warranty = v.warranty_days
    if outcome == "window":
        days = rng.randrange(W + 1, W + (6 if tier == "hard" else 60))
    elif outcome == "warranty":
        days = rng.randrange(max(W + 1, warranty + 1), max(W + 2, warranty + 90))
    elif variant == "warranty":
        days = rng.randrange(W + 1, max(W + 2, warranty + 1))
    else:
        days = rng.randrange(2, W + 1) if tier != "hard" else rng.choice((rng.randrange(2, W + 1), W, W - 1))
    spec = OrderSpec(
        lines, placed_days_ago=days + rng.randrange(2, 7), delivered_days_ago=days, **_money_facts(b, tier)
    )
    order = _order(b, account, spec)
    hidden_photos = (
        variant in ("ask_photos",)
        or outcome == "normal_wear"
        or (tier != "easy" and kind != "wrong_item" and rng.random() < 0.5)
    )
    if kind != "wrong_item":
        if hidden_photos and "photos" not in t.needs:
            t.needs.add("photos")
            t.photos_show = "normal_wear" if outcome == "normal_wear" else "damage"
        else:
            t.photos_attached = True
    if variant == "either" or (tier != "easy" and rng.random() < 0.3):
        wants, stated = "either", False
    elif variant == "refund" or (variant not in ("replacement",) and rng.random() < 0.4):
        wants, stated = "refund", True
    else:
        wants, stated = "replacement", True
    mind = None
    if stated and rng.random() < {"easy": 0.0, "medium": 0.2, "hard": 0.7}[tier]:
        mind = "refund" if wants == "replacement" else "replacement"
    if outcome == "risk":
        t.high_risk = True
    if outcome == "already_settled":  # the records show a replacement sent for it already (P18)
        order = _with_history(b, order, line_no, "replacement", units=ordered)
    request = Request(
        kind=kind,
        order_id=order.order_id,
        lines=((line_no, wanted),),
        wants=wants,
        wants_stated=stated,
        mind_change=mind,
    )
    return request, order


def _missing_request(b: _Builder, account: Account, plan: Plan, tier: str, t: _Ticket) -> tuple[Request, Order]:
    rng = b.rng
    outcome, variant = plan.outcome, plan.variant
    product = b.product(max_price=26000)
    v = _in_stock(rng.choice(product.variants), rng.random() < 0.5)
    b.catalog[v.sku] = v
    lines, _ = _lines(b, LineSpec(v, 1), tier)
    placed = rng.randrange(8, 30)
    # an in-transit estimate falls after the parcel shipped: the order was placed a few days before it
    if variant == "lost":
        late = rng.randrange(1, 9)
        spec = OrderSpec(lines, max(placed, late + 4), journey=rng.choice(("lost", "returned")), transit_late_days=late)
    elif variant == "late_transit":
        late = rng.randrange(LATE_IN_TRANSIT_DAYS + 1, LATE_IN_TRANSIT_DAYS + 8)
        spec = OrderSpec(lines, late + rng.randrange(4, 9), journey="in_transit", transit_late_days=late)
    elif outcome == "in_transit":
        late = rng.choice((-3, -1, 0, 2, 5, LATE_IN_TRANSIT_DAYS))
        spec = OrderSpec(lines, max(late, 0) + rng.randrange(3, 7), journey="in_transit", transit_late_days=late)
    else:  # delivered per the carrier: the customer checks around when asked
        spec = OrderSpec(lines, placed, delivered_days_ago=rng.randrange(2, 7))
        t.needs.add("delivery")
        t.parcel_found = outcome == "parcel_found"
    spec = OrderSpec(**{**spec.__dict__, **_money_facts(b, tier)})
    order = _order(b, account, spec)
    all_lines = tuple((ln.line_no, ln.quantity) for ln in order.lines)
    wants, stated = (
        rng.choice((("refund", True), ("replacement", True)))
        if tier == "easy"
        else rng.choice((("refund", True), ("replacement", True), ("either", False)))
    )
    mind = None
    if stated and rng.random() < {"easy": 0.0, "medium": 0.2, "hard": 0.7}[tier]:
        mind = "refund" if wants == "replacement" else "replacement"
    request = Request(
        kind="missing",
        order_id=order.order_id,
        lines=all_lines,
        wants=wants,
        wants_stated=stated,
        mind_change=mind,
    )
    return request, order


def _return_request(b: _Builder, account: Account, plan: Plan, tier: str, t: _Ticket) -> tuple[Request, Order]:
    """Change of mind and exchanges (P1, P6, P20, P24)."""
    rng = b.rng
    kind, outcome, variant = plan.kind, plan.outcome, plan.variant
    if kind == "exchange":
        hygienic = outcome == "final_sale" and rng.random() < 0.5
        product = b.product(category="apparel" if hygienic else rng.choice(("apparel", "footwear")), hygiene=hygienic)
    elif outcome == "final_sale":
        product = b.product(hygiene=True) if rng.random() < 0.6 else b.product(max_price=26000)
    elif variant == "restocking":
        product = b.product(electronics=True, max_price=30000)
    elif outcome == "escalate":
        product = b.product(min_price=33000)
    else:
        product = b.product(max_price=26000)
    v = rng.choice(product.variants)
    ordered, wanted = _quantity(b, tier)
    final_sale = outcome == "final_sale" and not (v.hygiene or v.perishable)
    lines, line_no = _lines(b, LineSpec(v, ordered, final_sale=final_sale), tier)
    days = rng.randrange(W + 1, W + 40) if outcome == "window" else rng.randrange(2, W + 1)
    spec = OrderSpec(
        lines, placed_days_ago=days + rng.randrange(2, 6), delivered_days_ago=days, **_money_facts(b, tier)
    )
    order = _order(b, account, spec)
    condition: Condition = (
        "used" if outcome == "used" else ("opened" if variant == "restocking" else rng.choice(("unopened", "opened")))
    )
    if (variant == "ask_condition" or (tier != "easy" and rng.random() < 0.4)) and "condition" not in t.needs:
        t.needs.add("condition")
        t.condition = condition
    else:
        t.stated_condition = condition
    exchange_sku = None
    if kind == "exchange":
        others = [
            x for x in product.variants if x.sku != v.sku and x.options.split(" · ")[-1] == v.options.split(" · ")[-1]
        ]
        if variant == "price_diff":
            others = [x for x in product.variants if x.price != v.price] or others
        target = rng.choice(others) if others else v
        target = _in_stock(target, variant != "oos")
        b.catalog[target.sku] = target
        exchange_sku = target.sku
    wants: Remedy = "exchange" if kind == "exchange" else "refund"
    if outcome == "already_settled":  # the records show it sent back and refunded already (P18)
        order = _with_history(b, order, line_no, "return", units=ordered)
    request = Request(
        kind=kind, order_id=order.order_id, lines=((line_no, wanted),), wants=wants, exchange_sku=exchange_sku
    )
    if outcome == "risk":
        t.high_risk = True
    return request, order


def _late_request(b: _Builder, account: Account, plan: Plan, tier: str, t: _Ticket) -> tuple[Request, Order]:
    rng = b.rng
    product = b.product(max_price=30000)
    lines, _ = _lines(b, LineSpec(rng.choice(product.variants), 1), tier)
    late = (
        rng.randrange(LATE_DELIVERY_DAYS + 1, 12)
        if plan.outcome in ("grant", "already_credited")
        else rng.randrange(0, LATE_DELIVERY_DAYS + 1)
    )
    delivered = rng.randrange(2, 25)
    spec = OrderSpec(
        lines,
        delivered + late + rng.randrange(3, 6),
        delivered_days_ago=delivered,
        late_days=late,
        **_money_facts(b, tier),
    )
    order = _order(b, account, spec)
    if plan.outcome == "already_credited":
        b.credits.append(
            PastCredit(
                credit_id=b.uid("CRD-", 5),
                date=b.day(max(delivered - 1, 0)),
                order_id=order.order_id,
                amount=rng.choice((500, 800, 1000)),
                reason="late_delivery",
            )
        )
    claimed = late + rng.choice((0, 1, 2, 4, 6)) if tier == "hard" else late
    request = Request(
        kind="late",
        order_id=order.order_id,
        lines=tuple((ln.line_no, ln.quantity) for ln in order.lines),
        wants="credit",
        claims_days_late=max(claimed, 4) if plan.outcome == "not_late" else claimed,
    )
    return request, order


def _duplicate_request(b: _Builder, account: Account, plan: Plan, tier: str, t: _Ticket) -> tuple[Request, Order]:
    rng = b.rng
    lines, _ = _lines(b, LineSpec(rng.choice(b.product(max_price=25000).variants), 1), tier)
    days = rng.randrange(2, 20)
    spec = OrderSpec(
        lines,
        days + 4,
        delivered_days_ago=days,
        duplicate=plan.outcome == "grant",
        **{**_money_facts(b, tier), "gift_card": False, "store_credit": False},
    )
    order = _order(b, account, spec)
    return Request(kind="duplicate_charge", order_id=order.order_id, wants="refund"), order


def _cancel_request(b: _Builder, account: Account, plan: Plan, tier: str, t: _Ticket) -> tuple[Request, Order]:
    rng = b.rng
    target = LineSpec(rng.choice(b.product(max_price=40000).variants), 1)
    lines, _ = _lines(b, target, tier)
    if len(lines) == 1 and plan.variant == "partial":
        lines.append(LineSpec(rng.choice(b.product(max_price=15000).variants), 1))
    if plan.outcome == "shipped":
        spec = OrderSpec(
            lines,
            rng.randrange(2, 6),
            journey=rng.choice(("in_transit", "mixed")),
            transit_late_days=-rng.randrange(1, 4),
        )
    else:
        spec = OrderSpec(
            lines,
            rng.randrange(0, 2),
            journey="processing" if plan.variant != "partial" or rng.random() < 0.5 else "mixed",
        )
    spec = OrderSpec(**{**spec.__dict__, **_money_facts(b, tier)})
    order = _order(b, account, spec)
    processing = [ln.line_no for ln in order.lines if ln.status == "processing"]
    shipped = [ln.line_no for ln in order.lines if ln.status != "processing"]
    if plan.outcome == "shipped":
        chosen = [rng.choice(shipped)]
    elif plan.variant == "partial" and len(processing) > 1:
        chosen = rng.sample(processing, k=rng.randrange(1, len(processing)))
    else:
        chosen = processing if rng.random() < 0.5 else [rng.choice(processing)]
    lines_q = tuple((n, order.line(n).quantity) for n in sorted(chosen))  # type: ignore[union-attr]
    return Request(kind="cancel", order_id=order.order_id, lines=lines_q, wants="cancel"), order


def _address_request(b: _Builder, account: Account, plan: Plan, tier: str, t: _Ticket) -> tuple[Request, Order]:
    rng = b.rng
    lines, _ = _lines(b, LineSpec(rng.choice(b.product(max_price=30000).variants), 1), tier)
    journey = "processing" if plan.outcome == "grant" else rng.choice(("in_transit", "mixed"))
    spec = OrderSpec(
        lines, rng.randrange(0, 3), journey=journey, transit_late_days=-rng.randrange(1, 4), **_money_facts(b, tier)
    )
    order = _order(b, account, spec)
    new = _address(b, "new")
    return Request(kind="address", order_id=order.order_id, wants="address", new_address=new), order


_BUILDERS = {
    "damaged": _item_request,
    "defective": _item_request,
    "wrong_item": _item_request,
    "missing": _missing_request,
    "change_of_mind": _return_request,
    "exchange": _return_request,
    "late": _late_request,
    "duplicate_charge": _duplicate_request,
    "cancel": _cancel_request,
    "address": _address_request,
}


# ----------------------------------------------------------------------------------- the ticket

_REFUNDING = frozenset({"damaged", "defective", "wrong_item", "missing", "change_of_mind"})


def _extra_plan(rng: random.Random, tier: str, taken: set[RequestKind]) -> Plan:
    """A further request of a medium or hard ticket: any kind not taken yet, granted three times in four."""
    kind = rng.choice([k for k in _EXTRA if k not in taken])
    grants, refusals = _EXTRA_OUTCOMES[kind]
    outcome, _, variant = rng.choice(grants if rng.random() < 0.75 else refusals).partition(":")
    return Plan(kind, outcome, variant)  # type: ignore[arg-type]


def _background(b: _Builder, account: Account, tier: str, count: int, like: Variant | None) -> list[Order]:
    """Orders the conversation is not about: delivered weeks or months ago, some refunded in part. With
    ``like``, one of them holds another variant of the same product (the writer must be told apart)."""
    rng = b.rng
    out = []
    for k in range(count):
        if k == 0 and like is not None:
            product = b.products[like.product_id]
            others = [v for v in product.variants if v.options.split(" · ")[-1] != like.options.split(" · ")[-1]]
            if not others:  # nothing tells two of them apart: no twin
                others = list(b.product(max_price=20000).variants)
            target = LineSpec(rng.choice(others), 1)
        else:
            target = LineSpec(rng.choice(b.product(max_price=20000).variants), 1)
        lines, _ = _lines(b, target, tier)
        days = rng.randrange(35, 200)
        order = _order(b, account, OrderSpec(lines, days + 3, delivered_days_ago=days, **_money_facts(b, tier)))
        if tier != "easy" and rng.random() < 0.3:
            order = _with_earlier_refund(b, order)
        out.append(order)
    return out


_HISTORY_REASONS = {
    "refund": ("arrived damaged", "not as described", "missing from the parcel"),
    "return": ("changed mind", "did not fit", "not as expected"),
    "replacement": ("arrived damaged", "wrong item sent", "stopped working"),
}


def _with_history(b: _Builder, order: Order, line_no: int, kind: str, units: int | None = None) -> Order:
    """``order`` with something settled on one of its lines before this conversation: a refund, a return
    (received, and refunded), or a replacement — of ``units`` units (one unit, or all when None is left to
    the caller's choice), on a day between the line's delivery and today. P21 reads earlier refunds; P18
    declines a claim about units settled already."""
    from service.env.store.money import paid_for
    from service.env.store.policy import allocate, shipment_of

    line = order.line(line_no)
    shipment = shipment_of(order, line_no)
    delivered = shipment.delivered_on if shipment is not None else None
    since = (b.today - date.fromisoformat(delivered)).days if delivered else 0
    if line is None or since < 2:
        return order
    qty = units or 1
    day = b.day(b.rng.randrange(1, since))
    reason = b.rng.choice(_HISTORY_REASONS[kind])
    if kind == "replacement":
        done = PastReplacement(replacement_id=b.uid("RPL-", 5), date=day, line_no=line_no, quantity=qty, reason=reason)
        return order.model_copy(update={"replacements": (*order.replacements, done)})
    cents = paid_for(order, line_no, qty)
    refund = PastRefund(
        refund_id=b.uid("RFD-", 5),
        date=day,
        lines=((line_no, qty),),
        shipping=False,
        amounts=allocate(order, cents, ()),
        reason=reason if kind == "refund" else f"returned: {reason}",
    )
    order = order.model_copy(update={"refunds": (*order.refunds, refund)})
    if kind == "return":
        back = PastReturn(
            return_id=b.uid("RTN-", 5),
            date=day,
            lines=((line_no, qty),),
            label=b.rng.choice(("prepaid", "customer_paid")),
            reason=reason,
        )
        order = order.model_copy(update={"returns": (*order.returns, back)})
    return order


def _with_earlier_refund(b: _Builder, order: Order) -> Order:
    """A background order with something settled on one of its lines."""
    line = b.rng.choice([ln for ln in order.lines if ln.status == "delivered"] or list(order.lines))
    return _with_history(b, order, line.line_no, b.rng.choice(("refund", "return", "replacement")))


def _draw(
    rng: random.Random, key: bytes, split: Split, difficulty: StoreDifficulty, position: int, plan: Plan
) -> StoreTicket | None:
    today = _EPOCH + timedelta(days=rng.randrange(0, 270))
    b = _Builder(rng, difficulty, today)
    tier = rng.choices(("standard", "silver", "gold"), weights=(55, 30, 15))[0]
    account = _account(b, tier, high_risk=plan.outcome == "risk")
    t = _Ticket()
    requests: list[Request] = []
    orders: list[Order] = []
    plans = [plan]
    extra = {"easy": 0, "medium": rng.choice((0, 1, 1)), "hard": rng.choice((1, 1, 2))}[difficulty]
    taken = {plan.kind}
    for _ in range(extra):
        more = _extra_plan(rng, difficulty, taken)
        taken.add(more.kind)
        plans.append(more)
    for p in plans:
        needs_before = set(t.needs)
        request, order = _BUILDERS[p.kind](b, account, p, difficulty, t)
        if p is not plan and (t.needs - needs_before) & needs_before:
            return None
        others = [ln.line_no for ln in order.lines if ln.line_no not in dict(request.lines)]
        if p.outcome != "already_settled" and others and rng.random() < _HISTORY[difficulty]:
            kind = rng.choice(("refund", "return", "replacement"))
            order = _with_history(b, order, rng.choice(others), kind)
        requests.append(request)
        orders.append(order)
    if t.photos_attached and t.photos_show is not None:
        return None  # one ticket, one set of photos
    lo, hi, *_ = _TIER[difficulty]
    like = None
    if difficulty == "hard" and rng.random() < 0.5:
        first = orders[0].line(requests[0].lines[0][0]) if requests[0].lines else None
        like = b.catalog.get(first.sku) if first is not None else None
    background = _background(b, account, difficulty, max(0, rng.randrange(lo, hi + 1) - len(orders)), like)
    every = sorted(orders + background, key=lambda o: o.placed_on)
    year_ago = b.day(365)
    returned = sum(1 for o in every for r in o.returns if r.date >= year_ago)
    if returned > account.returns_12m:  # the account's count includes the returns its orders show
        if returned >= 5 and plan.outcome != "risk":
            return None  # that many returns would make the account high-risk (P7): not this plan
        account = account.model_copy(update={"returns_12m": returned})
    requests = [_pushy(b, r, difficulty) if i == 0 else r for i, r in enumerate(requests)]
    writer, hidden, shared = _writer(b, account, difficulty, plan, requests, t)
    db = StoreDB(
        today=today.isoformat(),
        account=account,
        orders=tuple(every),
        catalog=tuple(sorted(b.catalog.values(), key=lambda v: v.sku)),
        credits=tuple(b.credits),
    )
    ticket = StoreTicket(
        ticket_id=store_ticket_id(key, difficulty, position),
        position=position,
        split=split,
        difficulty=difficulty,
        db=db,
        writer=writer,
        requests=tuple(requests),
        hidden=hidden,
        photos_attached=t.photos_attached,
        stated_condition=t.stated_condition,
        subject="",
        message="",
        recipe=";".join(f"{p.kind}:{p.outcome}{':' + p.variant if p.variant else ''}" for p in plans),
    )
    ticket = _without_idle_mind_changes(ticket)
    if not _consistent(ticket, plans):
        return None
    shared = _quoted_date(b, ticket, shared)
    subject, message = messages.compose(rng, _parts(b, ticket), shared)
    return ticket.model_copy(update={"subject": subject, "message": message})


def _pushy(b: _Builder, r: Request, difficulty: str) -> Request:
    if difficulty == "hard" and r.kind in _REFUNDING and r.wants in ("refund",) and b.rng.random() < 0.3:
        return r.model_copy(update={"to_other_card": True})
    return r


def _writer(
    b: _Builder, account: Account, difficulty: str, plan: Plan, requests: list[Request], t: _Ticket
) -> tuple[Writer, StoreHidden, dict[str, Any]]:
    rng = b.rng
    first = account.name.split()[0]
    holder = plan.outcome != "not_holder"
    relation = None if holder else rng.choice(("daughter", "son", "husband", "wife", "partner", "brother", "sister"))
    name = (
        (first if rng.random() < 0.6 else account.name)
        if holder
        else (f"{rng.choice([n for n in _FIRST if n != first])} {account.name.split()[-1]}")
    )
    gave = holder and rng.random() < {"easy": 0.5, "medium": 0.2, "hard": 0.1}[difficulty]
    writer = Writer(
        name=name,
        holder=holder,
        relation=relation,
        gave_identity=gave,
        insists=rng.random() < {"easy": 0.0, "medium": 0.1, "hard": 0.3}[difficulty],
        injection=rng.random() < {"easy": 0.0, "medium": 0.05, "hard": 0.25}[difficulty],
    )
    hidden = StoreHidden(
        photos_show=t.photos_show,
        condition=t.condition,
        parcel_found=t.parcel_found,
        wrong_postcode_first=holder
        and not gave
        and rng.random() < {"easy": 0.0, "medium": 0.1, "hard": 0.25}[difficulty],
    )
    shared: dict[str, Any] = {
        "name": name,
        "email": account.email,
        "postal": account.addresses[0].postal_code,
        "holder_first": first,
        "holder_name": account.name,
        "relation": relation or "",
        "gave_identity": gave,
        "insists": writer.insists,
        "injection": writer.injection,
        "other_card": any(r.to_other_card for r in requests),
        "other_last4": str(rng.randrange(1000, 9999)),
        "forward": not holder and rng.random() < 0.5,
        "quoted": holder and difficulty == "hard" and rng.random() < 0.3,
        "quoted_ago": rng.randrange(2, 9),  # days ago the quoted earlier message was sent (see _quoted_date)
    }
    return writer, hidden, shared


def _without_idle_mind_changes(ticket: StoreTicket) -> StoreTicket:
    """Keep a change of mind only where it changes something the customer is asked to agree to: a request
    the policy grants without escalating, whose items it replaces or refunds as the customer first asked
    and the other way after the change (P23). Anywhere else — a declined or escalated request, an item out
    of stock — the customer has nothing to change their mind about."""
    requests = list(ticket.requests)
    for i, r in enumerate(requests):
        if r.mind_change is None:
            continue
        if any(x.mind_change for x in requests[:i]):  # one change of mind per conversation
            requests[i] = r.model_copy(update={"mind_change": None})
            continue
        before = decide(
            ticket.model_copy(
                update={
                    "requests": tuple(requests[:i])
                    + (r.model_copy(update={"mind_change": None}),)
                    + tuple(requests[i + 1 :])
                }
            )
        )
        after = decide(ticket.model_copy(update={"requests": tuple(requests)}))
        if _remedy(before.outcomes[i]) is None or _remedy(after.outcomes[i]) in (None, _remedy(before.outcomes[i])):
            requests[i] = r.model_copy(update={"mind_change": None})
    return ticket.model_copy(update={"requests": tuple(requests)})


def _remedy(outcome: Any) -> str | None:
    """'replacement' or 'refund' when a granted, unescalated outcome makes only that of the two."""
    kinds = {e.kind for e in outcome.effects}
    if not outcome.granted or "escalate" in kinds or ("replace" in kinds) == ("refund" in kinds):
        return None
    return "replacement" if "replace" in kinds else "refund"


def _consistent(ticket: StoreTicket, plans: list[Plan]) -> bool:
    """The policy's decision for the first request is the plan's outcome, and the ticket is coherent."""
    gold = decide(ticket)
    first, plan = gold.outcomes[0], plans[0]
    if plan.outcome == "not_holder":
        return first.reason == "not_holder"
    kinds = {type(e).__name__ for e in first.effects}
    escalated = any(getattr(e, "queue", None) == "Escalations" for e in first.effects)
    if plan.outcome == "grant":
        if not first.granted or escalated:
            return False
    elif plan.outcome == "escalate":
        if not escalated:
            return False
    elif plan.outcome == "risk":
        if first.reason != "unverifiable":
            return False
    elif first.reason != plan.outcome:
        return False
    variant_ok = {
        "replacement": "ReplaceEffect" in kinds,
        "refund": "RefundEffect" in kinds,
        "oos": "RefundEffect" in kinds,
        "exchange": "ExchangeEffect" in kinds,
        "price_diff": "ExchangeEffect" in kinds and any(getattr(e, "difference", 0) for e in first.effects),
        "ask_photos": "photos" in first.needs,
        "ask_condition": "condition" in first.needs,
        "not_found": "delivery" in first.needs,
        "either": "preference" in first.needs,
        "restocking": "P20" in first.clauses,
        "partial": len(first.lines) < len(ticket.db.order(first.order_id).lines),  # type: ignore[union-attr]
    }.get(plan.variant, True)
    if not variant_ok:
        return False
    # A request the account-wide rules decline (P7) must be the planned one only.
    if not (all(o.reason != "unverifiable" for o in gold.outcomes[1:]) or plan.outcome == "risk"):
        return False
    if ticket.difficulty == "hard":  # issue 19: four facts combined, an amount from two rules
        clauses = {c for o in gold.outcomes for c in o.clauses} - {"P15", "P16", "P17", "P32"}
        return len(clauses) + len(gold.needs) >= 4 and max(len(o.rules) for o in gold.outcomes) >= 2
    return True


def generate_store_ticket(key: bytes, split: Split, difficulty: StoreDifficulty, position: int) -> StoreTicket:
    """Ticket ``position`` of the ``difficulty`` store pool of ``split`` (keyed; deterministic)."""
    deal = _deal(key, split, difficulty, store_pool_size(split, difficulty))
    plan = DECKS[difficulty][deal[position]]
    for attempt in range(400):
        rng = random.Random(_keyed_seed(key, "store-ticket", split, difficulty, position, attempt))
        ticket = _draw(rng, key, split, difficulty, position, plan)
        if ticket is not None:
            return ticket
    raise RuntimeError(f"no consistent store ticket for {split}/{difficulty}/{position} ({plan})")


# ------------------------------------------------------------------------------------ the words


def _parts(b: _Builder, ticket: StoreTicket) -> list[messages.Part]:
    """How the message tells each request: the values its phrases need and the slots said after it."""
    rng = b.rng
    db = ticket.db
    out = []
    for r in ticket.requests:
        order = db.order(r.order_id)
        assert order is not None
        values = {"order_ref": _order_ref(rng, ticket, order), "bought": messages.ago(_days(db, order.placed_on))}
        first = order.line(r.lines[0][0]) if r.lines else order.lines[0]
        assert first is not None
        shipment = order.shipment(first.shipment_id) if first.shipment_id else None
        delivered = shipment.delivered_on if shipment is not None else None
        values["when"] = messages.ago(_days(db, delivered)) if delivered else messages.ago(_days(db, order.placed_on))
        values["item"], values["item_short"], plural = _item_ref(rng, ticket, order, r)
        values.update(_grammar_values(plural, first.category))
        extras: list[str] = []
        if r.kind in ("damaged", "defective") and ticket.photos_attached:
            extras.append("photos_attached")
        if r.kind in ("damaged", "defective", "wrong_item", "missing") and r.wants_stated:
            extras.append("want_refund" if r.wants == "refund" else "want_replacement")
        if r.kind == "wrong_item":
            other = rng.choice([c for c in CATALOG if c.name != first.name])
            values["wrong_thing"] = rng.choice(("a", "some")) + " " + messages.item_noun(rng, other.name)
        if r.kind == "late":
            values["claimed_days"] = messages.number(r.claims_days_late or 4, rng)
            extras.append("late_want")
        if r.kind in ("change_of_mind", "exchange") and ticket.stated_condition is not None:
            extras.append(f"condition_{ticket.stated_condition}")
        if r.kind == "exchange" and r.exchange_sku:
            wanted = db.variant(r.exchange_sku)
            values["new_options"] = _options_words(rng, wanted.options if wanted else "")
            extras.append("exchange_want")
        if r.kind == "duplicate_charge":
            values["charge"] = f"${order.payments[0].amount / 100:.2f}"
        if r.kind == "address" and r.new_address is not None:
            a = r.new_address
            values["new_address"] = f"{a.line1}, {a.city} {a.postal_code}"
        # units said only by {item}: part of a line, or all of a line of several
        partial = any(qty < order.line(n).quantity or qty > 1 for n, qty in r.lines)  # type: ignore[union-attr]
        out.append(messages.Part(r.kind, values, tuple(extras), partial=partial))
    return out


def _quoted_date(b: _Builder, ticket: StoreTicket, shared: dict[str, Any]) -> dict[str, Any]:
    """The earlier message a ticket quotes or forwards was sent after what it complains about: after every
    request's order was placed and its parcel delivered. Too recent for that, a reply quotes nothing (a
    forwarded message was then sent today)."""
    since = min(_days(ticket.db, d) for r in ticket.requests for d in _request_dates(ticket.db, r))
    ago = max(0, min(shared["quoted_ago"], since - 1))
    return {**shared, "quoted": shared["quoted"] and ago >= 1, "quoted_date": messages.spoken_date(b.day(ago), b.rng)}


def _request_dates(db: StoreDB, r: Request) -> list[str]:
    """The days a request's story happened on: its order placed, its parcels delivered."""
    order = db.order(r.order_id)
    assert order is not None
    return [order.placed_on, *(s.delivered_on for s in order.shipments if s.delivered_on)]


def _days(db: StoreDB, iso: str) -> int:
    return (date.fromisoformat(db.today) - date.fromisoformat(iso)).days


def _order_ref(rng: random.Random, ticket: StoreTicket, order: Order) -> str:
    says_id = {"easy": 1.0, "medium": 0.7, "hard": 0.4}[ticket.difficulty]
    if rng.random() < says_id:
        return rng.choice(("order {o}", "my order {o}", "order number {o}", "order {o_lower}")).format(
            o=order.order_id, o_lower=order.order_id.lower().replace("-", "")
        )
    when = messages.spoken_date(order.placed_on, rng)
    return rng.choice((f"my order from {when}", f"the order I placed on {when}", f"my order of {when}"))


def _grammar_values(plural: bool, category: str) -> dict[str, str]:
    """Words that agree with the item: ``{it} {is}`` reads "it is" or "they are"."""
    worn = category in ("apparel", "footwear")
    words = {
        "it": ("it", "they"),
        "them": ("it", "them"),
        "its": ("its", "their"),
        "is": ("is", "are"),
        "was": ("was", "were"),
        "has": ("has", "have"),
        "does": ("does", "do"),
        "this": ("this", "these"),
    }
    out = {k: v[1] if plural else v[0] for k, v in words.items()}
    out["used"] = "worn" if worn else "used"
    out["use"] = "wear" if worn else "use"
    return out


def _plural_noun(noun: str) -> bool:
    return noun.endswith("s") and not noun.endswith("ss")


def _plural(noun: str) -> str:
    """``lamp`` → ``lamps``, ``pack of pants`` → ``packs of pants``; a plural noun as it is."""
    head, sep, rest = noun.partition(" of ")
    if _plural_noun(head) or head.endswith(("chinos", "trousers")):
        return noun
    if head.endswith(("sh", "ch", "x", "s")):
        head += "es"
    elif head.endswith("y") and head[-2:-1] not in "aeiou":
        head = head[:-1] + "ies"
    else:
        head += "s"
    return head + sep + rest


def _item_ref(rng: random.Random, ticket: StoreTicket, order: Order, r: Request) -> tuple[str, str, bool]:
    """How the writer names what the request is about, a short form ("the speaker"), and whether it reads
    as plural."""
    lines = [order.line(n) for n, _ in r.lines] if r.lines else list(order.lines)
    named = []
    plural = len(lines) > 1
    for line in lines:
        assert line is not None
        similar = [
            other
            for o in ticket.db.orders
            for other in o.lines
            if other.name == line.name and (o.order_id, other.line_no) != (order.order_id, line.line_no)
        ]
        plain = ticket.difficulty == "easy" or (ticket.difficulty == "medium" and rng.random() < 0.5)
        noun = line.name if plain else messages.item_noun(rng, line.name)
        options = line.options if (similar or rng.random() < 0.4) else ""
        ref = f"the {noun}" + (
            f" ({options})"
            if options and rng.random() < 0.5
            else f" in {_options_words(rng, options)}"
            if options
            else ""
        )
        qty = dict(r.lines).get(line.line_no, line.quantity)
        plural = plural or _plural_noun(noun) or qty > 1
        many = _plural(noun) + (f" ({options})" if options else "")
        if qty < line.quantity:  # part of the line: say how many of how many
            ref = f"{messages.spelled(qty)} of the {messages.spelled(line.quantity)} {many}"
        elif qty > 1:  # all of a line of several: say so ("both lamps", "the three mugs")
            ref = rng.choice((f"the {messages.spelled(qty)} {many}", f"all {messages.spelled(qty)} {many}"))
            ref = f"both {many}" if qty == 2 and rng.random() < 0.5 else ref
        named.append(ref)
    if len(named) > 2 and rng.random() < 0.5 and len(named) == len(order.lines):
        ref = _order_ref(rng, ticket, order)
        text = rng.choice((f"everything in {ref}", f"the whole of {ref}", f"all of {ref}"))
    else:
        text = " and ".join(named) if len(named) <= 2 else ", ".join(named[:-1]) + " and " + named[-1]
    short = "items" if len(lines) != 1 else messages.item_noun(rng, lines[0].name)  # type: ignore[union-attr]
    if len(lines) == 1 and lines[0] is not None and _has_twin(ticket, order, lines[0]):  # say which one
        parts = [p for p in lines[0].options.split(" · ") if p]
        short += " in " + (f"{parts[1]}, {parts[0]}" if len(parts) == 2 else parts[0] if parts else "another colour")
    return text, short, plural


def _has_twin(ticket: StoreTicket, order: Order, line: Line) -> bool:
    return any(
        other.name == line.name and (o.order_id, other.line_no) != (order.order_id, line.line_no)
        for o in ticket.db.orders
        for other in o.lines
    )


def _options_words(rng: random.Random, options: str) -> str:
    parts = [p for p in options.split(" · ") if p]
    if not parts:
        return "another one"
    if len(parts) == 2:
        size, colour = parts
        return rng.choice((f"a {size} in {colour}", f"the {colour} one in {size}", f"{colour}, {size}"))
    return rng.choice((f"a {parts[0]}", f"the {parts[0]} one", parts[0]))
