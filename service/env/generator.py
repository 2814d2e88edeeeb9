"""The seeded ticket generator.

A ticket is built from a *scenario* — a recipe that fixes the few facts that matter for one
policy path (say "damaged on arrival, no photos, in stock") and draws everything else at random.
The gold label is never written by the recipe: :func:`service.env.policy.evaluate` computes it, and
the generator only checks that the recipe produced the path it meant to (a guard against recipe
bugs, not a source of labels).

Every split is made of six *pools*, one per (family, difficulty) cell. Pools are balanced by
construction: a pool of ``n`` tickets holds the cell's scenarios round-robin, ``n`` entries in all.
Which ticket of the pool gets which entry is a **keyed permutation**: a shuffle seeded by the
split's key. Ticket ``k`` of a pool (what ``seed = k`` selects) is therefore unrelated to its label
unless you hold the key, and every random draw of the ticket is keyed too. Ticket ids are an HMAC
of the key and the ticket's place: opaque, they carry neither the index nor the split.

The public splits (train, dev) use keys derived from the generator version, so anyone can
rebuild them from this code. The test split's key is a deployment secret (see
:mod:`service.env.dataset`): without it, nobody — including someone reading this code — can
rebuild its tickets or their labels.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from typing import Any, Callable

from service.env import messages
from service.env.policy import ESCALATION_THRESHOLD, HIGH_RISK_RETURNS, RETURN_WINDOW_DAYS, evaluate
from service.env.world import (
    DIFFICULTIES,
    FAMILIES,
    Claim,
    Customer,
    Difficulty,
    Family,
    HiddenFacts,
    Order,
    Product,
    Split,
    Ticket,
)

GENERATOR_VERSION = "2.0.0"
SPLIT_SIZES: dict[Split, int] = {"train": 1200, "dev": 400, "test": 400}
# The order in which a split's remainder tickets are handed to cells (easy cells first).
CELLS: tuple[tuple[Family, Difficulty], ...] = tuple((f, d) for d in DIFFICULTIES for f in FAMILIES)
_EPOCH = date(2026, 1, 5)


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from ``parts`` that is the same on every machine and Python run."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def pool_size(split: Split, family: Family, difficulty: Difficulty) -> int:
    """How many tickets the (family, difficulty) pool of ``split`` holds."""
    total = SPLIT_SIZES[split]
    rank = CELLS.index((family, difficulty))
    return total // len(CELLS) + (1 if rank < total % len(CELLS) else 0)


def public_split_key(split: Split) -> bytes:
    """The key of a public split: derived from the generator version, so the split is reproducible."""
    return hashlib.sha256(f"ecomm-support-env/public-split/{split}/{GENERATOR_VERSION}".encode()).digest()


def _keyed_seed(key: bytes, *parts: object) -> int:
    digest = hmac.new(key, "\x1f".join(map(str, parts)).encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def ticket_id_for(key: bytes, family: Family, difficulty: Difficulty, position: int) -> str:
    """The opaque id of ticket ``position`` of a pool: reveals neither the position nor the split."""
    mac = hmac.new(key, f"ticket-id\x1f{family}\x1f{difficulty}\x1f{position}".encode(), hashlib.sha256)
    return "tk_" + mac.hexdigest()[:16]


# --------------------------------------------------------------------------------------- catalog

@dataclass(frozen=True)
class _CatalogItem:
    name: str
    category: str
    price: tuple[float, float]
    warranty_days: int
    hygiene: bool = False
    perishable: bool = False


CATALOG: tuple[_CatalogItem, ...] = (
    _CatalogItem("Merino Crew Sweater", "apparel", (45, 120), 90),
    _CatalogItem("Linen Button-Down Shirt", "apparel", (30, 80), 90),
    _CatalogItem("Waterproof Rain Jacket", "apparel", (70, 220), 180),
    _CatalogItem("Slim Fit Chinos", "apparel", (35, 90), 90),
    _CatalogItem("Seamless Underwear 3-Pack", "apparel", (18, 40), 0, hygiene=True),
    _CatalogItem("Trail Running Shoes", "footwear", (80, 180), 180),
    _CatalogItem("Leather Chelsea Boots", "footwear", (110, 260), 365),
    _CatalogItem("Canvas Sneakers", "footwear", (40, 90), 90),
    _CatalogItem("Wireless Earbuds", "electronics", (50, 250), 365, hygiene=True),
    _CatalogItem("Bluetooth Speaker", "electronics", (40, 180), 365),
    _CatalogItem("27-inch 4K Monitor", "electronics", (280, 650), 730),
    _CatalogItem("Robot Vacuum", "electronics", (250, 900), 730),
    _CatalogItem("Smartwatch", "electronics", (150, 450), 365),
    _CatalogItem("Noise-Cancelling Headphones", "electronics", (120, 420), 365),
    _CatalogItem("Ceramic Table Lamp", "home", (35, 110), 180),
    _CatalogItem("Cast Iron Skillet", "home", (30, 80), 3650),
    _CatalogItem("Espresso Machine", "home", (180, 700), 730),
    _CatalogItem("Down Duvet", "home", (90, 320), 365),
    _CatalogItem("Vitamin C Serum", "beauty", (20, 60), 0, hygiene=True),
    _CatalogItem("Ionic Hair Dryer", "beauty", (45, 220), 365),
    _CatalogItem("Lipstick Collection", "beauty", (25, 70), 0, hygiene=True),
    _CatalogItem("Single-Origin Coffee Beans", "grocery", (15, 45), 0, perishable=True),
    _CatalogItem("Gourmet Chocolate Box", "grocery", (20, 60), 0, perishable=True),
    _CatalogItem("Building Blocks Castle Set", "toys", (40, 160), 180),
    _CatalogItem("Remote Control Car", "toys", (35, 140), 180),
    _CatalogItem("Cork Yoga Mat", "sports", (30, 95), 180),
    _CatalogItem("Carbon Tennis Racket", "sports", (90, 260), 365),
    _CatalogItem("Adjustable Dumbbells", "sports", (150, 420), 730),
)
_FIRST = ("Ava", "Noah", "Mia", "Liam", "Zoe", "Omar", "Lena", "Ravi", "Chen", "Sofia", "Jonas", "Amara", "Diego", "Hana", "Kofi", "Ines", "Mateo", "Priya", "Tom", "Yuki")
_LAST = ("Smith", "Garcia", "Okafor", "Nguyen", "Müller", "Rossi", "Khan", "Silva", "Kowalski", "Haddad", "Tanaka", "Dubois", "Johansson", "Mensah", "Patel", "Ortiz")


# ------------------------------------------------------------------------------------- scenarios

@dataclass(frozen=True)
class Scenario:
    """A recipe for one policy path. ``facts`` returns overrides for the base draw."""

    name: str
    expect: str  # the gold decision the recipe is meant to produce (checked, not used as a label)
    facts: Callable[[random.Random], dict[str, Any]]
    expect_queue: str | None = None


def _r(lo: int, hi: int) -> Callable[[random.Random], int]:
    return lambda rng: rng.randint(lo, hi)


def S(name: str, expect: str, queue: str | None = None, **fixed: Any) -> Scenario:  # noqa: N802
    def facts(rng: random.Random) -> dict[str, Any]:
        return {k: (v(rng) if callable(v) else v) for k, v in fixed.items()}

    return Scenario(name, expect, facts, queue)


W = RETURN_WINDOW_DAYS
IN_WIN = _r(1, W)
PAST_WIN = _r(W + 5, 150)
CALM = lambda rng: rng.choice(("calm", "calm", "angry"))  # noqa: E731
ANY_TONE = lambda rng: rng.choice(("calm", "angry", "vague", "multi_issue", "typos"))  # noqa: E731
HARD_TONE = lambda rng: rng.choice(("angry", "vague", "multi_issue", "typos"))  # noqa: E731
HIGH_RISK = lambda rng: rng.choice(("returns", "chargeback", "fraud"))  # noqa: E731

_easy_decision = (
    S("unused_change_of_mind", "approve_refund", issue="changed_mind", used=False, days=IN_WIN, tone=CALM),
    S("damaged_with_photos", "approve_replacement", issue="damaged", images=True, days=IN_WIN, in_stock=True, tone=CALM),
    S("change_of_mind_past_window", "reject", issue="changed_mind", used=False, days=PAST_WIN, tone=CALM),
    S("damaged_without_photos", "request_info", issue="damaged", images=False, days=IN_WIN, tone=CALM),
    S("duplicate_charge_confirmed", "approve_refund", issue="duplicate_charge", charged_twice=True, tone=CALM),
    S("wrong_item_in_stock", "approve_replacement", issue="wrong_item", days=IN_WIN, in_stock=True, tone=CALM),
    S("used_item_return", "reject", issue="item_used", used=True, days=IN_WIN, tone=CALM),
    S("defective_without_photos", "request_info", issue="defective", images=False, days=IN_WIN, tone=CALM),
)
_medium_decision = (
    S("damaged_out_of_stock", "approve_refund", issue="damaged", images=True, days=IN_WIN, in_stock=False, tone=ANY_TONE),
    S("size_exchange", "approve_replacement", issue="size_issue", used=False, days=IN_WIN, in_stock=True, tone=ANY_TONE),
    S("final_sale_change_of_mind", "reject", issue="changed_mind", used=False, days=IN_WIN, final_sale=True, tone=ANY_TONE),
    S("delivered_but_missing", "request_info", issue="not_received", carrier="delivered", tone=ANY_TONE),
    S("wrong_item_out_of_stock", "approve_refund", issue="wrong_item", days=IN_WIN, in_stock=False, tone=ANY_TONE),
    S("lost_in_stock", "approve_replacement", issue="not_received", carrier="lost", in_stock=True, tone=ANY_TONE),
    S("in_transit_not_late", "reject", issue="not_received", carrier="in_transit", late=_r(0, 5), tone=ANY_TONE),
    S("size_condition_unstated", "request_info", issue="size_issue", used=None, days=IN_WIN, tone=ANY_TONE),
    S("duplicate_charge_unconfirmed", "reject", issue="duplicate_charge", charged_twice=False, tone=ANY_TONE),
    S("hygiene_change_of_mind", "reject", issue="changed_mind", used=False, days=IN_WIN, hygiene=True, tone=ANY_TONE),
)
_hard_decision = (
    S("late_in_transit_out_of_stock", "approve_refund", issue="not_received", carrier="in_transit", late=_r(9, 30), in_stock=False, tone=HARD_TONE),
    S("warranty_defect", "approve_replacement", issue="defective", days=_r(W + 5, 300), warranty=_r(365, 730), in_stock=True, tone=HARD_TONE),
    S("high_risk_valid_looking_claim", "reject", issue=lambda rng: rng.choice(("damaged", "wrong_item", "changed_mind")), images=True, used=False, days=IN_WIN, risk=HIGH_RISK, tone=HARD_TONE),
    S("vague_message", "request_info", issue="vague", tone=lambda rng: rng.choice(("vague", "angry", "typos"))),
    S("high_risk_lost_parcel", "approve_refund", issue="not_received", carrier="lost", in_stock=False, risk=HIGH_RISK, tone=HARD_TONE),
    S("hygiene_item_damaged", "approve_replacement", issue="damaged", images=True, days=IN_WIN, hygiene=True, in_stock=True, tone=HARD_TONE),
    S("defect_past_warranty", "reject", issue="defective", days=_r(200, 400), warranty=_r(90, 180), tone=HARD_TONE),
    S("multi_issue_no_photos", "request_info", issue="defective", images=False, days=IN_WIN, tone="multi_issue"),
    S("damage_reported_late", "reject", issue="damaged", images=True, days=PAST_WIN, tone=HARD_TONE),
    S("used_unstated_change_of_mind", "request_info", issue="changed_mind", used=None, days=IN_WIN, tone=HARD_TONE),
)
# Workflow family. Triage: the outcome tag is what matters, so no request_info paths.
_easy_workflow = (
    S("unused_change_of_mind", "approve_refund", issue="changed_mind", used=False, days=IN_WIN, price_cap=True, tone=CALM),
    S("damaged_with_photos", "approve_replacement", issue="damaged", images=True, days=IN_WIN, in_stock=True, tone=CALM),
    S("change_of_mind_past_window", "reject", issue="changed_mind", used=False, days=PAST_WIN, tone=CALM),
    S("duplicate_charge_confirmed", "approve_refund", issue="duplicate_charge", charged_twice=True, price_cap=True, tone=CALM),
    S("wrong_item_in_stock", "approve_replacement", issue="wrong_item", days=IN_WIN, in_stock=True, tone=CALM),
    S("used_item_return", "reject", issue="item_used", used=True, days=IN_WIN, tone=CALM),
)
# Routing: the right queue and a holding reply. Balanced over the four queues.
_medium_workflow = (
    S("large_refund", "approve_refund", "Escalations", issue="damaged", images=True, days=IN_WIN, in_stock=False, price_floor=True, tone=ANY_TONE),
    S("high_risk_claim", "reject", "Fraud", issue=lambda rng: rng.choice(("damaged", "wrong_item", "changed_mind")), images=True, used=False, days=IN_WIN, risk=HIGH_RISK, tone=ANY_TONE),
    S("duplicate_charge_confirmed", "approve_refund", "Billing", issue="duplicate_charge", charged_twice=True, tone=ANY_TONE),
    S("wrong_item_in_stock", "approve_replacement", "Returns", issue="wrong_item", days=IN_WIN, in_stock=True, tone=ANY_TONE),
    S("large_change_of_mind_refund", "approve_refund", "Escalations", issue="changed_mind", used=False, days=IN_WIN, price_floor=True, tone=ANY_TONE),
    S("high_risk_return", "reject", "Fraud", issue="size_issue", used=False, days=IN_WIN, risk=HIGH_RISK, tone=ANY_TONE),
    S("duplicate_charge_unconfirmed", "reject", "Billing", issue="duplicate_charge", charged_twice=False, tone=ANY_TONE),
    S("final_sale_return", "reject", "Returns", issue="changed_mind", used=False, days=IN_WIN, final_sale=True, tone=ANY_TONE),
)
# Resolution: decide, tag, reply with the real reason, close. Balanced over the three outcomes.
_hard_workflow = (
    S("change_of_mind_past_window", "reject", issue=lambda rng: rng.choice(("changed_mind", "size_issue")), used=False, days=PAST_WIN, tone=ANY_TONE),
    S("warranty_defect", "approve_replacement", issue="defective", days=_r(W + 5, 300), warranty=_r(365, 730), in_stock=True, tone=ANY_TONE),
    S("unused_change_of_mind", "approve_refund", issue="changed_mind", used=False, days=IN_WIN, price_cap=True, tone=ANY_TONE),
    S("final_sale_change_of_mind", "reject", issue="changed_mind", used=False, days=IN_WIN, final_sale=True, tone=ANY_TONE),
    S("wrong_item_in_stock", "approve_replacement", issue="wrong_item", days=IN_WIN, in_stock=True, tone=ANY_TONE),
    S("damaged_out_of_stock", "approve_refund", issue="damaged", images=True, days=IN_WIN, in_stock=False, price_cap=True, tone=ANY_TONE),
    S("defect_past_warranty", "reject", issue="defective", days=_r(200, 400), warranty=_r(90, 180), tone=ANY_TONE),
    S("lost_in_stock", "approve_replacement", issue="not_received", carrier="lost", in_stock=True, tone=ANY_TONE),
    S("lost_out_of_stock", "approve_refund", issue="not_received", carrier="lost", in_stock=False, price_cap=True, tone=ANY_TONE),
    S("used_item_return", "reject", issue="item_used", used=True, days=IN_WIN, tone=ANY_TONE),
    S("hygiene_item_damaged", "approve_replacement", issue="damaged", images=True, days=IN_WIN, hygiene=True, in_stock=True, tone=ANY_TONE),
    S("in_transit_not_late", "reject", issue="not_received", carrier="in_transit", late=_r(0, 5), tone=ANY_TONE),
)

SCENARIOS: dict[tuple[Family, Difficulty], tuple[Scenario, ...]] = {
    ("decision", "easy"): _easy_decision,
    ("decision", "medium"): _medium_decision,
    ("decision", "hard"): _hard_decision,
    ("workflow", "easy"): _easy_workflow,
    ("workflow", "medium"): _medium_workflow,
    ("workflow", "hard"): _hard_workflow,
}


class RecipeMismatch(AssertionError):
    """A scenario produced a ticket whose policy verdict is not the path it was written for."""


# ------------------------------------------------------------------------------------- building

@lru_cache(maxsize=64)
def scenario_order(key: bytes, split: Split, family: Family, difficulty: Difficulty) -> tuple[int, ...]:
    """Scenario index of every ticket of a pool: the cell's scenarios round-robin, in a keyed order."""
    cell = SCENARIOS[(family, difficulty)]
    order = [i % len(cell) for i in range(pool_size(split, family, difficulty))]
    random.Random(_keyed_seed(key, "scenario-order", split, family, difficulty)).shuffle(order)
    return tuple(order)


def generate_ticket(key: bytes, split: Split, family: Family, difficulty: Difficulty, position: int) -> Ticket:
    """Ticket ``position`` of a pool: a pure function of (generator version, key, split, cell, position)."""
    size = pool_size(split, family, difficulty)
    if not 0 <= position < size:
        raise ValueError(f"position {position} is outside the {split} {family}/{difficulty} pool of {size}")
    scenario = SCENARIOS[(family, difficulty)][scenario_order(key, split, family, difficulty)[position]]
    rng = random.Random(_keyed_seed(key, "ticket", GENERATOR_VERSION, split, family, difficulty, position))
    ticket_id = ticket_id_for(key, family, difficulty, position)
    ticket = _build(rng, split, ticket_id, position, family, difficulty, scenario)
    verdict = evaluate(ticket)
    if verdict.gold != scenario.expect or (scenario.expect_queue and verdict.queue != scenario.expect_queue):
        raise RecipeMismatch(f"{scenario.name}: expected {scenario.expect}/{scenario.expect_queue}, policy says {verdict.gold}/{verdict.queue} ({verdict.rationale})")
    return ticket


def _build(
    rng: random.Random, split: Split, ticket_id: str, position: int, family: Family, difficulty: Difficulty, sc: Scenario
) -> Ticket:
    f = sc.facts(rng)
    issue = f["issue"]

    item = rng.choice([c for c in CATALOG if _item_fits(c, f)])
    lo, hi = item.price
    if f.get("price_floor"):
        lo, hi = max(lo, ESCALATION_THRESHOLD + 20), max(hi, ESCALATION_THRESHOLD + 200)
    if f.get("price_cap"):
        hi = min(hi, ESCALATION_THRESHOLD - 20)
    price = round(max(round(rng.uniform(lo, hi)) - rng.choice((0.0, 0.01, 0.05)), 5.0), 2)
    product = Product(
        sku=f"SKU-{rng.randint(10000, 99999)}",
        name=item.name,
        category=item.category,  # type: ignore[arg-type]
        price=price,
        in_stock=f.get("in_stock", rng.random() < 0.7),
        final_sale=f.get("final_sale", False),
        hygiene=item.hygiene,
        perishable=item.perishable,
        warranty_days=f.get("warranty", item.warranty_days),
    )
    quantity = 1
    amount = round(price * quantity, 2)

    risk = f.get("risk")
    customer = Customer(
        customer_id=f"C-{rng.randint(100000, 999999)}",
        name=f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        tier=rng.choice(("standard", "standard", "silver", "gold")),
        account_age_days=rng.randint(30, 3000),
        orders_12m=rng.randint(2, 30),
        returns_12m=rng.randint(HIGH_RISK_RETURNS, 12) if risk == "returns" else rng.randint(0, HIGH_RISK_RETURNS - 1),
        chargebacks=rng.randint(1, 3) if risk == "chargeback" else 0,
        fraud_flag=risk == "fraud",
    )

    opened = _EPOCH + timedelta(days=rng.randint(0, 300))
    carrier = f.get("carrier", "delivered")
    late = f.get("late", 0)
    if issue == "not_received" and carrier != "delivered":
        days = None
        delivery_date = None
        order_date = opened - timedelta(days=rng.randint(6, 20) + late)
    else:
        days = f.get("days", rng.randint(1, W))
        if issue == "not_received":
            days = rng.randint(0, 5)
        delivery_date = opened - timedelta(days=days)
        order_date = delivery_date - timedelta(days=rng.randint(2, 7))
    order = Order(
        order_id=f"ORD-{rng.randint(10_000_000, 99_999_999)}",
        product=product,
        quantity=quantity,
        amount=amount,
        order_date=order_date.isoformat(),
        delivery_date=delivery_date.isoformat() if delivery_date else None,
        days_since_delivery=days,
        carrier_status=carrier,
        days_past_estimate=late if carrier in ("in_transit", "lost") else 0,
        payment_method=rng.choice(("card", "card", "paypal", "gift_card")),
        charged_twice=f.get("charged_twice", False),
    )

    tone = f.get("tone", "calm")
    # Usage is part of the message only for returns; photos only for claims about the item.
    used = f.get("used", False) if issue in ("changed_mind", "size_issue", "item_used") else None
    images = issue in ("damaged", "defective", "wrong_item") and f.get("images", rng.random() < 0.5)
    # Side complaints that never change the policy path: a late delivery, dented packaging, "other problems".
    secondary = rng.choice([s for s in ("not_received", "damaged", "vague") if s != issue]) if tone == "multi_issue" else None
    claim = Claim(issue=issue, images_provided=bool(images), item_used=used, tone=tone, secondary_issue=secondary)

    hidden = HiddenFacts(
        photos_show=(rng.choice(("damage", "damage", "normal_wear")) if issue in ("damaged", "defective") and not images else None),
        item_used=(rng.random() < 0.5) if used is None and issue in ("changed_mind", "size_issue") else None,
        parcel_found=(rng.random() < 0.4) if issue == "not_received" and carrier == "delivered" else None,
        actual_issue=(rng.choice(("damaged", "wrong_item", "changed_mind", "defective")) if issue == "vague" else None),
    )
    if issue == "vague":
        claim = claim.model_copy(update={"images_provided": hidden.actual_issue in ("damaged", "defective", "wrong_item")})
        if hidden.actual_issue == "changed_mind":
            hidden = hidden.model_copy(update={"item_used": rng.random() < 0.5})
    subject, body = messages.render_message(rng, customer=customer, order=order, claim=claim)
    return Ticket(
        ticket_id=ticket_id,
        position=position,
        split=split,
        family=family,
        difficulty=difficulty,
        scenario=sc.name,
        opened_on=opened.isoformat(),
        customer=customer,
        order=order,
        claim=claim,
        hidden=hidden,
        subject=subject,
        message=body,
    )


def _item_fits(item: _CatalogItem, f: dict[str, Any]) -> bool:
    issue = f["issue"]
    if f.get("hygiene") and not item.hygiene:
        return False
    if f.get("price_floor") and item.price[1] < ESCALATION_THRESHOLD + 50:
        return False
    if f.get("price_cap") and item.price[0] > ESCALATION_THRESHOLD - 50:
        return False
    # Change-of-mind and size returns only meet P6 when the recipe asks for it.
    if issue in ("changed_mind", "size_issue", "item_used") and not f.get("hygiene") and (item.hygiene or item.perishable):
        return False
    if issue == "size_issue" and item.category not in ("apparel", "footwear"):
        return False
    if issue == "defective" and (item.perishable or item.category in ("apparel",)):
        return False
    if "warranty" in f and (item.perishable or item.hygiene):
        return False
    return True
