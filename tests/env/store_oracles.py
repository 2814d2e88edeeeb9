"""Test-only players of the store desk: the gold oracle, which plays the policy's gold effects with the
whole procedure (identity, reads, questions, confirmation, telling, ending). It proves that every
generated conversation can be resolved and that the backend accepts every gold write."""

from __future__ import annotations

import re
from datetime import date
from functools import cache
from typing import Any

from service.env import Dataset
from service.env.models import Action, Observation
from service.env.store import ledger as L
from service.env.store import messages as text_bank
from service.env.store.agents import describe_plan
from service.env.store.generator import _COLOURS, _SIZES, _plural
from service.env.store.policy import Fact, Gold, decide
from service.env.store.world import (
    Account,
    Address,
    Line,
    Order,
    PastCredit,
    PastRefund,
    PastReplacement,
    PastReturn,
    Payment,
    Request,
    Shipment,
    StoreDB,
    StoreHidden,
    StoreTicket,
    TrackingEvent,
    Variant,
    Writer,
)

REASON_TEXT = {
    "already_settled": "our records show those items were already refunded or replaced before",
    "window": "this is outside our 30-day return window",
    "used": "the item has been used, and only unused items can be returned",
    "final_sale": "final-sale, hygiene and perishable items cannot be returned",
    "warranty": "the warranty on it has ended",
    "normal_wear": "the photos show ordinary wear and tear rather than a defect, so we can't accept the claim",
    "in_transit": "your parcel is still in transit and on its way to you, so we can't refund it yet",
    "parcel_found": "you have found the parcel, so there is nothing to refund",
    "not_charged_twice": "the payment record shows the order was charged once, so there is no duplicate to refund",
    "unverifiable": "we are unable to verify the claim, so we cannot approve it",
    "shipped": "it has already shipped",
    "not_late": "the tracking shows it arrived only two days after the estimate, which is not late enough for a credit",
    "already_credited": "a goodwill credit was already given for this order",
    "not_holder": "only the account holder can make changes, so they will need to contact us themselves",
    "original_payment": "refunds can only go back to the original payment method",
}
TIMELINE_TEXT = {
    "card": "It will reach your card in 5-10 business days.",
    "paypal": "It will reach your PayPal account in 3-5 business days.",
}


def fact_sentence(f: Fact) -> str:
    if f.kind == "amount":
        return f"The amount is ${int(f.value) / 100:.2f}."
    if f.kind == "timeline":
        return TIMELINE_TEXT[f.value]
    if f.kind == "reason":
        return "Unfortunately " + REASON_TEXT[f.value] + "."
    if f.kind == "holding":
        return f"I have passed this to our {f.value} team, who will be in touch."
    if f.kind == "replacement":
        return "A replacement is on its way."
    return f"The new one ({f.value}) is on its way."


def tell_text(gold: Gold) -> str:
    return "Thank you for your patience. " + " ".join(fact_sentence(f) for o in gold.outcomes for f in o.tell)


def write_call(effect: object, customer_id: str) -> tuple[str, dict[str, Any]]:
    """The tool call that makes ``effect``."""
    if isinstance(effect, L.RefundEffect):
        return "refund", {
            "order_id": effect.order_id,
            "items": [{"line_no": n, "quantity": q} for n, q in effect.lines],
            "include_shipping": effect.shipping,
            "amounts": [{"to": d, "amount": c / 100} for d, c in effect.amounts],
        }
    if isinstance(effect, L.ReplaceEffect):
        return "replace_item", {"order_id": effect.order_id, "line_no": effect.line_no, "quantity": effect.quantity}
    if isinstance(effect, L.ExchangeEffect):
        args = {
            "order_id": effect.order_id,
            "line_no": effect.line_no,
            "new_sku": effect.new_sku,
            "quantity": effect.quantity,
        }
        return "exchange_item", {**args, **({"payment_id": effect.settle_to} if effect.settle_to else {})}
    if isinstance(effect, L.ReturnEffect):
        return "open_return", {
            "order_id": effect.order_id,
            "label": effect.label,
            "items": [{"line_no": n, "quantity": q} for n, q in effect.lines],
        }
    if isinstance(effect, L.CancelEffect):
        return "cancel_items", {"order_id": effect.order_id, "line_nos": list(effect.line_nos)}
    if isinstance(effect, L.AddressEffect):
        return "change_address", {
            "order_id": effect.order_id,
            "line1": effect.line1,
            "city": effect.city,
            "postal_code": effect.postal_code,
        }
    if isinstance(effect, L.CreditEffect):
        return "issue_store_credit", {
            "customer_id": customer_id,
            "order_id": effect.order_id,
            "amount": effect.amount / 100,
            "reason": effect.reason,
        }
    assert isinstance(effect, L.EscalateEffect)
    return "escalate", {"queue": effect.queue, "note": effect.note, "order_id": effect.order_id}


def gold_plan(t: StoreTicket) -> list[tuple[str, dict[str, Any]]]:
    """Every call of a perfect conversation, from the gold (the customer's replies are predictable)."""
    gold, account = decide(t), t.db.account
    calls: list[tuple[str, dict[str, Any]]] = []
    if not t.writer.gave_identity:
        calls.append(
            (
                "send_message",
                {
                    "text": "Could you give me the email address and postcode on the account?",
                    "asking_for": ["identity"],
                },
            )
        )
        if t.hidden.wrong_postcode_first:
            calls.append(
                (
                    "send_message",
                    {"text": "That postcode does not match: could you check it?", "asking_for": ["identity"]},
                )
            )
    calls.append(("find_customer", {"email": account.email}))
    calls.append(
        (
            "verify_identity",
            {
                "customer_id": account.customer_id,
                "email": account.email,
                "postal_code": account.addresses[0].postal_code,
            },
        )
    )
    tool = {
        "order": ("get_order", "order_id"),
        "shipment": ("get_shipment", "shipment_id"),
        "product": ("get_product", "product_id"),
    }
    for o in gold.outcomes:
        for kind, key in o.reads:
            calls.append((tool[kind][0], {tool[kind][1]: key}))
    if gold.needs:
        calls.append(("send_message", {"text": "A few questions before I decide.", "asking_for": sorted(gold.needs)}))
    changes = [e for e in gold.effects if not isinstance(e, L.EscalateEffect)]
    if t.writer.holder and changes:
        plan = describe_plan([write_call(e, account.customer_id) for e in changes])
        first = plan
        if any(r.mind_change for r in t.requests):  # what the customer asked for first: they change their mind
            asked = t.model_copy(
                update={"requests": tuple(r.model_copy(update={"mind_change": None}) for r in t.requests)}
            )
            before = [e for e in decide(asked).effects if not isinstance(e, L.EscalateEffect)]
            first = describe_plan([write_call(e, account.customer_id) for e in before])
        calls.append(
            (
                "send_message",
                {"text": f"Here is what I will do: {first}. Shall I go ahead?", "asking_for": ["confirmation"]},
            )
        )
        if any(r.mind_change for r in t.requests):
            calls.append(
                (
                    "send_message",
                    {"text": f"Understood. Instead I will {plan}. Shall I go ahead?", "asking_for": ["confirmation"]},
                )
            )
    calls += [write_call(e, account.customer_id) for e in gold.effects]
    calls.append(("send_message", {"text": tell_text(gold)}))
    calls.append(("end_conversation", {}))
    return calls


class GoldOracle:
    """Plays :func:`gold_plan` (reads the gold: for tests only)."""

    def __init__(self, ticket_id: str, dataset: Dataset) -> None:
        self.plan = gold_plan(dataset.store_ticket(ticket_id))

    def act(self, obs: Observation) -> Action:
        name, args = self.plan.pop(0) if self.plan else ("end_conversation", {})
        return Action(tool=name, arguments=args)


# ------------------------------------------------------------------------- the observable oracle
#
# It sees what any agent sees — the request's text, the customer's answers, the records its own reads
# return, the policy — and nothing else: it recognises each request by the phrase slots the messages are
# composed from (compiled to regular expressions), rebuilds the store's records from its reads, and runs
# the policy engine on them. That it resolves every public ticket shows the gold follows from what an
# agent can see.

_ANY = r"[^.!?\n]+?"
_WHEN = (  # service.env.store.messages.ago's phrases
    r"(?:yesterday|\w+ days ago|last week|a couple of weeks ago|about three weeks ago|about a month ago|"
    r"a month or two ago|a few months ago)"
)
# What each value looks like, so that a value never swallows the words around it.
_VALUE_PATTERNS = {
    "item": r"(?:the|everything|all|both|\w+ of the)\b[^.!?\n]*?",
    "order_ref": r"(?:(?:my|the) )?order\b[^.!?\n]*?",
    "wrong_thing": r"(?:a|an|some)\b[^.!?\n]*?",
    "item_short": r"\w[^.!?\n]*?",
    "new_address": r"\d+ [^.!?\n]*?[A-Z]{1,2}\d{1,2} \d[A-Z]{2}",
    "claimed_days": r"\w+",
    "when": _WHEN,
    "bought": _WHEN,
    "charge": r"\$[\d,]+\.\d\d",
    "email": r"[\w.+-]+@[\w-]+\.[\w.]+",
    "postal": r"[A-Z]{1,2}\d{1,2} \d[A-Z]{2}",
    "old_postal": r"[A-Z]{1,2}\d{1,2} \d[A-Z]{2}",
    "order_id": r"ORD-\d{5}",
    "it": r"(?:it|they)",
    "them": r"(?:it|them)",
    "its": r"(?:its|their)",
    "is": r"(?:is|are)",
    "was": r"(?:was|were)",
    "has": r"(?:has|have)",
    "does": r"(?:does|do)",
    "this": r"(?:this|these)",
    "used": r"(?:used|worn)",
    "use": r"(?:use|wear)",
}


def _to_regex(template: str, slots: dict[str, tuple[str, ...]], counter: list[int], depth: int = 0) -> str:
    """A phrase template as a regular expression: alternations and sub-slots as alternatives, values as
    lazy groups named ``<value>_<n>``."""
    out, i = [], 0
    while i < len(template):
        ch = template[i]
        if ch == "[":
            end = _matching(template, i, "[", "]")
            alts = _split_alts(template[i + 1 : end])
            out.append("(?:" + "|".join(_to_regex(a, slots, counter, depth) for a in alts) + ")")
            i = end + 1
        elif ch == "<":
            end = template.index(">", i)
            name = template[i + 1 : end]
            optional = name.endswith("?")
            name = name.rstrip("?")
            body = "|".join(_to_regex(v, slots, counter, depth + 1) for v in slots[name]) if depth < 6 else ".*?"
            out.append(f"(?:{body})" + ("?" if optional else ""))
            i = end + 1
        elif ch == "{":
            end = template.index("}", i)
            counter[0] += 1
            name = template[i + 1 : end]
            out.append(f"(?P<{name}_{counter[0]}>{_VALUE_PATTERNS.get(name, _ANY)})")
            i = end + 1
        elif ch in " \n":
            out.append(r"\s*")
            i += 1
        else:
            out.append(re.escape(ch))
            i += 1
    return "".join(out)


def _matching(text: str, start: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(start, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {open_} in {text!r}")


def _split_alts(body: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in body:
        if ch in "[<":
            depth += 1
        elif ch in "]>":
            depth -= 1
        if ch == "|" and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


@cache
def slot_patterns(bank_name: str, slot: str) -> tuple[re.Pattern[str], ...]:
    """Each variant of a slot as a compiled, case-insensitive pattern."""
    slots = dict(text_bank.bank(bank_name))
    out = []
    for variant in slots[slot]:
        counter = [0]
        out.append(re.compile(r"(?<![\w])" + _to_regex(variant, slots, counter), re.I | re.S))  # whole words
    return tuple(out)


def has_slot(bank_name: str, slot: str, text: str) -> bool:
    return find_slot(bank_name, slot, text) is not None


def find_slot(bank_name: str, slot: str, text: str) -> dict[str, str] | None:
    """The values of the first variant of ``slot`` found in ``text`` (None when none is)."""
    for pattern in slot_patterns(bank_name, slot):
        m = pattern.search(text)
        if m is not None:
            values: dict[str, str] = {}
            for name, value in m.groupdict().items():
                if value is not None:
                    values.setdefault(name.rsplit("_", 1)[0], value)
            return values
    return None


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
_POSTCODE = re.compile(r"\b[A-Z]{1,2}\d{1,2} \d[A-Z]{2}\b")
_ORDER_ID = re.compile(r"\bord-?(\d{5})\b", re.I)
_KINDS = (
    "damaged",
    "defective",
    "wrong_item",
    "missing",
    "late",
    "change_of_mind",
    "exchange",
    "duplicate_charge",
    "cancel",
    "address",
)


def _cents(dollars: float) -> int:
    return round(dollars * 100)


_MONTHS = {date(2026, m, 1).strftime("%B").lower(): m for m in range(1, 13)}
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}


def _dates_in(text: str) -> list[tuple[int, int]]:
    """(month, day) pairs a writer's date phrases name: '3 March', 'March 3', 'the 3rd of March', '3/3'."""
    low, out = text.lower(), []
    for m in re.finditer(r"(\d{1,2})(?:st|nd|rd|th)?(?: of)? ([a-z]+)", low):
        if m.group(2) in _MONTHS:
            out.append((_MONTHS[m.group(2)], int(m.group(1))))
    for m in re.finditer(r"([a-z]+) (\d{1,2})\b", low):
        if m.group(1) in _MONTHS:
            out.append((_MONTHS[m.group(1)], int(m.group(2))))
    out += [(int(m.group(2)), int(m.group(1))) for m in re.finditer(r"\b(\d{1,2})/(\d{1,2})\b", low)]
    return out


class ObservableOracle:
    """Resolves a store conversation from what it sees (see the section's comment). For tests only."""

    def __init__(self) -> None:
        self.queue: list[tuple[str, dict[str, Any]]] = []
        self.customer: dict[str, Any] | None = None
        self.orders: dict[str, dict[str, Any]] = {}
        self.shipments: dict[str, dict[str, Any]] = {}
        self.products: dict[str, dict[str, Any]] = {}
        self.verified = False
        self.identity_asks = 0
        self.phase = "start"
        self.requests: list[Request] = []
        self.answers: list[str] = []
        self.gold: Gold | None = None
        self.confirmations = 0

    # ------------------------------------------------------------------ bookkeeping

    def act(self, obs: Observation) -> Action:
        self._remember(obs)
        if not self.queue:
            getattr(self, f"_{self.phase}")(obs)
        name, args = self.queue.pop(0)
        return Action(tool=name, arguments=args)

    def _remember(self, obs: Observation) -> None:
        result = obs.tool_result if isinstance(obs.tool_result, dict) else {}
        out = result.get("result") or {}
        tool = result.get("tool")
        if not result.get("ok"):
            return
        if tool == "verify_identity":
            self.verified = bool(out.get("verified"))
        elif tool == "get_customer":
            self.customer = out
        elif tool == "get_order":
            self.orders[out["order_id"]] = out
        elif tool == "get_shipment":
            self.shipments[out["shipment_id"]] = out
        elif tool == "get_product":
            self.products[out["product_id"]] = out
        elif tool == "send_message":
            self.answers.append(out["customer_reply"])

    def _say(self, text: str, *topics: str) -> None:
        self.queue.append(("send_message", {"text": text, "asking_for": list(topics)}))

    # ------------------------------------------------------------------ identity and records

    def _start(self, obs: Observation) -> None:
        self.obs0 = obs
        message = obs.customer_message
        self.holder = not (
            has_slot("message", "relative_intro", message) or has_slot("message", "forward_note", message)
        )
        if not self.holder:
            self.phase = "end"
            self.queue.append(
                (
                    "send_message",
                    {"text": "Thank you for writing. " + fact_sentence(Fact(kind="reason", value="not_holder"))},
                )
            )
            return
        emails, codes = _EMAIL.findall(message), _POSTCODE.findall(message)
        self.gave_identity = bool(emails and codes)
        if self.gave_identity:
            self.email, self.postal = emails[-1], codes[-1]
            self.phase = "verify"
            self.queue.append(("find_customer", {"email": self.email}))
            return
        self._ask_identity()

    def _ask_identity(self) -> None:
        self.identity_asks += 1
        self.phase = "identity"
        self._say("Could you give me the email address and postcode on your account?", "identity")

    def _identity(self, obs: Observation) -> None:
        reply = self.answers[-1]
        emails, codes = _EMAIL.findall(reply), _POSTCODE.findall(reply)
        self.email = emails[-1] if emails else self.email
        self.postal = codes[-1]
        self.phase = "verify"
        self.queue.append(("find_customer", {"email": self.email}))

    def _verify(self, obs: Observation) -> None:
        result = obs.tool_result or {}
        if result.get("tool") == "find_customer":
            self.customer_id = result["result"]["customer_id"]
            self.queue.append(
                ("verify_identity", {"customer_id": self.customer_id, "email": self.email, "postal_code": self.postal})
            )
            return
        if not self.verified:
            self._ask_identity()
            return
        self.phase = "orders"
        self.queue.append(("get_customer", {"customer_id": self.customer_id}))

    def _orders(self, obs: Observation) -> None:
        assert self.customer is not None
        self.queue += [("get_order", {"order_id": o["order_id"]}) for o in self.customer["orders"]]
        self.phase = "parse"

    def _parse(self, obs: Observation) -> None:
        self.requests = self._parse_requests(obs.customer_message)
        needed = set()
        for r in self.requests:
            order = self.orders[r.order_id]
            for n, _ in r.lines:
                line = next(ln for ln in order["lines"] if ln["line_no"] == n)
                if line["shipment_id"]:
                    needed.add(line["shipment_id"])
                if r.kind == "exchange":
                    self.queue.append(("get_product", {"product_id": line["product_id"]}))
        self.queue += [("get_shipment", {"shipment_id": s}) for s in sorted(needed)]
        self.phase = "ask"
        if not self.queue:
            self._ask(obs)

    # ------------------------------------------------------------------ deciding

    def _ticket(self) -> StoreTicket:
        facts: dict[str, Any] = {}
        said = " ".join(self.answers)
        if has_slot("answers", "photos_damage", said):
            facts["photos_show"] = "damage"
        if has_slot("answers", "photos_normal_wear", said):
            facts["photos_show"] = "normal_wear"
        for c in ("unopened", "opened", "used"):
            if has_slot("answers", f"condition_{c}", said):
                facts["condition"] = c
        where = ("door", "neighbour", "locker", "signed")
        if any(has_slot("answers", f"delivery_found_{w}", said) for w in where):
            facts["parcel_found"] = True
        elif any(has_slot("answers", f"delivery_missing_{w}", said) for w in where):
            facts["parcel_found"] = False
        requests = [self._with_preference(r, said) for r in self.requests]
        message = self.obs0.customer_message
        stated = next(
            (c for c in ("unopened", "opened", "used") if has_slot("message", f"condition_{c}", message)), None
        )
        return StoreTicket(
            ticket_id=self.obs0.ticket_id,
            position=0,
            split="train",
            difficulty="easy",
            db=self._db(),
            writer=Writer(name="", holder=True, gave_identity=self.gave_identity),
            requests=tuple(requests),
            hidden=StoreHidden(**facts),
            photos_attached="attachments: none" not in self.obs0.ticket.lower(),
            stated_condition=stated,
            subject="",
            message=message,
            recipe="",
        )

    def _with_preference(self, r: Request, said: str) -> Request:
        if not r.wants_stated:
            for wants in ("refund", "replacement", "either"):
                if has_slot("answers", f"preference_{wants}", said):
                    r = r.model_copy(update={"wants": wants})
        for wants in ("refund", "replacement"):
            found = find_slot("answers", f"mind_change_{wants}", said)
            if found is not None and self._is_about(r, found.get("item", "")):
                r = r.model_copy(update={"mind_change": wants})
        return r

    def _is_about(self, r: Request, items: str) -> bool:
        """Whether the customer's words for items ("the mug", "the lamp and the rug") name the lines of
        request ``r``."""
        said = {re.sub(r"^the ", "", x.strip().lower()) for x in re.split(r",| and ", items) if x.strip()}
        order = self.orders[r.order_id]
        names = set()
        for n, _ in r.lines:
            line = next(ln for ln in order["lines"] if ln["line_no"] == n)
            names |= {x.lower() for x in (line["name"], *text_bank.nouns().get(line["name"], ()))}
        return bool(said) and said <= names

    def _ask(self, obs: Observation) -> None:
        self.requests = self._parse_requests(obs.customer_message)  # again: with the products read
        needs = sorted(decide(self._ticket()).needs - {"confirmation"})
        self.phase = "confirm"
        if needs:
            self._say("A few questions before I decide.", *needs)
        else:
            self._confirm(obs)

    def _confirm(self, obs: Observation) -> None:
        self.gold = decide(self._ticket())
        changes = [e for e in self.gold.effects if not isinstance(e, L.EscalateEffect)]
        if not changes or (self.confirmations and not self._mind_changed_now()):
            self._write(obs)
            return
        self.confirmations += 1
        plan = describe_plan([write_call(e, self.customer_id) for e in changes])
        self._say(f"Here is what I will do: {plan}. Shall I go ahead?", "confirmation")

    def _mind_changed_now(self) -> bool:
        reply = self.answers[-1] if self.answers else ""
        return bool(
            has_slot("answers", "mind_change_refund", reply) or has_slot("answers", "mind_change_replacement", reply)
        )

    def _write(self, obs: Observation) -> None:
        gold = decide(self._ticket())
        self.queue += [write_call(e, self.customer_id) for e in gold.effects]
        self.queue.append(("send_message", {"text": tell_text(gold)}))
        self.phase = "end"

    def _end(self, obs: Observation) -> None:
        self.queue.append(("end_conversation", {}))

    # ------------------------------------------------------------------ reading the message

    def _parse_requests(self, message: str) -> list[Request]:
        body = message.split("\n> ")[0]
        requests: list[Request] = []
        for paragraph in [p for p in re.split(r"\n\s*\n", body) if p.strip()]:
            if has_slot("message", "injection", paragraph):
                continue  # P30: pasted instructions are not requests
            found = self._complaint(paragraph)
            if found is None:
                continue
            kind, values = found
            requests.append(self._request(kind, values, paragraph))
        if requests and has_slot("message", "other_card", message):
            requests[0] = requests[0].model_copy(update={"to_other_card": True})
        return requests

    def _complaint(self, paragraph: str) -> tuple[str, dict[str, str]] | None:
        best: tuple[int, str, dict[str, str]] | None = None
        for kind in _KINDS:
            for pattern in slot_patterns("message", f"{kind}_complaint"):
                m = pattern.search(paragraph)
                if m is None:
                    continue
                literal = (m.end() - m.start()) - sum(len(v) for v in m.groupdict().values() if v)
                if best is None or literal > best[0]:
                    values: dict[str, str] = {}
                    for name, value in m.groupdict().items():
                        if value is not None:
                            values.setdefault(name.rsplit("_", 1)[0], value)
                    best = (literal, kind, values)
        return (best[1], best[2]) if best else None

    def _request(self, kind: str, values: dict[str, str], paragraph: str) -> Request:
        order_ids = self._orders_named(paragraph)
        wants, stated = "either", False
        if has_slot("message", "want_refund", paragraph):
            wants, stated = "refund", True
        elif has_slot("message", "want_replacement", paragraph):
            wants, stated = "replacement", True
        item = values.get("item") or values.get("item_short")
        if kind in ("late", "duplicate_charge", "address") or (kind == "missing" and not item):
            order_id = (
                self._lines(item, order_ids, kind)[0] if item else self._order_for(kind, order_ids, values, paragraph)
            )
            if kind == "missing":
                every = tuple((ln["line_no"], ln["quantity"]) for ln in self.orders[order_id]["lines"])
                return Request(
                    kind="missing",
                    order_id=order_id,
                    lines=every,
                    wants=wants,  # type: ignore[arg-type]
                    wants_stated=stated,
                )
            lines = (
                tuple((ln["line_no"], ln["quantity"]) for ln in self.orders[order_id]["lines"])
                if kind == "late"
                else ()
            )
            address = None
            if kind == "address":
                line1, rest = values["new_address"].split(", ", 1)
                city, postal = rest.rsplit(" ", 2)[0], " ".join(rest.rsplit(" ", 2)[1:])
                address = Address(address_id="new", label="new", line1=line1, city=city, postal_code=postal)
            want = {"late": "credit", "duplicate_charge": "refund", "address": "address"}[kind]
            return Request(kind=kind, order_id=order_id, lines=lines, wants=want, new_address=address)  # type: ignore[arg-type]
        order_id, lines = self._lines(item or "", order_ids, kind)
        if kind == "missing":
            lines = tuple((ln["line_no"], ln["quantity"]) for ln in self.orders[order_id]["lines"])
        exchange_sku = None
        if kind == "exchange":
            exchange_sku = self._variant(order_id, lines[0][0], paragraph)
            wants, stated = "exchange", True
        elif kind in ("change_of_mind", "cancel"):
            wants, stated = ("refund" if kind == "change_of_mind" else "cancel"), True
        return Request(
            kind=kind,
            order_id=order_id,
            lines=lines,
            wants=wants,
            wants_stated=stated,  # type: ignore[arg-type]
            exchange_sku=exchange_sku,
        )

    def _orders_named(self, text: str) -> set[str]:
        named = {f"ORD-{d}" for d in _ORDER_ID.findall(text)} & set(self.orders)
        for month, day in _dates_in(text):
            named |= {
                oid
                for oid, o in self.orders.items()
                if (int(o["placed_on"][5:7]), int(o["placed_on"][8:10])) == (month, day)
            }
        return named

    def _order_for(self, kind: str, named: set[str], values: dict[str, str], paragraph: str) -> str:
        if len(named) == 1:
            return next(iter(named))
        if kind == "duplicate_charge" and "charge" in values:
            charge = _cents(float(values["charge"].strip("$").replace(",", "")))
            return next(
                oid
                for oid, o in self.orders.items()
                if sum(1 for p in o["payments"] if _cents(p["amount"]) == charge) > 1
                or _cents(o["payments"][0]["amount"]) == charge
            )
        raise AssertionError(f"cannot tell which order {kind!r} is about: {paragraph!r} (named {named})")

    def _lines(self, item: str, named: set[str], kind: str) -> tuple[str, tuple[tuple[int, int], ...]]:
        if re.match(r"\s*(?:everything in|the whole of|all of) (?:my |the )?order", item, re.I):
            named = self._orders_named(item)
            assert len(named) == 1, f"{item!r} names no single order"
            order_id = next(iter(named))
            return order_id, tuple((ln["line_no"], ln["quantity"]) for ln in self.orders[order_id]["lines"])
        refs = [
            r
            for r in re.split(
                r",\s*(?:and\s+)?(?=the\b|one\b|two\b|three\b|\d)|\s+and\s+(?=the\b|one\b|two\b|"
                r"three\b|\d)",
                item,
            )
            if r.strip()
        ]
        found: list[tuple[str, int, int]] = []
        for ref in refs:
            order_id, line, qty = self._line(ref, named, kind)
            found.append((order_id, line, qty))
        orders = {o for o, _, _ in found}
        assert len(orders) == 1, f"the item {item!r} spans orders {orders}"
        return orders.pop(), tuple(sorted((n, q) for _, n, q in found))

    def _line(self, ref: str, named: set[str], kind: str) -> tuple[str, int, int]:
        low = ref.lower()
        scored = []
        for order_id, order in self.orders.items():
            if named and order_id not in named:
                continue
            for ln in order["lines"]:
                if kind == "cancel" and ln["status"] == "cancelled":
                    continue
                singular = [ln["name"], *text_bank.nouns().get(ln["name"], ())]
                names = singular + [_plural(n) for n in singular]
                said = [n for n in names if re.search(rf"\b{re.escape(n.lower())}\b", low)]
                if not said:
                    continue
                score = 10 * max(len(n) for n in said)  # the most specific name said wins
                options = [p for p in ln["options"].split(" · ") if p]
                if options and all(p.lower() in low for p in options):
                    score += 2
                elif any(_option_word(w) and w not in ln["options"].lower() for w in re.findall(r"[a-z0-9]+", low)):
                    score -= 40
                scored.append((score, order_id, ln))
        scored.sort(key=lambda s: -s[0])
        assert scored, f"no line matches {ref!r}"
        assert len(scored) == 1 or scored[0][0] > scored[1][0], f"{ref!r} matches several lines: {scored[:3]}"
        _, order_id, ln = scored[0]
        m = re.match(r"\s*(\w+) of the (\w+)", low)
        qty = ln["quantity"]
        if m and m.group(1) != "all":
            qty = int(m.group(1)) if m.group(1).isdigit() else _NUMBERS[m.group(1)]
        return order_id, ln["line_no"], qty

    def _variant(self, order_id: str, line_no: int, paragraph: str) -> str | None:
        line = next(ln for ln in self.orders[order_id]["lines"] if ln["line_no"] == line_no)
        wanted = find_slot("message", "exchange_want", paragraph) or {}
        words = wanted.get("new_options", "").lower()
        product = self.products.get(line["product_id"])
        if product is None:
            return None
        for v in product["variants"]:
            parts = [p.replace("size ", "") for p in v["options"].split(" · ") if p]
            if v["sku"] != line["sku"] and all(re.search(rf"\b{re.escape(p.lower())}\b", words) for p in parts):
                return str(v["sku"])
        return None

    # ------------------------------------------------------------------ the records as a database

    def _db(self) -> StoreDB:
        c = self.customer
        assert c is not None
        account = Account(
            customer_id=c["customer_id"],
            name=c["name"],
            email=c["email"],
            phone=c["phone"],
            tier=c["tier"],
            member_since=c["member_since"],
            addresses=tuple(Address(**a) for a in c["addresses"]),
            store_credit=_cents(c["store_credit_balance"]),
            returns_12m=c["risk"]["returns_last_12_months"],
            chargebacks=c["risk"]["chargebacks"],
            fraud_flag="fraud_review" in c["risk"]["flags"],
        )
        catalog: dict[str, Variant] = {}
        orders = []
        for o in self.orders.values():
            lines = []
            for ln in o["lines"]:
                lines.append(
                    Line(
                        line_no=ln["line_no"],
                        sku=ln["sku"],
                        product_id=ln["product_id"],
                        name=ln["name"],
                        category=ln["category"],
                        options=ln["options"],
                        unit_price=_cents(ln["unit_price"]),
                        quantity=ln["quantity"],
                        status=ln["status"],
                        shipment_id=ln["shipment_id"],
                        final_sale=ln["final_sale"],
                        hygiene=ln["hygiene"],
                        perishable=ln["perishable"],
                        warranty_days=ln["warranty_days"],
                    )
                )
                catalog.setdefault(
                    ln["sku"],
                    Variant(
                        sku=ln["sku"],
                        product_id=ln["product_id"],
                        name=ln["name"],
                        category=ln["category"],
                        options=ln["options"],
                        price=_cents(ln["unit_price"]),
                        stock=99 if ln["in_stock"] else 0,
                    ),
                )
            shipments = [
                self._shipment(s["shipment_id"], s["line_nos"])
                for s in o["shipments"]
                if s["shipment_id"] in self.shipments
            ]
            refunds = [
                PastRefund(
                    refund_id=f"r{i}",
                    date=r["date"],
                    lines=tuple(tuple(x) for x in r["lines"]),
                    shipping=r["shipping"],
                    amounts=tuple((a["to"], _cents(a["amount"])) for a in r["amounts"]),
                    reason=r["reason"],
                )
                for i, r in enumerate(o["refunds"])
            ]
            returns = [
                PastReturn(
                    return_id=f"t{i}",
                    date=r["date"],
                    lines=tuple(tuple(x) for x in r["lines"]),
                    label=r["label"],
                    reason="",
                )
                for i, r in enumerate(o["returns"])
                if r["status"] == "received"
            ]
            replacements = [
                PastReplacement(
                    replacement_id=f"p{i}",
                    date=p["date"],
                    line_no=p["line_no"],
                    quantity=p["quantity"],
                    reason=p["reason"],
                )
                for i, p in enumerate(o["replacements"])
            ]
            orders.append(
                Order(
                    order_id=o["order_id"],
                    placed_on=o["placed_on"],
                    lines=tuple(lines),
                    promo_code=o["promo_code"],
                    discount=_cents(o["discount"]),
                    shipping_fee=_cents(o["shipping_fee"]),
                    shipping_address_id=account.addresses[0].address_id,
                    payments=tuple(
                        Payment(
                            payment_id=p["payment_id"],
                            method=p["method"],
                            label=p["label"],
                            amount=_cents(p["amount"]),
                            captured_on=p["captured_on"],
                        )
                        for p in o["payments"]
                    ),
                    shipments=tuple(shipments),
                    refunds=tuple(refunds),
                    returns=tuple(returns),
                    replacements=tuple(replacements),
                )
            )
        for p in self.products.values():
            for v in p["variants"]:
                catalog[v["sku"]] = Variant(
                    sku=v["sku"],
                    product_id=p["product_id"],
                    name=p["name"],
                    category=p["category"],
                    options=v["options"],
                    price=_cents(v["price"]),
                    stock=99 if v["in_stock"] else 0,
                )
        credits = tuple(
            PastCredit(
                credit_id=f"c{i}",
                date=g["date"],
                order_id=g["order_id"],
                amount=_cents(g["amount"]),
                reason=g["reason"],
            )
            for i, g in enumerate(c["goodwill_credits"])
        )
        today = self.obs0.ticket.split("received ", 1)[1][:10]
        return StoreDB(
            today=today, account=account, orders=tuple(orders), catalog=tuple(catalog.values()), credits=credits
        )

    def _shipment(self, shipment_id: str, line_nos: list[int]) -> Shipment:
        s = self.shipments[shipment_id]
        return Shipment(
            shipment_id=s["shipment_id"],
            carrier=s["carrier"],
            tracking_no=s["tracking_no"],
            line_nos=tuple(line_nos),
            shipped_on=s["shipped_on"],
            estimated_delivery=s["estimated_delivery"],
            events=tuple(TrackingEvent(**e) for e in s["events"]),
        )


_SIZES_AND_COLOURS = frozenset(
    w.lower() for values in (*_SIZES.values(), *_COLOURS.values()) for v in values for w in v.split()
)


def _option_word(word: str) -> bool:
    return word in _SIZES_AND_COLOURS
