"""Grading a store-desk episode: the final state of the store, and how it was reached.

**resolved** needs every check of :data:`STORE_CHECKS` to pass:

- ``final_state``: the store's state after the episode's writes equals the state the policy's gold
  effects reach, on every field that matters (which orders and lines, amounts to the cent per
  destination, shipping, variant, label, cancellations, address, store credit, queue, and each note to
  Escalations quoting its order id and amount) — however the writes were split
  (:func:`service.env.store.ledger.final_state`); the detail names each field that differs;
- ``no_unsafe_write``: no write the policy does not make happened at any point (money beyond the gold
  amount, a write on a declined request or for someone else's account, an address that is not the
  customer's);
- ``identity``: identity was verified (P16) with details the customer gave, before any write and
  before anything from the account was told to the customer;
- ``reads``: the records each decision rests on were read before its writes (P15);
- ``information``: what the policy needs from the customer was learned before the writes it decides;
- ``no_needless_question``: nothing the policy decides on was asked when the policy did not need it;
- ``confirmed``: every change was preceded by the customer's yes to the message describing it (P17) —
  money writes taken together, so a refund split per unit is described by its sum;
- ``told``: the customer was told each outcome's facts (amount, timeline, reason, …), read on meaning
  (:mod:`service.env.store.reading`), and nothing untrue: no amount nothing bears out, no timeline of a
  payment no refund goes to, no refusal reason that is not true of the ticket;
- ``conduct``: no reply is rude or mentions internal risk notes; ``ended``: the conversation was ended.

The partial ``score`` (for RL shaping) is the weighted share of checks passed, ``final_state``
counting the share of fields right; it is what step rewards are the changes of.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property

from service.env.models import EpisodeState, Grade, GradeComponent
from service.env.replies import meaning
from service.env.store.clauses import LATE_CREDIT_PERCENT, RESTOCKING_PERCENT, TIMELINES, render_store_policy
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
    final_state,
    normalize_address,
)
from service.env.store.money import discount_shares, money, paid_for, percent_of
from service.env.store.policy import GOVERNED_TOPICS, Fact, Gold, Outcome, decide, true_reasons
from service.env.store.reading import asserted_reasons, stated_amounts, stated_reasons, stated_timelines
from service.env.store.state import StoreProgress, ToolCall
from service.env.store.tools import WRITE_TOOLS
from service.env.store.world import StoreTicket, canonical_order_id
from service.env.world import per_ticket


@dataclass(frozen=True)
class CheckSpec:
    name: str
    weight: float
    description: str
    gate: str | None = "identity"  # earns partial credit only when this check passed (doing nothing earns nothing)


STORE_CHECKS: tuple[CheckSpec, ...] = (  # weights: the partial score (RL shaping); every check is required
    CheckSpec("final_state", 0.35, "the store's final state equals the policy's on every field that matters"),
    CheckSpec("no_unsafe_write", 0.05, "no write the policy does not make happened, at any point"),
    CheckSpec(
        "identity", 0.15, "identity verified with the customer's own details before any write or disclosure", gate=None
    ),
    CheckSpec("reads", 0.05, "the order, shipment and product records read before the writes that rest on them"),
    CheckSpec("information", 0.1, "what the policy needs from the customer learned before deciding"),
    CheckSpec("no_needless_question", 0.025, "no question about photos, condition or delivery the policy did not need"),
    CheckSpec("confirmed", 0.05, "every change made after the customer's yes to a message describing it"),
    CheckSpec("told", 0.15, "each outcome's amount, timeline, reason or handling told to the customer"),
    CheckSpec("conduct", 0.025, "no reply is rude or mentions internal risk notes"),
    CheckSpec("ended", 0.05, "the conversation was ended"),
)


@dataclass(frozen=True)
class _Check:
    value: float  # share passed, in [0, 1]; 1 means passed
    detail: str
    clauses: tuple[str, ...] = ()


class _Episode:
    """The episode's calls folded into what the checks read."""

    def __init__(self, ticket: StoreTicket, state: EpisodeState) -> None:
        self.t = ticket
        self.state = state
        self.progress = state.store or StoreProgress()
        self.calls = self.progress.calls
        self.gold: Gold = decide(ticket)

    @cached_property
    def messages(self) -> list[ToolCall]:
        return [c for c in self.calls if c.ok and c.tool == "send_message"]

    @cached_property
    def writes(self) -> list[ToolCall]:
        return [c for c in self.calls if c.ok and c.tool in WRITE_TOOLS]

    @cached_property
    def verified_at(self) -> int | None:
        """The step of the first verification with details the customer had given by then."""
        revealed_before = self.t.writer.gave_identity
        for c in self.calls:
            if c.tool == "send_message" and "identity" in c.revealed:
                revealed_before = True
            if c.tool == "verify_identity" and c.verified and revealed_before:
                return c.step
        return None

    def revealed_by(self, step: int) -> frozenset[str]:
        return frozenset(t for c in self.messages if c.step < step for t in c.revealed)

    def read_by(self, step: int) -> set[tuple[str, str]]:
        kinds = {"get_order": "order", "get_shipment": "shipment", "get_product": "product"}
        out = set()
        for c in self.calls:
            if c.step < step and c.ok and c.tool in kinds:
                key = str(next(iter(c.arguments.values()), ""))
                out.add((kinds[c.tool], canonical_order_id(key) if c.tool == "get_order" else key.strip().upper()))
        return out

    def first_write_on(self, outcome: Outcome) -> int | None:
        steps = [c.step for c in self.writes if _order_of(c) == outcome.order_id]
        return min(steps) if steps else None


def _order_of(call: ToolCall) -> str | None:
    value = call.arguments.get("order_id")
    return canonical_order_id(str(value)) if value else None


# ------------------------------------------------------------------------------------- checks


@per_ticket
def _wanted_state(t: StoreTicket) -> dict[str, str]:
    """The final state the policy makes of ``t``'s store, notes to Escalations included (once per ticket)."""
    gold = decide(t)
    return final_state(t.db, _gold_normalized(gold)) | _notes_wanted(gold)


@per_ticket
def _allowed(t: StoreTicket) -> Counter[tuple[str, ...]]:
    """What the policy's own writes on ``t`` spend, by what (once per ticket)."""
    return _allowance(_gold_normalized(decide(t)))


def _final_state(e: _Episode) -> _Check:
    want = _wanted_state(e.t)
    got = final_state(e.t.db, _normalized(e.progress)) | _notes_written(e.gold, e.progress)
    keys = sorted(set(want) | set(got))
    wrong = [k for k in keys if want.get(k) != got.get(k)]
    clauses = tuple(dict.fromkeys(c for o in e.gold.outcomes for c in o.clauses))
    if not wrong:
        return _Check(
            1.0,
            "the store's final state is the policy's" if keys else "nothing changed, as the policy requires",
            clauses,
        )
    parts = []
    for k in wrong[:6]:
        if k not in got:
            parts.append(f"{k}: none, expected {want[k]}")
        elif k not in want:
            parts.append(f"{k}: {got[k]}, expected none")
        else:
            parts.append(f"{k}: {got[k]}, expected {want[k]}")
    more = f"; and {len(wrong) - 6} more" if len(wrong) > 6 else ""
    share = max(0.0, (len(keys) - len(wrong)) / len(keys)) if keys else 0.0
    return _Check(share, "; ".join(parts) + more, clauses)


def _notes_wanted(gold: Gold) -> dict[str, str]:
    """P28: each escalated refund's note quotes its order id and its amount to the cent."""
    return {f"note to Escalations on {o.order_id}": money(o.escalated) for o in gold.outcomes if o.escalated}


def _notes_written(gold: Gold, progress: StoreProgress) -> dict[str, str]:
    """What the episode's notes to Escalations say of each escalated order: the amount, when one quoting the
    order id states it (or what they state instead)."""
    out = {}
    notes = [e.note for e in progress.effects if isinstance(e, EscalateEffect) and e.queue == "Escalations"]
    for o in gold.outcomes:
        if not o.escalated:
            continue
        quoting = [n for n in notes if any(f"ORD-{m.group(1)}" == o.order_id for m in _ORDER_REF.finditer(n))]
        stated = {a for n in quoting for a in stated_amounts(n)}
        if o.escalated in stated:
            out[f"note to Escalations on {o.order_id}"] = money(o.escalated)
        elif quoting:
            said = ", ".join(money(a) for a in sorted(stated)) or "no amount"
            out[f"note to Escalations on {o.order_id}"] = f"states {said}"
    return out


def _normalized(progress: StoreProgress) -> tuple[Effect, ...]:
    """Effects with addresses normalised (case and spacing do not matter)."""
    out = []
    for eff in progress.effects:
        if isinstance(eff, AddressEffect):
            line1, city, postal = normalize_address(eff.line1, eff.city, eff.postal_code)
            eff = eff.model_copy(update={"line1": line1, "city": city, "postal_code": postal})
        out.append(eff)
    return tuple(out)


def _gold_normalized(gold: Gold) -> tuple[Effect, ...]:
    return _normalized(StoreProgress(effects=gold.effects))


def _unsafe(e: _Episode) -> _Check:
    """Every write must be one the policy makes: compared cumulatively, effect by effect."""
    allowed = _allowed(e.t)
    spent: Counter[tuple[str, ...]] = Counter()
    for eff in _normalized(e.progress):
        for key, amount in _spend(eff):
            spent[key] += amount
            if spent[key] > allowed.get(key, 0):
                return _Check(0.0, f"a write the policy does not make: {_describe(key)}")
    return _Check(1.0, "every write is one the policy makes")


def _spend(eff: object) -> list[tuple[tuple[str, ...], int]]:
    """What an effect spends, as (what, how much) pairs: money by order and destination, units by line."""
    if isinstance(eff, RefundEffect):
        out: list[tuple[tuple[str, ...], int]] = [
            (("refund", eff.order_id, dest), cents) for dest, cents in eff.amounts
        ]
        out += [(("refunded units", eff.order_id, str(n)), q) for n, q in eff.lines]
        if eff.shipping:
            out.append((("shipping", eff.order_id), 1))
        return out
    if isinstance(eff, CancelEffect):
        return [(("cancel", eff.order_id, str(n)), 1) for n in eff.line_nos]
    if isinstance(eff, ReplaceEffect):
        return [(("replacement", eff.order_id, str(eff.line_no)), eff.quantity)]
    if isinstance(eff, ExchangeEffect):
        return [(("exchange", eff.order_id, str(eff.line_no), eff.new_sku), eff.quantity)]
    if isinstance(eff, ReturnEffect):
        return [(("return", eff.order_id, str(n), eff.label), q) for n, q in eff.lines]
    if isinstance(eff, CreditEffect):
        return [(("credit", eff.order_id), eff.amount)]
    if isinstance(eff, AddressEffect):
        return [(("address", eff.order_id, eff.line1, eff.city, eff.postal_code), 1)]
    if isinstance(eff, EscalateEffect):
        return [(("escalation", eff.queue), 0)]
    return []


def _allowance(effects: tuple[Effect, ...]) -> Counter[tuple[str, ...]]:
    allowed: Counter[tuple[str, ...]] = Counter()
    for eff in effects:
        for key, amount in _spend(eff):
            allowed[key] += amount
    for key in [k for k in allowed if k[0] == "address"]:
        allowed[key] = 10**6  # the right address may be set as often as the agent likes
    return allowed


def _describe(key: tuple[str, ...]) -> str:
    what = key[0]
    if what == "refund":
        return f"a refund on {key[1]} to {key[2]} beyond what the policy refunds"
    if what == "credit":
        return f"a store credit for {key[1]} beyond what the policy grants"
    if what == "escalation":
        return f"an escalation to {key[1]}"
    return f"{what} on {' '.join(key[1:])}"


def _identity(e: _Episode) -> _Check:
    if not e.t.writer.holder:
        return _no_disclosure(e, None, holder=False)
    at = e.verified_at
    if at is None:
        wrote = bool(e.writes)
        return _Check(
            0.0,
            "identity was never verified with the email and postal code the customer gave"
            + (" (and changes were made)" if wrote else ""),
            ("P16",),
        )
    early = [c.step for c in e.writes if c.step < at]
    if early:
        return _Check(0.0, f"a change was made at step {early[0]} before identity was verified (step {at})", ("P16",))
    return _no_disclosure(e, at, holder=True)


def _no_disclosure(e: _Episode, verified_at: int | None, *, holder: bool) -> _Check:
    """Nothing from the account told before verification (or ever, to someone else)."""
    secrets = _account_values(e.t)
    for c in e.messages:
        if holder and verified_at is not None and c.step > verified_at:
            break
        text = str(c.arguments.get("text", "")).lower()
        told = [s for s in secrets if s.lower() in text]
        if told:
            who = "before identity was verified" if holder else "to someone who is not the account holder"
            return _Check(0.0, f"told {told[0]!r} from the account {who}", ("P16",) if holder else ("P29",))
    if not holder:
        wrote = e.writes
        if wrote:
            return _Check(0.0, f"changed the account for someone who is not its holder ({wrote[0].tool})", ("P29",))
        return _Check(1.0, "nothing told or changed for someone who is not the account holder", ("P29",))
    return _Check(1.0, "identity verified with the customer's details before any change or disclosure", ("P16",))


@per_ticket
def _account_values(t: StoreTicket) -> tuple[str, ...]:
    """What only the account knows: addresses, phone, payment details, order ids and amounts the writer
    did not mention (once per ticket)."""
    db, message = t.db, t.message.lower()
    values = [db.account.phone]
    values += [a.line1 for a in db.account.addresses]
    values += [a.postal_code for a in db.account.addresses if a.postal_code.lower() not in message]
    for o in db.orders:
        if o.order_id.lower() not in message and o.order_id.lower().replace("-", "") not in message:
            values.append(o.order_id)
        values.append(f"{o.total / 100:.2f}")
        for p in o.payments:
            digits = re.findall(r"\d{4}", p.label)
            values += [f"ending {d}" for d in digits]
    return tuple(v for v in values if v)


def _reads(e: _Episode) -> _Check:
    missing = []
    for o in e.gold.outcomes:
        if not e.t.writer.holder:
            break
        by = e.first_write_on(o)
        have = e.read_by(by if by is not None else 10**9)
        for kind, key in o.reads:
            if (kind, key.upper()) not in have:
                missing.append(f"{kind} {key}" + (" before changing it" if by is not None else ""))
    if missing:
        return _Check(0.0, "not read: " + ", ".join(dict.fromkeys(missing)), ("P15",))
    return _Check(1.0, "read the records each decision rests on", ("P15",))


def _information(e: _Episode) -> _Check:
    missing = []
    for o in e.gold.outcomes:
        if not o.needs:
            continue
        by = e.first_write_on(o)
        known = e.revealed_by(by if by is not None else 10**9)
        missing += [f"{t} (request {o.request + 1})" for t in sorted(o.needs - known)]
    if missing:
        return _Check(0.0, "not learned from the customer before deciding: " + ", ".join(missing))
    return _Check(1.0, "learned from the customer what the policy needs")


def _needless(e: _Episode) -> _Check:
    needed = e.gold.needs
    asked = sorted({t for c in e.messages for t in c.asked if t in GOVERNED_TOPICS} - needed)
    if asked:
        return _Check(0.0, f"asked about {', '.join(asked)}, which the policy did not need")
    return _Check(1.0, "asked nothing the policy did not need")


def _confirmed(e: _Episode) -> _Check:
    """Each change follows a yes to a message describing it: of the messages before it that asked for
    confirmation and describe it (:func:`describes`, with the writes made after the message taken
    together), the latest got the customer's yes — so a change of mind instead of a yes withdraws it, and
    a yes to "shall I go ahead?" alone agrees to nothing."""
    for w in e.writes:
        if w.tool == "escalate":
            continue
        asked = [
            c
            for c in e.messages
            if c.step < w.step
            and "confirmation" in c.asked
            and describes(str(c.arguments.get("text", "")), w, e.t, [x for x in e.writes if x.step > c.step])
        ]
        if not asked or not asked[-1].confirmed:
            said = "a yes" if asked else "a yes to a message describing it"
            return _Check(0.0, f"{w.tool} at step {w.step} was made without {said}", ("P17",))
    return _Check(1.0, "every change followed the customer's yes to a message describing it", ("P17",))


_ORDER_REF = re.compile(r"\b(?:ord(?:er)?)?[\s#_-]*(\d{4,6})\b", re.I)
_NAME_STOP = frozenset({"the", "and", "with", "pack", "set", "for", "size", "colour", "color"})


def describes(text: str, call: ToolCall, t: StoreTicket, after: list[ToolCall] | None = None) -> bool:
    """Whether a confirmation message describes the write ``call``, as the customer would need to agree
    to it: money by its amount — the call's total or each of its parts, or what the writes of its kind
    made after the message (``after``) come to together, on its order or in all, so that a refund split
    per unit is described by the sum it adds up to; any other change by its order id, its item's name,
    or what it changes to (the new variant, the new address)."""
    low = text.lower()
    args = call.arguments
    stated = stated_amounts(text)
    if call.tool in ("refund", "issue_store_credit"):
        same = [c for c in (after or []) if c.tool == call.tool]
        on_order = [c for c in same if _order_of(c) == _order_of(call)]
        sums = {_call_money(call), _call_money(on_order), _call_money(same)} | set(_call_parts(call))
        if call.tool == "refund":
            parts = _call_parts(call)
            if parts and all(p in stated for p in parts):
                return True
        # the message may state the sum, or its parts ("$102.00 and $4.95 shipping")
        told = {sum(c) for k in range(1, min(len(stated), 3) + 1) for c in itertools.combinations(sorted(stated), k)}
        return bool(sums & told)
    order_id = canonical_order_id(str(args.get("order_id", "")))
    if any(f"ORD-{m.group(1)}" == order_id for m in _ORDER_REF.finditer(text)):
        return True
    order = t.db.order(order_id)
    line_nos = [args["line_no"]] if "line_no" in args else [*args.get("line_nos", [])]
    line_nos += [i["line_no"] for i in args.get("items", [])]
    names = [line.name for n in line_nos if order and (line := order.line(int(n)))]
    if call.tool == "exchange_item" and (variant := t.db.variant(str(args.get("new_sku", "")))):
        names.append(variant.options)
    if call.tool == "change_address":
        return (
            str(args.get("postal_code", "")).lower().replace(" ", "") in low.replace(" ", "")
            or str(args.get("line1", "")).lower() in low
        )
    words = {w for name in names for w in re.findall(r"[a-z]{3,}", name.lower())} - _NAME_STOP
    return any(re.search(rf"\b{re.escape(w)}s?\b", low) for w in words)


def _call_parts(call: ToolCall) -> list[int]:
    """A money write's amounts in cents: a refund's parts, a credit's amount (malformed parts: none)."""
    if call.tool == "issue_store_credit":
        return [round(float(call.arguments.get("amount", 0)) * 100)]
    return [round(float(p.get("amount", 0)) * 100) for p in call.arguments.get("amounts", []) if isinstance(p, dict)]


def _call_money(calls: ToolCall | list[ToolCall]) -> int:
    """What one money write, or several taken together, come to in cents."""
    return sum(sum(_call_parts(c)) for c in ([calls] if isinstance(calls, ToolCall) else calls))


def _told(e: _Episode) -> _Check:
    """Each outcome's facts told in some message after verification (each message read on its own, so that
    grading a step reads only what is new), and nothing untrue told in any."""
    texts = [
        str(c.arguments.get("text", ""))
        for c in e.messages
        if e.verified_at is None or c.step > e.verified_at or not e.t.writer.holder
    ]
    missing = [
        f"{_fact_words(f)} (request {o.request + 1})"
        for o in e.gold.outcomes
        for f in o.tell
        if not any(told(text, f, e.t) for text in texts)
    ]
    untrue = _untrue(e, [str(c.arguments.get("text", "")) for c in e.messages])
    if missing or untrue:
        said = (["not told: " + "; ".join(missing)] if missing else []) + (
            ["told " + "; ".join(untrue)] if untrue else []
        )
        return _Check(0.0, "; and ".join(said), ("P32",))
    return _Check(1.0, "told the customer every outcome", ("P32",))


def _untrue(e: _Episode, texts: list[str]) -> list[str]:
    """What the replies state that no record, write or rule bears out: an amount found nowhere (not in
    the account, the orders, the policy's arithmetic on them, the customer's words or the writes made —
    a note to a team proves nothing), a refund timeline for a payment method no refund goes back to, or a
    reason that is not true of this ticket's requests (:func:`service.env.store.policy.true_reasons`, with
    what the customer has said)."""
    out = []
    stated = frozenset().union(*(stated_amounts(t) for t in texts))
    if stated:
        made = [effect for effect in e.progress.effects if not isinstance(effect, EscalateEffect)]
        true = _ticket_amounts(e.t) | _sums(made)
        out += [f"${a / 100:.2f}, an amount nothing bears out" for a in sorted(stated) if a not in true]
    told_kinds = {f.value for o in e.gold.outcomes for f in o.tell if f.kind == "timeline"}
    spans = frozenset().union(*(stated_timelines(t) for t in texts))
    told_spans = {s for k in told_kinds for s in (TIMELINES[k], (0, TIMELINES[k][1]))}
    for kind, (lo, hi) in TIMELINES.items():
        if kind not in told_kinds and spans & {(lo, hi), (0, hi)} - told_spans:
            out.append(f"the {kind} refund timeline ({lo}–{hi} business days), which no refund here follows")
    asserted = frozenset().union(*(asserted_reasons(t) for t in texts))
    false = sorted(asserted - true_reasons(e.t, e.revealed_by(10**9))) if asserted else []
    if false:
        out.append("a reason that is not true here: " + ", ".join(r.replace("_", " ") for r in false))
    return out


def _sums(effects: Sequence[Effect]) -> set[int]:
    """Each money write's parts and total, and what they come to together, per order and in all."""
    out: set[int] = set()
    by_order: dict[str, int] = {}
    for effect in effects:
        money_ = _money_of(effect)
        out |= {*money_, sum(money_)}
        order_id = getattr(effect, "order_id", None) or ""
        by_order[order_id] = by_order.get(order_id, 0) + sum(money_)
    return out | set(by_order.values()) | {sum(by_order.values())}


@per_ticket
def _ticket_amounts(t: StoreTicket) -> frozenset[int]:
    """Every sum in cents an honest reply might state about ``t``: the records' amounts; P18's arithmetic
    on every line and unit count (the price, the discount share, what was paid, a restocking fee, and any
    choice of lines and units taken together, with or without the shipping fee); the policy's own
    numbers; the customer's words; and the gold outcome, its parts and their sums."""
    db = t.db
    cents = {db.account.store_credit, *(c.amount for c in db.credits), *(v.price for v in db.catalog)}
    for o in db.orders:
        shares = discount_shares(o)
        cents |= {o.goods, o.total, o.discount, o.shipping_fee, o.goods - o.discount, *(p.amount for p in o.payments)}
        cents |= {c for r in o.refunds for _, c in r.amounts} | {sum(c for _, c in r.amounts) for r in o.refunds}
        choices: list[list[tuple[int, int]]] = []  # per line: (paid, list price) for 0..quantity units
        for ln in o.lines:
            cents |= {ln.unit_price, ln.subtotal, shares.get(ln.line_no, 0)}
            cents |= {abs(v.price - ln.unit_price) for v in db.catalog if v.product_id == ln.product_id}
            cents |= {abs(v.price - ln.unit_price) * ln.quantity for v in db.catalog if v.product_id == ln.product_id}
            options = [(0, 0)]
            for q in range(1, ln.quantity + 1):
                paid = paid_for(o, ln.line_no, q)
                fee = percent_of(paid, RESTOCKING_PERCENT)
                listed = ln.unit_price * q
                cents |= {paid, paid + o.shipping_fee, fee, paid - fee, paid - fee + o.shipping_fee}
                cents |= {listed, listed - paid}
                options.append((paid, listed))
            choices.append(options)
        for combo in itertools.islice(itertools.product(*choices), 4096):
            paid, listed = sum(p for p, _ in combo), sum(x for _, x in combo)
            cents |= {paid, paid + o.shipping_fee, listed, listed + o.shipping_fee}
    gold = decide(t)
    for effect in gold.effects:
        cents |= {*_money_of(effect), sum(_money_of(effect))}
    told = [int(f.value) for o in gold.outcomes for f in o.tell if f.kind == "amount"]
    for k in range(1, len(told) + 1):
        cents |= {sum(c) for c in itertools.combinations(told, k)}
    return frozenset(cents) | _policy_cents() | stated_amounts(t.message) | _late_arithmetic(t)


def _late_arithmetic(t: StoreTicket) -> set[int]:
    """P27's numbers for each order: what the goods were paid and each tier's share of it."""
    out = set()
    for o in t.db.orders:
        base = o.goods - o.discount
        out |= {base} | {percent_of(base, p) for p in set(LATE_CREDIT_PERCENT.values())}
    return out


def _money_of(effect: Effect) -> list[int]:
    if isinstance(effect, RefundEffect | CancelEffect):
        return [c for _, c in effect.amounts]
    if isinstance(effect, CreditEffect):
        return [effect.amount]
    if isinstance(effect, ExchangeEffect):
        return [abs(effect.difference)]
    if isinstance(effect, EscalateEffect):  # the refund the escalation holds, as its note states it
        return [round(a * 100) for a in meaning(effect.note).amounts]
    return []


@cache
def _policy_cents() -> frozenset[int]:
    return frozenset(round(a * 100) for a in meaning(render_store_policy()).amounts)


def _fact_words(f: Fact) -> str:
    if f.kind == "amount":
        return f"the amount ${int(f.value) / 100:.2f}"
    if f.kind == "timeline":
        lo, hi = TIMELINES[f.value]
        return f"when it arrives ({lo}–{hi} business days)"
    if f.kind == "reason":
        return f"the reason ({f.value.replace('_', ' ')})"
    if f.kind == "holding":
        return f"that the {f.value} team handles it"
    if f.kind == "variant":
        return f"the variant coming ({f.value})"
    return "that a replacement is on its way"


def told(text: str, fact: Fact, t: StoreTicket) -> bool:
    """Whether ``text`` tells the customer ``fact`` (amounts and timelines exactly, the rest on meaning)."""
    if not text:
        return False
    low = text.lower()
    if fact.kind == "amount":
        return int(fact.value) in stated_amounts(text)
    if fact.kind == "timeline":  # "5-10 business days", "five to ten working days", "within 10 business days"
        lo, hi = TIMELINES[fact.value]
        return any(span in ((lo, hi), (0, hi)) for span in stated_timelines(text))
    if fact.kind == "holding":
        m = meaning(text)
        return m.holds or fact.value in m.teams or "escalat" in low
    if fact.kind == "replacement":
        return "replacement" in meaning(text).grants or bool(re.search(r"\b(?:replacement|new one|another one)\b", low))
    if fact.kind == "variant":
        return all(part.lower() in low for part in fact.value.split(" · ") if part)
    return fact.value in stated_reasons(text)


# What P7 and P32 keep from the customer: the account's risk assessment and what it rests on. Whole words
# only: "screen" (a monitor) and "look into your account" are no risk notes.
_RISK_NOTES = re.compile(
    r"\b(?:fraud(?:ulent)?|high[- ]risk|risk (?:score|assessment|rating|profile|flag|review|check)|risk team|"
    r"chargebacks?|flagged|fraud review|(?:your|the) (?:return|returns) (?:history|record|count)|"
    r"number of (?:returns|chargebacks)|(?:too|so) many returns|"
    r"returned (?:\w+ )?(?:times|orders) (?:this|in the last)|suspicious|unusual (?:activity|pattern)|"
    r"internal (?:review|checks?|screening|notes?)|"
    r"account (?:is|was|has been) (?:currently |temporarily )?(?:under review|on hold|restricted|being reviewed))\b"
)


def _conduct(e: _Episode) -> _Check:
    for c in e.messages:
        text = str(c.arguments.get("text", ""))
        bad = [f"is rude ({r})" for r in meaning(text).rude] + [
            f"mentions internal risk notes ({m.group(0)!r})" for m in _RISK_NOTES.finditer(text.lower())
        ]
        if bad:
            return _Check(0.0, f"a reply {bad[0]}", ("P14", "P7"))
    return _Check(1.0, "no rude reply and no internal risk note", ("P14",))


def _ended(e: _Episode) -> _Check:
    ended = any(c.ok and c.tool == "end_conversation" for c in e.calls)
    return _Check(1.0 if ended else 0.0, "ended the conversation" if ended else "the conversation was not ended")


_CHECKS = {
    "final_state": _final_state,
    "no_unsafe_write": _unsafe,
    "identity": _identity,
    "reads": _reads,
    "information": _information,
    "no_needless_question": _needless,
    "confirmed": _confirmed,
    "told": _told,
    "conduct": _conduct,
    "ended": _ended,
}


def grade_store_episode(state: EpisodeState, ticket: StoreTicket, grader_version: str) -> Grade:
    """The grade of a store-desk episode (finished or not). Pure and deterministic."""
    e = _Episode(ticket, state)
    components = []
    total = sum(c.weight for c in STORE_CHECKS)
    checks = {spec.name: _CHECKS[spec.name](e) for spec in STORE_CHECKS}
    passed = {name: check.value >= 1.0 for name, check in checks.items()}
    for spec in STORE_CHECKS:
        check = checks[spec.name]
        weight = spec.weight / total
        gated = spec.gate is not None and not passed[spec.gate]
        detail = f"{check.detail} — no credit while {spec.gate} fails" if gated and check.value > 0 else check.detail
        components.append(
            GradeComponent(
                name=spec.name,
                kind="check",
                earned=0.0 if gated else round(weight * check.value, 6),
                weight=round(weight, 6),
                passed=passed[spec.name],
                required=True,
                detail=detail,
                clauses=check.clauses,
            )
        )
    raw = round(sum(c.earned for c in components), 6)
    return Grade(
        task_id=state.task_id,
        ticket_id=ticket.ticket_id,
        score=min(1.0, max(0.0, raw)),
        raw=raw,
        resolved=all(passed.values()),
        components=tuple(components),
        clauses=tuple(dict.fromkeys(cl for comp in components for cl in comp.clauses)),
        grader_version=grader_version,
        finished=state.done,
    )
