"""The seeded ticket generator.

Every split is made of six *pools*, one per (family, difficulty) cell. A pool declares the claims
it holds (:data:`POOLS`) and how every fact is drawn — days since delivery, photos, the item's
condition, stock, final-sale and hygiene flags, carrier status, the payment record, the customer's
risk, several items per order, a second claim, the customer's own (possibly wrong) account of the
dates. The gold label is never written by the generator: the policy engine computes it
(:func:`service.env.policy.evaluate`).

Each pool **deals its task's answers** (:data:`OUTCOMES`: the decision, the triage tag or the routing
queue) round-robin, so no answer is a safe default — a constant is right on at most 2/7 of a pool — and
the tickets that need asking are dealt evenly among the answers they take once the customer has
answered. A ticket is drawn for its dealt answer: the claim kind and every fact are drawn at random,
independently of the position, and a draw whose answer is not the dealt one, or that the consistency
check refuses (a parcel that "never arrived" and "came in a dented box", months of wear on an item
delivered last week), is redrawn. The deciding facts vary independently of the claim kind, so no single
field gives the label away: the label needs the facts combined.

Which ticket of a pool gets which answer is a **keyed permutation**: a shuffle seeded by the split's
key. Ticket ``k`` of a pool (what ``seed = k`` selects) is therefore unrelated to its label unless you
hold the key, and every random draw of the ticket is keyed too. Ticket ids are an HMAC of the key and
the ticket's place: opaque, they carry neither the index nor the split.

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

from service.env import messages
from service.env.policy import (
    ESCALATION_THRESHOLD,
    HIGH_RISK_RETURNS,
    LATE_IN_TRANSIT_DAYS,
    RETURN_ISSUES,
    RETURN_WINDOW_DAYS,
    evaluate,
    full_information_verdict,
)
from service.env.world import (
    CATALOG,
    DIFFICULTIES,
    TICKET_FAMILIES,
    CatalogItem,
    Claim,
    Customer,
    Difficulty,
    Family,
    HiddenFacts,
    IssueType,
    Order,
    OrderLine,
    Presentation,
    Product,
    Remark,
    Split,
    Ticket,
    Tone,
)

GENERATOR_VERSION = "3.1.0"
SPLIT_SIZES: dict[Split, int] = {"train": 1200, "dev": 400, "test": 400}
# The order in which a split's remainder tickets are handed to cells (easy cells first).
CELLS: tuple[tuple[Family, Difficulty], ...] = tuple((f, d) for d in DIFFICULTIES for f in TICKET_FAMILIES)


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


_FIRST = (
    "Ava",
    "Noah",
    "Mia",
    "Liam",
    "Zoe",
    "Omar",
    "Lena",
    "Ravi",
    "Chen",
    "Sofia",
    "Jonas",
    "Amara",
    "Diego",
    "Hana",
    "Kofi",
    "Ines",
    "Mateo",
    "Priya",
    "Tom",
    "Yuki",
)
_LAST = (
    "Smith",
    "Garcia",
    "Okafor",
    "Nguyen",
    "Müller",
    "Rossi",
    "Khan",
    "Silva",
    "Kowalski",
    "Haddad",
    "Tanaka",
    "Dubois",
    "Johansson",
    "Mensah",
    "Patel",
    "Ortiz",
)
_EPOCH = date(2026, 1, 5)
W = RETURN_WINDOW_DAYS


# ------------------------------------------------------------------------------------------ pools


@dataclass(frozen=True)
class Pool:
    """How one (family, difficulty) pool's tickets are drawn. Every probability is independent of the
    claim kind: the facts that decide a ticket vary on their own."""

    kinds: tuple[tuple[IssueType, IssueType | None], ...]  # (claim, second claim), drawn at random per attempt
    presentation: Presentation = "days"
    tones: tuple[Tone, ...] = ("calm", "calm", "angry")
    in_window: float = 0.6  # delivered items: P(reported within the 30-day window)
    late_days: tuple[int, int] = (W + 3, 120)  # days since delivery when outside the window
    photos: float = 0.5  # damage/defect claims: P(photos attached)
    wear: float = 0.3  # P(the photos would show ordinary wear) when none are attached
    usage: tuple[float, float, float] = (0.6, 0.2, 0.2)  # returns: P(unused stated, used stated, unstated)
    in_stock: float = 0.5
    final_sale: float = 0.0  # returns: P(final-sale item) — and as often a hygiene or perishable item
    carriers: tuple[tuple[str, float], ...] = (
        ("lost", 0.3),
        ("returned", 0.1),
        ("late", 0.2),
        ("in_transit", 0.2),
        ("delivered", 0.2),
    )
    found: float = 0.4  # delivered-but-missing parcels: P(found when the customer checks)
    double_charge: float = 0.5
    high_risk: float = 0.0
    multi_item: float = 0.0  # P(two or three items in the order)
    stated_days: float = 0.0  # P(the customer says when it arrived — drawn independently of the records)
    price: str = "catalog"  # "catalog" | "around_threshold" (escalation matters)
    vague_actual: tuple[IssueType, ...] = ("damaged", "wrong_item", "changed_mind", "defective")


_RETURNS = (("changed_mind", None), ("size_issue", None))
POOLS: dict[tuple[Family, Difficulty], Pool] = {
    # One visible fact decides: the window, photos, the stated condition, stock, the payment record.
    ("decision", "easy"): Pool(
        kinds=(
            ("changed_mind", None),
            ("damaged", None),
            ("wrong_item", None),
            ("item_used", None),
            ("duplicate_charge", None),
            ("size_issue", None),
        ),
        in_window=0.8,
        photos=0.6,
        usage=(0.7, 0.15, 0.15),
        in_stock=0.6,
        double_charge=0.6,
    ),
    # One further fact from the records decides: stock, final-sale/hygiene flags, carrier status,
    # the condition, the payment record — of the item the claim is about, in orders of several items.
    ("decision", "medium"): Pool(
        kinds=(
            ("damaged", None),
            ("size_issue", None),
            ("changed_mind", None),
            ("not_received", None),
            ("duplicate_charge", None),
            ("wrong_item", None),
            ("defective", None),
        ),
        tones=("calm", "angry", "vague", "multi_issue", "typos"),
        in_window=0.75,
        late_days=(W + 1, 400),
        photos=0.7,
        usage=(0.55, 0.2, 0.25),
        final_sale=0.15,
        multi_item=0.5,
    ),
    # Interacting rules: risk and its exemptions, warranty with evidence, late parcels, vague
    # messages, two claims, several items, dates to compute, customers whose account is wrong.
    ("decision", "hard"): Pool(
        kinds=(
            ("defective", None),
            ("damaged", None),
            ("not_received", None),
            ("changed_mind", "damaged"),
            ("size_issue", None),
            ("wrong_item", "damaged"),
            ("vague", None),
            ("duplicate_charge", None),
        ),
        presentation="dates",
        tones=("angry", "vague", "multi_issue", "typos", "calm"),
        in_window=0.72,
        late_days=(W + 1, 420),
        photos=0.45,
        usage=(0.5, 0.2, 0.3),
        final_sale=0.15,
        high_risk=0.15,
        multi_item=0.5,
        stated_days=0.35,
        in_stock=0.45,
        double_charge=0.6,
    ),
    # Triage: the outcome tag of plainly stated claims (Needs_Info when photos are missing).
    ("workflow", "easy"): Pool(
        kinds=(
            ("changed_mind", None),
            ("damaged", None),
            ("wrong_item", None),
            ("item_used", None),
            ("duplicate_charge", None),
            ("size_issue", None),
        ),
        in_window=0.8,
        photos=0.6,
        usage=(0.8, 0.2, 0.0),
        wear=0.3,
        in_stock=0.55,
        double_charge=0.6,
    ),
    # Routing: the owning team — Escalations for refunds above the threshold (of the claimed item),
    # Fraud for what P7 declines, Billing for billing errors, Returns for the rest.
    ("workflow", "medium"): Pool(
        kinds=(
            ("damaged", None),
            ("wrong_item", None),
            ("changed_mind", None),
            ("size_issue", None),
            ("duplicate_charge", None),
            ("not_received", None),
        ),
        tones=("calm", "angry", "vague", "multi_issue", "typos"),
        in_window=1.0,
        photos=1.0,
        usage=(1.0, 0.0, 0.0),
        in_stock=0.25,
        final_sale=0.0,
        double_charge=0.6,
        carriers=(("lost", 0.5), ("returned", 0.2), ("late", 0.3)),
        high_risk=0.25,
        price="around_threshold",
        multi_item=0.35,
    ),
    # Resolution: everything, end to end, asking where the policy needs it.
    ("workflow", "hard"): Pool(
        kinds=(
            ("changed_mind", None),
            ("defective", None),
            ("damaged", None),
            ("not_received", None),
            ("wrong_item", None),
            ("size_issue", "defective"),
            ("item_used", None),
            ("duplicate_charge", None),
        ),
        presentation="dates",
        tones=("calm", "angry", "vague", "multi_issue", "typos"),
        in_window=0.75,
        late_days=(W + 1, 420),
        photos=0.5,
        usage=(0.5, 0.2, 0.3),
        final_sale=0.12,
        high_risk=0.12,
        multi_item=0.5,
        stated_days=0.3,
        double_charge=0.6,
    ),
}


class InconsistentTicket(AssertionError):
    """The drawn facts do not make a coherent ticket (the consistency check refused it)."""


# ------------------------------------------------------------------------------------- building

# What each pool balances: its task's own answer (the decision, the triage tag or the routing queue).
_ANSWER_OF: dict[tuple[Family, Difficulty], str] = {
    ("decision", "easy"): "gold",
    ("decision", "medium"): "gold",
    ("decision", "hard"): "gold",
    ("workflow", "easy"): "tag",
    ("workflow", "medium"): "queue",
    ("workflow", "hard"): "gold",
}
OUTCOMES: dict[str, tuple[str, ...]] = {
    "gold": ("approve_refund", "approve_replacement", "reject", "request_info"),
    "tag": ("Refund", "Replacement", "Policy_Denied", "Needs_Info"),
    # Billing owns every billing claim and nothing else, so the claim type alone names it: it is dealt
    # half as often as the other teams, or the claim type would identify ~0.6 of routing tickets.
    "queue": ("Returns", "Fraud", "Escalations", "Returns", "Fraud", "Escalations", "Billing"),
}
# What a ticket that needs asking becomes once the customer has answered: dealt round-robin too, so
# asking first and then giving one constant answer gains at most a third of the asking tickets.
_ANSWERED = {
    "request_info": ("approve_refund", "approve_replacement", "reject"),
    "Needs_Info": ("Refund", "Replacement", "Policy_Denied"),
}
MAX_ATTEMPTS = 2000
Outcome = tuple[str, str | None]  # (the answer, and for a ticket that needs asking, the answer after asking)


def pool_answer(ticket: Ticket) -> Outcome:
    """The outcome a ticket's pool balances: its gold decision, triage tag or routing queue — and, where
    the policy needs the customer's answer first, what it is once every question is answered."""
    field = _ANSWER_OF[(ticket.family, ticket.difficulty)]
    answer = str(getattr(evaluate(ticket), field))
    after = str(getattr(full_information_verdict(ticket), field)) if answer in _ANSWERED else None
    return answer, after


@lru_cache(maxsize=64)
def outcome_order(key: bytes, split: Split, family: Family, difficulty: Difficulty) -> tuple[Outcome, ...]:
    """The outcome every ticket of a pool is drawn for: the pool's outcomes round-robin (and the answers
    after asking round-robin among the tickets that need asking), in a keyed order."""
    outcomes = OUTCOMES[_ANSWER_OF[(family, difficulty)]]
    order = [outcomes[i % len(outcomes)] for i in range(pool_size(split, family, difficulty))]
    asked = [o for o in order if o in _ANSWERED]
    dealt: list[Outcome] = [(o, None) for o in order if o not in _ANSWERED]
    dealt += [(o, _ANSWERED[o][i % len(_ANSWERED[o])]) for i, o in enumerate(asked)]
    dealt.sort(key=lambda o: (o[0], o[1] or ""))  # a canonical order before the keyed shuffle
    random.Random(_keyed_seed(key, "outcome-order", split, family, difficulty)).shuffle(dealt)
    return tuple(dealt)


def generate_ticket(key: bytes, split: Split, family: Family, difficulty: Difficulty, position: int) -> Ticket:
    """Ticket ``position`` of a pool: a pure function of (generator version, key, split, cell, position).

    The pool deals its outcomes (:func:`outcome_order`); the claim kind and every fact are drawn
    independently of the position, and a draw whose answer is not the dealt one, or that the
    consistency check refuses, is redrawn (a keyed attempt counter), so the result stays a pure
    function of the same inputs and the facts that decide vary on their own."""
    size = pool_size(split, family, difficulty)
    if not 0 <= position < size:
        raise ValueError(f"position {position} is outside the {split} {family}/{difficulty} pool of {size}")
    pool = POOLS[(family, difficulty)]
    target = outcome_order(key, split, family, difficulty)[position]
    ticket_id = ticket_id_for(key, family, difficulty, position)
    for attempt in range(MAX_ATTEMPTS):
        seed = _keyed_seed(key, "ticket", GENERATOR_VERSION, split, family, difficulty, position, attempt)
        rng = random.Random(seed)
        kind = rng.choice(pool.kinds)
        facts = _build(rng, pool, kind, split, ticket_id, position, family, difficulty, render=False)
        if pool_answer(facts) != target:  # the answer needs no message: skip writing one for a refused draw
            continue
        rng = random.Random(seed)
        ticket = _build(rng, pool, rng.choice(pool.kinds), split, ticket_id, position, family, difficulty)
        if not messages.inconsistencies(ticket):
            return ticket
    raise InconsistentTicket(
        f"no coherent {target} ticket for {family}/{difficulty} #{position} in {MAX_ATTEMPTS} draws"
    )


def _item(
    rng: random.Random, issue: IssueType, second: IssueType | None, pool: Pool, return_flagged: bool
) -> CatalogItem:
    def fits(c: CatalogItem) -> bool:
        for claim in (issue, second):
            if claim == "size_issue" and c.category not in ("apparel", "footwear"):
                return False
            if claim == "defective" and (c.perishable or c.category == "apparel"):
                return False
        return not (issue in RETURN_ISSUES and (c.hygiene or c.perishable) != return_flagged)

    candidates = [c for c in CATALOG if fits(c)]
    if pool.price == "around_threshold":  # items whose refund can land on either side of the escalation threshold
        candidates = [c for c in candidates if c.price[1] >= 320] or candidates
    if not candidates:  # no hygiene item fits these claims: the return is flagged final sale instead
        return _item(rng, issue, second, pool, return_flagged=False)
    return rng.choice(candidates)


def _price(rng: random.Random, item: CatalogItem, pool: Pool) -> float:
    lo, hi = item.price
    value = rng.uniform(lo, hi)
    if pool.price == "around_threshold" and hi > ESCALATION_THRESHOLD:  # either side of the escalation threshold
        value = rng.uniform(max(lo, 150), 299) if rng.random() < 0.35 else rng.uniform(305, max(hi, 420))
    return round(max(round(value) - rng.choice((0.0, 0.01, 0.05)), 5.0), 2)


def _build(
    rng: random.Random,
    pool: Pool,
    kind: tuple[IssueType, IssueType | None],
    split: Split,
    ticket_id: str,
    position: int,
    family: Family,
    difficulty: Difficulty,
    render: bool = True,
) -> Ticket:
    """One draw of a ticket's facts (and, when ``render``, its message: the draws before it are the same).

    Every part is drawn from ``rng`` in a fixed order (items, customer, dates, order, claim, message):
    the published splits are these draws, so the order of the calls below is part of the data."""
    issue, second = kind
    actual = rng.choice(pool.vague_actual) if issue == "vague" else None
    main = actual or issue  # the claim the facts are drawn for
    lines, claimed = _lines(rng, pool, main, second)
    customer = _customer(rng, pool)
    opened = _EPOCH + timedelta(days=rng.randint(0, 300))
    delivery = _delivery(rng, pool, main, opened)
    order = _order(rng, pool, main, lines, delivery)
    claim, hidden = _claim(rng, pool, issue, second, actual, claimed, delivery)
    subject, body = messages.render_message(rng, customer=customer, order=order, claim=claim) if render else ("", "")
    return Ticket(
        ticket_id=ticket_id,
        position=position,
        split=split,
        family=family,
        difficulty=difficulty,
        presentation=pool.presentation,
        opened_on=opened.isoformat(),
        customer=customer,
        order=order,
        claim=claim,
        hidden=hidden,
        subject=subject,
        message=body,
    )


def _product(rng: random.Random, item: CatalogItem, pool: Pool, in_stock: float, final_sale: bool | None) -> Product:
    """A catalogue item as sold; ``final_sale`` None draws the flag (an order's other items)."""
    return Product(
        sku=f"SKU-{rng.randint(10000, 99999)}",
        name=item.name,
        category=item.category,
        price=_price(rng, item, pool),
        in_stock=rng.random() < in_stock,
        final_sale=rng.random() < 0.2 if final_sale is None else final_sale,
        hygiene=item.hygiene,
        perishable=item.perishable,
        warranty_days=item.warranty_days,
    )


def _lines(rng: random.Random, pool: Pool, main: IssueType, second: IssueType | None) -> tuple[list[OrderLine], int]:
    """The order's lines, and which one the claim is about."""
    # P6 for returns: a final-sale flag, or (as often) a hygiene/perishable item.
    flagged_kind = rng.random() < pool.final_sale * 2 if main in RETURN_ISSUES else False
    hygiene_item = flagged_kind and rng.random() < 0.5
    item = _item(rng, main, second, pool, return_flagged=hygiene_item)
    hygiene_item = hygiene_item and (item.hygiene or item.perishable)
    product = _product(rng, item, pool, pool.in_stock, final_sale=flagged_kind and not hygiene_item)
    lines = [OrderLine(product=product, quantity=rng.choice((1, 1, 1, 2)) if pool.multi_item else 1)]
    if rng.random() < pool.multi_item:
        for _ in range(rng.randint(1, 2)):
            other = rng.choice(
                [c for c in CATALOG if c.name != item.name and all(c.name != line.product.name for line in lines)]
            )
            other_product = _product(rng, other, pool, 0.5, final_sale=None)
            lines.append(OrderLine(product=other_product, quantity=rng.choice((1, 1, 2))))
        rng.shuffle(lines)
    return lines, next(i for i, line in enumerate(lines) if line.product.sku == product.sku)


def _customer(rng: random.Random, pool: Pool) -> Customer:
    risk = rng.choice(("returns", "chargeback", "fraud")) if rng.random() < pool.high_risk else None
    return Customer(
        customer_id=f"C-{rng.randint(100000, 999999)}",
        name=f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        tier=rng.choice(("standard", "standard", "silver", "gold")),
        account_age_days=rng.randint(30, 3000),
        orders_12m=rng.randint(2, 30),
        returns_12m=rng.randint(HIGH_RISK_RETURNS, 12) if risk == "returns" else rng.randint(0, HIGH_RISK_RETURNS - 1),
        chargebacks=rng.randint(1, 3) if risk == "chargeback" else 0,
        fraud_flag=risk == "fraud",
    )


@dataclass(frozen=True)
class _Delivery:
    """Where the parcel is and when things happened, counted back from the day the ticket was opened."""

    carrier: str
    late: int  # days past the carrier's estimate
    found: bool | None  # delivered-but-missing parcels: whether the customer finds it
    days: int | None  # since delivery
    order_date: date
    delivery_date: date | None


def _carrier(rng: random.Random, pool: Pool, main: IssueType) -> tuple[str, int]:
    """The carrier status and the days past its estimate (only a missing parcel is not delivered)."""
    if main != "not_received":
        return "delivered", 0
    names, weights = zip(*pool.carriers, strict=False)
    carrier = rng.choices(names, weights)[0]
    if carrier == "late":
        return "in_transit", rng.randint(LATE_IN_TRANSIT_DAYS + 1, 30)
    if carrier == "in_transit":
        return carrier, rng.randint(0, LATE_IN_TRANSIT_DAYS)
    if carrier == "lost":
        return carrier, rng.randint(3, 20)
    return carrier, 0


def _delivery(rng: random.Random, pool: Pool, main: IssueType, opened: date) -> _Delivery:
    carrier, late = _carrier(rng, pool, main)
    if carrier != "delivered":
        order_date = opened - timedelta(days=rng.randint(6, 20) + late)
        return _Delivery(carrier, late, None, None, order_date, None)
    found = None
    if main == "not_received":
        days = rng.randint(1, 6)
        found = rng.random() < pool.found
    elif main == "defective":  # warranty claims reach far past the window
        days = rng.randint(1, W) if rng.random() < pool.in_window else rng.randint(*pool.late_days)
    else:
        days = (
            rng.randint(1, W)
            if rng.random() < pool.in_window
            else rng.randint(pool.late_days[0], min(pool.late_days[1], 150))
        )
    delivery_date = opened - timedelta(days=days)
    order_date = delivery_date - timedelta(days=rng.randint(2, 7))
    return _Delivery(carrier, late, found, days, order_date, delivery_date)


def _order(rng: random.Random, pool: Pool, main: IssueType, lines: list[OrderLine], d: _Delivery) -> Order:
    return Order(
        order_id=f"ORD-{rng.randint(10_000_000, 99_999_999)}",
        lines=tuple(lines),
        amount=round(sum(line.amount for line in lines), 2),
        order_date=d.order_date.isoformat(),
        delivery_date=d.delivery_date.isoformat() if d.delivery_date else None,
        days_since_delivery=d.days,
        carrier_status=d.carrier,
        days_past_estimate=d.late if d.carrier in ("in_transit", "lost") else 0,
        payment_method=rng.choice(("card", "card", "paypal", "gift_card")),
        charges=2 if main == "duplicate_charge" and rng.random() < pool.double_charge else 1,
    )


_RETURN_CLAIMS = ("changed_mind", "size_issue")


def _stated_use(rng: random.Random, pool: Pool, issue: IssueType) -> bool | None:
    """Whether the message says the item was used (None: it does not say)."""
    if issue in _RETURN_CLAIMS:
        unused, used, _ = pool.usage
        r = rng.random()
        return False if r < unused else True if r < unused + used else None
    return True if issue == "item_used" else None


def _images(rng: random.Random, pool: Pool, issue: IssueType, second: IssueType | None) -> bool:
    has_photo_claim = issue in ("damaged", "defective", "wrong_item") or second in ("damaged", "defective")
    images = has_photo_claim and issue != "wrong_item" and rng.random() < pool.photos
    if issue == "wrong_item" and second is None:
        images = rng.random() < 0.5  # not needed (P4), sometimes sent anyway
    return images


def _claim(
    rng: random.Random,
    pool: Pool,
    issue: IssueType,
    second: IssueType | None,
    actual: IssueType | None,
    claimed: int,
    d: _Delivery,
) -> tuple[Claim, HiddenFacts]:
    """What the customer says, and the facts only asking them reveals."""
    main = actual or issue
    tone = rng.choice(pool.tones)
    if issue == "vague":
        tone = rng.choice(("vague", "angry", "typos", "calm"))
    stated = _stated_use(rng, pool, issue)
    images = _images(rng, pool, issue, second)
    photo_claim = main in ("damaged", "defective") or second in ("damaged", "defective")
    hidden = HiddenFacts(
        photos_show=("normal_wear" if rng.random() < pool.wear else "damage") if photo_claim and not images else None,
        item_used=(rng.random() < 0.5) if stated is None and (main in _RETURN_CLAIMS) else None,
        parcel_found=d.found,
        actual_issue=actual,
    )
    remark: Remark | None = None
    if tone == "multi_issue":
        arrived = d.carrier == "delivered" and main != "not_received"  # "never arrived" cannot have come slowly
        remark = rng.choice(
            ("slow_delivery", "second_contact", "service") if arrived else ("second_contact", "service")
        )
    stated_days = None
    if d.days is not None and main != "not_received" and rng.random() < pool.stated_days:
        stated_days = rng.choice((2, 3, 5, 7, 10, 14, 21, 28, 40, 60, 90))  # recollection, independent of the records
    claim = Claim(
        issue=issue,
        line=claimed,
        images_provided=bool(images),
        item_used=stated,
        tone=tone,
        second_issue=second,
        remark=remark,
        stated_days_ago=stated_days,
    )
    return claim, hidden
