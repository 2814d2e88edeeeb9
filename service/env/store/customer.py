"""The store desk's customer: a goal, facts held back until asked, and a few habits.

The customer reads the agent's message for what it asks (the topics of :data:`TOPICS`), from the
message's words and from the ``asking_for`` list the agent may add, and answers each asked topic it
has something for, in varied words (``phrases/answers.json``), never restating its first message:

- **identity**: the account's email and postal code (someone writing for a relative gives the
  relative's, and says whose account it is; a customer who moved gives an old postcode first);
- **order**: the order number; **photos**, **condition**, **delivery**: the hidden facts (a parcel is
  looked for where the tracking says it was left);
- **preference**: refund or replacement, when the message did not say; the size or colour wanted;
- **confirmation**: yes to a request for a yes (read on lemmas: "would that work for you", "are you OK
  with that", "let me know if you agree", "shall I …") — except that a customer who changes their mind
  about one request asks for the other remedy, naming the items, when the agent proposes that request's
  change with the remedy first asked for; and one pushed to the original payment agrees reluctantly.

A customer who insists pushes back once after the first refusal. Everything is deterministic: the
answer's wording is seeded by the ticket, the round and the topics asked, and each answer records the
topics it revealed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from service.env.customer import topics_asked
from service.env.generator import stable_seed
from service.env.language import Phrases, lemmas
from service.env.replies import meaning
from service.env.store import messages
from service.env.store.policy import shipment_of
from service.env.store.world import DELIVERED_WHERE, Line, Request, StoreTicket
from service.env.vocabulary import VOCABULARY as V

TOPICS = ("identity", "order", "quantity", "photos", "condition", "delivery", "preference", "confirmation")

# A request for a yes, read on lemmas (whole tokens): assent asked for ("are you OK with that", "would
# that work for you", "can you confirm", "let me know if you agree", "do I have your go-ahead") or an act
# offered ("shall I", "want me to", "happy for me to"). "Confirm" is a yes only when it confirms no detail
# of the account (that is identity), and "can I" only before an act ("can I go ahead", not "can I help").
_ASSENT = Phrases(V.assent)
_NOT_ASSENT = Phrases(V.not_assent)  # assent words that ask for no yes: "confirm your email"
_CAN_I = Phrases(V.can_i)
_ACTS = V.acts.words


def asks_for_a_yes(sentence: str) -> bool:
    """Whether a request sentence asks the customer to agree to what the agent proposed."""
    tokens = lemmas(sentence)
    if _NOT_ASSENT.in_(tokens) and not _ASSENT.in_(_without(tokens, _NOT_ASSENT)):
        return False
    if _ASSENT.in_(tokens):
        return True
    return any(end < len(tokens) and tokens[end] in _ACTS for _, end in _CAN_I.find(tokens))


def _without(tokens: tuple[str, ...], phrases: Phrases) -> tuple[str, ...]:
    drop = {i for start, end in phrases.find(tokens) for i in range(start, end)}
    return tuple(t for i, t in enumerate(tokens) if i not in drop)


_IDENTITY = V.identity_request.pattern
_ORDER = V.order_request.pattern
_PREFERENCE = V.preference_request.pattern
_OFFER_TO_ACT = V.offer_to_act.pattern  # "would you like me to …" asks for a yes, no preference


_QUANTITY = V.quantity_request.pattern
# A sentence asks something when it is a question or a request ("could you", "please send", "let me know whether").
_REQUEST = V.request.pattern
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


@lru_cache(maxsize=4096)
def topics_in(text: str, explicit: tuple[str, ...] = ()) -> frozenset[str]:
    """The topics a message asks about: the ``asking_for`` list it came with, and what its request sentences —
    questions and requests, never a sign-off ("take care") or an instruction ("pack it in its box") — ask.
    The topics the policy governs (photos, condition, a parcel check) are read from the words only when the
    message lists nothing: a list is what the agent says it asks. A message that asks for identity proposes
    nothing to say yes to."""
    asked = set(explicit)
    requests = [s for s in _SENTENCE.split(text) if _REQUEST.search(s.lower())]
    if not explicit and requests:
        read = topics_asked(" ".join(requests))
        asked |= {"condition" if t == "usage" else t for t in read if t in ("photos", "usage", "delivery")}
    for sentence in requests:
        low = sentence.lower()
        if _IDENTITY.search(low):
            asked.add("identity")
        elif asks_for_a_yes(sentence):
            asked.add("confirmation")
        if _ORDER.search(low):
            asked.add("order")
        if _QUANTITY.search(low):
            asked.add("quantity")
        if _PREFERENCE.search(_OFFER_TO_ACT.sub("", low)):
            asked.add("preference")
    if "identity" in asked and "confirmation" not in explicit:
        asked.discard("confirmation")
    return frozenset(asked)


@dataclass(frozen=True)
class Reply:
    text: str
    revealed: frozenset[str]  # topics whose facts this reply stated
    confirmed: bool  # said yes to what the agent described
    identity_asked: bool
    mind_changed: bool
    insisted: bool


@dataclass(frozen=True)
class Memory:
    """What the customer remembers of the conversation so far."""

    round: int
    identity_asks: int
    mind_changed: bool
    insisted: bool


def reply(ticket: StoreTicket, text: str, asking_for: tuple[str, ...], memory: Memory) -> Reply:
    """The customer's answer to one message of the agent."""
    asked = topics_in(text, tuple(sorted(asking_for)))
    rng = random.Random(stable_seed("store-customer", ticket.ticket_id, memory.round, ",".join(sorted(asked))))
    values = _values(ticket, rng)
    written = ticket.message.lower()

    def answer(slot: str, more: dict[str, str] | None = None) -> str:
        """An answer that does not repeat the first message word for word (a person rephrases)."""
        said = ""
        for _ in range(8):
            said = messages.answer(rng, slot, {**values, **(more or {})})
            if said.lower() not in written:
                break
        return said

    if ticket.writer.insists and not memory.insisted and meaning(text).refuses:
        return Reply(answer("insist"), frozenset(), False, False, memory.mind_changed, True)
    said: list[str] = []
    revealed: set[str] = set()
    confirmed = False
    mind_changed = memory.mind_changed
    for topic in TOPICS:
        if topic not in asked:
            continue
        if topic == "confirmation":
            proposed = None if mind_changed else _proposes_changed(ticket, text)
            if proposed is not None:  # the agent describes the change the customer has changed their mind on
                r, offers_new = proposed
                mind_changed = True
                if not offers_new:
                    said.append(answer(f"mind_change_{r.mind_change}", {"item": _the_items(rng, ticket, r)}))
                    revealed.add("preference")
                    continue
            reluctant = any(r.to_other_card for r in ticket.requests) and memory.round < 3
            said.append(answer("confirm_reluctant" if reluctant else "confirm_yes"))
            confirmed = True
            continue
        if topic == "order":  # each request's order, so that the answer fits whichever one was asked about
            said += [answer("order", {"order_id": r.order_id}) for r in ticket.requests]
            revealed.add("order")
            continue
        if topic == "quantity":  # how many units each request is about
            said += [answer("quantity", {"units": _units(ticket, r)}) for r in ticket.requests if r.lines]
            revealed.add("quantity")
            continue
        slot, fact = _answer_slot(ticket, topic, memory)
        said.append(answer(slot))
        if fact:
            revealed.add(topic)
    if not said:  # nothing it can answer: thanks for news or a statement, puzzlement at a question
        said.append(answer("confused" if "?" in text else "thanks"))
    return Reply(
        text=" ".join(said),
        revealed=frozenset(revealed),
        confirmed=confirmed,
        identity_asked="identity" in asked,
        mind_changed=mind_changed,
        insisted=memory.insisted,
    )


_REMEDY_WORDS = {"replacement": Phrases(V.offers_replacement), "refund": Phrases(V.offers_refund)}
_PARTS = re.compile(r"[;\n]|(?<=[.!?])\s+")  # the parts of a message that each propose one thing
_LINE_REFS = V.line_refs.pattern  # "line 2", "lines 1, 2 and 3"
_NAME_STOP = V.name_stop.words


def _proposes_changed(ticket: StoreTicket, text: str) -> tuple[Request, bool] | None:
    """The request whose change of mind the message brings up — its item named (by name, by what people
    call it, or by its line of its order) in a message asking for a yes — with whether the message already
    offers what the customer now wants instead (then there is nothing to change: they agree)."""
    for r in ticket.requests:
        if r.mind_change is None:
            continue
        order = ticket.db.order(r.order_id)
        assert order is not None
        for line_no, _ in r.lines:
            line = order.line(line_no)
            assert line is not None
            said = [lemmas(part) for part in _PARTS.split(text) if _names(part, order.order_id, line)]
            if not said:
                continue
            first = "replacement" if r.mind_change == "refund" else "refund"
            offers_first = any(_REMEDY_WORDS[first].in_(part) for part in said)
            offers_new = any(_REMEDY_WORDS[r.mind_change].in_(part) for part in said)
            return r, offers_new and not offers_first
    return None


def _names(text: str, order_id: str, line: Line) -> bool:
    """Whether ``text`` names an order line: a word of its name or of what people call it, or "line N" with
    its order's number."""
    low = text.lower()
    words = {w for n in (line.name, *messages.nouns().get(line.name, ())) for w in re.findall(r"[a-z]{3,}", n.lower())}
    if any(re.search(rf"\b{re.escape(w)}(?:e?s)?\b", low) for w in words - _NAME_STOP):
        return True
    digits = order_id.split("-")[-1]
    return digits in low and any(str(line.line_no) in re.findall(r"\d+", m.group(1)) for m in _LINE_REFS.finditer(low))


def _delivered_where(ticket: StoreTicket) -> str:
    """Where the carrier says the parcel of the missing request was left ("locker", "neighbour", …)."""
    for r in ticket.requests:
        order = ticket.db.order(r.order_id)
        if r.kind == "missing" and order is not None and r.lines:
            shipment = shipment_of(order, r.lines[0][0])
            event = next((e for e in reversed(shipment.events) if e.status == "delivered"), None) if shipment else None
            if event is not None:
                return DELIVERED_WHERE.get(event.detail, "door")
    return "door"


def _the_items(rng: random.Random, ticket: StoreTicket, r: Request) -> str:
    """How the customer names the items of a request in passing: "the mug", "the lamp and the rug"."""
    order = ticket.db.order(r.order_id)
    assert order is not None
    names = ["the " + messages.item_noun(rng, line.name) for n, _ in r.lines if (line := order.line(n)) is not None]
    return " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " and " + names[-1]


def _answer_slot(ticket: StoreTicket, topic: str, memory: Memory) -> tuple[str, bool]:
    """The answer slot for ``topic`` and whether it states the fact the topic is about."""
    h = ticket.hidden
    if topic == "identity":
        if not ticket.writer.holder:
            return "identity_relative", True
        if h.wrong_postcode_first:
            return ("identity_old_postcode", False) if memory.identity_asks == 0 else ("identity_retry", True)
        return "identity", True
    if topic == "order":
        return "order", True
    if topic == "photos":
        if h.photos_show is not None:
            return f"photos_{h.photos_show}", True
        return ("photos_already_sent", False) if ticket.photos_attached else ("photos_none", False)
    if topic == "condition":
        condition = h.condition or ticket.stated_condition
        if condition is None:
            return "condition_none", False
        return f"condition_{condition}", h.condition is not None
    if topic == "delivery":
        if h.parcel_found is None:  # nothing to check: still on its way, or not about a parcel at all
            waiting = any(r.kind == "missing" for r in ticket.requests)
            return ("delivery_still_waiting" if waiting else "delivery_none"), False
        where = _delivered_where(ticket)  # the customer's account agrees with the carrier's delivery event
        return (f"delivery_found_{where}" if h.parcel_found else f"delivery_missing_{where}"), True
    # preference
    hidden = next((r for r in ticket.requests if not r.wants_stated), None)
    if hidden is None:
        exchange = next((r for r in ticket.requests if r.kind == "exchange" and r.exchange_sku), None)
        return ("preference_exchange", False) if exchange else ("preference_none", False)
    return {"refund": "preference_refund", "replacement": "preference_replacement"}.get(
        hidden.wants, "preference_either"
    ), True


def _units(ticket: StoreTicket, r: object) -> str:
    """How many units a request is about, in the customer's words ("just one of them", "all three")."""
    from service.env.store.messages import number

    order = ticket.db.order(r.order_id)  # type: ignore[attr-defined]
    assert order is not None
    parts = []
    for line_no, qty in r.lines:  # type: ignore[attr-defined]
        line = order.line(line_no)
        assert line is not None
        if line.quantity == 1:
            parts.append(f"the one {line.name}")
        elif qty == line.quantity:
            parts.append(f"all {number(qty, random.Random(0))} of the {line.name}")
        else:
            parts.append(
                f"{number(qty, random.Random(0))} of the {number(line.quantity, random.Random(1))} {line.name}"
            )
    return ", ".join(parts)


def _values(ticket: StoreTicket, rng: random.Random) -> dict[str, str]:
    db = ticket.db
    first = ticket.requests[0]
    exchange = next((r for r in ticket.requests if r.exchange_sku), None)
    variant = db.variant(exchange.exchange_sku) if exchange and exchange.exchange_sku else None
    old = random.Random(stable_seed("old-postcode", ticket.ticket_id))
    return {
        "email": db.account.email,
        "postal": db.account.addresses[0].postal_code,
        "old_postal": f"{old.choice(('OX', 'CB', 'BA', 'PL', 'HU'))}{old.randrange(1, 20)} {old.randrange(1, 9)}"
        f"{old.choice('ABDEFGHJ')}{old.choice('LNPQRSTU')}",
        "order_id": first.order_id,
        "new_options": variant.options.replace(" · ", ", ") if variant else "another size",
        "name": ticket.writer.name,
    }
