"""What the agent's messages at the store desk say: amounts, refund timelines and refusal reasons.

The reply reader (:func:`service.env.replies.meaning`) reads the ticket tasks' reasons on meaning; the
store desk reads its own with the same machinery (:mod:`service.env.language`: lemmas on whole tokens,
clauses, negation scoped to what it negates), so that a fact is told in any words and a fact negated
("it hasn't shipped yet", "it isn't a final-sale item") tells nothing:

- :func:`stated_amounts`: the money amounts a text states, in cents ("$86.70", "86.70 dollars",
  "USD 86.70");
- :func:`stated_timelines`: the business-day spans it states, as (low, high) ("5-10 business days",
  "five to ten working days"; "within 10 business days" is (0, 10));
- :func:`stated_reasons`: the refusal reasons of :data:`service.env.store.policy.STORE_REASONS` it
  tells — sentence by sentence, the reply reader's reasons (window, used, final sale, warranty, wear,
  in transit, parcel found, one charge, unverifiable) and the store desk's own (shipped, not late,
  already credited, not the holder, the original payment, already settled);
- :func:`asserted_reasons`: those it asserts as facts about the ticket, for the check that nothing
  untrue is told: not in a sentence that grants something ("a replacement is on its way" is no parcel
  in transit), and not P7's bare "I can't approve this claim" (a refusal, not a claim about the facts).

``tests/env/store_phrasings.py`` holds the wordings this reader was fitted on and a blind set it never
was; ``tests/env/test_store_reasons.py`` reports both.
"""

from __future__ import annotations

from functools import lru_cache

from service.env.language import NEGATORS, Clause, Phrases, clauses, lemmas, normalize, sentences
from service.env.policy import REASONS
from service.env.replies import meaning
from service.env.vocabulary import VOCABULARY as V

_USD = V.usd_amount.pattern


@lru_cache(maxsize=8192)
def stated_amounts(text: str) -> frozenset[int]:
    """The money amounts ``text`` states, in cents."""
    amounts = {round(a * 100) for a in meaning(text).amounts}
    amounts |= {round(float(m.group(1).replace(",", "")) * 100) for m in _USD.finditer(text)}
    return frozenset(amounts)


# ------------------------------------------------------------------------------------ timelines

_NUMBER: dict[str, int] = {**V.store_day_words.table, **V.count_words.table}
_SPAN = V.timeline_span.pattern
_WITHIN = V.timeline_within.pattern


def _n(word: str) -> int:
    """A count of days, written in digits or in words ("five", "a")."""
    return int(word) if word.isdigit() else _NUMBER[word]


@lru_cache(maxsize=8192)
def stated_timelines(text: str) -> frozenset[tuple[int, int]]:
    """The business-day spans ``text`` states: (low, high), (0, high) for "within high days"."""
    low = normalize(text)
    spans = {(_n(a), _n(b)) for a, b in _SPAN.findall(low)}
    spans |= {(0, _n(b)) for b in _WITHIN.findall(low)}
    return frozenset(spans)


# ------------------------------------------------------------------------------------ reasons

# The reply reader's reasons the store desk uses: the ticket tasks' refusal reasons (its "lost" is none).
_MEANING_REASONS = frozenset(REASONS)
# An item in use is an item's: "I used the email you gave me" uses no item.
_USED_ON = Phrases(V.use_of_details)
_ITEM_STATE = Phrases(V.item_state)
# Money and new items on their way are no parcel in transit: "it will reach your card in 5-10 days".
_NOT_A_PARCEL = Phrases(V.not_a_parcel)
_SALE_WORDS = Phrases(V.sale_words)

_SHIPPED = Phrases(V.shipped)
_NOT_LATE_PLAIN = Phrases(V.not_late)
_LATE_COUNT = V.late_count.pattern
_LIMIT_COUNT = V.limit_count.pattern
_DELIVERY_WORDS = Phrases(V.delivery_words)
_CREDITED = Phrases(V.credited)
_BEFORE = Phrases(V.earlier)
_HOLDER = Phrases(V.holder)
_ONLY = Phrases(V.only_they)
_THEMSELVES = Phrases(V.themselves)
_CONTACT = Phrases(V.contact)
_ORIGINAL = Phrases(V.original_payment)
_MUST = Phrases(V.must_go_back)
_OTHER_CARD = Phrases(V.other_card)
_SETTLED = Phrases(V.settled)
_SETTLED_WHEN = Phrases(V.settled_when)
_APPROVE_REFUSED = Phrases(V.approval_refused)


_NEGATORS = V.store_negators.words
_OPENERS = V.clause_openers.words


def _negated(tokens: tuple[str, ...], start: int, reach: int = 4) -> bool:
    """A negator within ``reach`` tokens before ``start`` in the clause ("hasn't shipped yet", "none of it
    has been dispatched")."""
    if tokens and tokens[0] in _OPENERS and start > 0:
        return True
    return any(t in _NEGATORS for t in tokens[max(0, start - reach) : start])


def _asserted(phrases: Phrases, tokens: tuple[str, ...]) -> bool:
    return any(not _negated(tokens, s) for s, _ in phrases.find(tokens))


_NOT_YET = V.plans.words


def _shipped(c: Clause) -> bool:
    """Shipped as a fact: not negated, not a condition or a plan ("once it ships", "it will be dispatched",
    "before it left the warehouse")."""
    tokens = c.lemmas
    return not _NOT_A_PARCEL.in_(tokens) and any(
        not _negated(tokens, s) and not _NOT_YET & set(tokens[:s]) for s, _ in _SHIPPED.find(tokens)
    )


def _not_late(c: Clause, sentence: str) -> bool:
    tokens = c.lemmas
    if _NOT_LATE_PLAIN.in_(tokens):
        return True
    sent_tokens = lemmas(sentence)
    for m in _LATE_COUNT.finditer(c.text):
        if _n(m.group(1)) <= 3 and not V.more_than_before.pattern.search(c.text[: m.start()]):
            return True
    if _DELIVERY_WORDS.in_(sent_tokens):
        return any(_n(n) <= 3 for n in _LIMIT_COUNT.findall(c.text))
    return False


def _already_credited(c: Clause) -> bool:
    tokens = c.lemmas
    return _CREDITED.in_(tokens) and _asserted(_BEFORE, tokens) and not c.negated


def _not_holder(c: Clause, sentence: str) -> bool:
    tokens = lemmas(sentence)
    if _HOLDER.in_(c.lemmas) and _ONLY.in_(tokens):
        return True
    return _THEMSELVES.in_(c.lemmas) and _CONTACT.in_(tokens)


def _original_payment(c: Clause, sentence: str) -> bool:
    tokens = lemmas(sentence)
    if _ORIGINAL.in_(c.lemmas) and _MUST.in_(tokens):
        return True
    return _OTHER_CARD.in_(c.lemmas) and any(t in NEGATORS for t in tokens) and _money(tokens)


def _money(tokens: tuple[str, ...]) -> bool:
    return any(t in V.money_or_it.words for t in tokens)


def _already_settled(c: Clause) -> bool:
    tokens = c.lemmas
    return _asserted(_SETTLED, tokens) and _SETTLED_WHEN.in_(tokens) and not _CREDITED.in_(tokens)


_RECORD_TIME = Phrases(V.record_time)
_PASSIVE_SETTLED = Phrases(V.passive_settled)


def _settled_on_record(c: Clause) -> bool:
    """Already settled as a fact of the records — passive or dated ("it was refunded in April", "we sent a
    replacement on 3 May") — not this conversation's own act ("I've already refunded it")."""
    return _already_settled(c) and (_PASSIVE_SETTLED.in_(c.lemmas) or _RECORD_TIME.in_(c.lemmas))


def _reply_reader_reasons(sentence: str, parts: tuple[Clause, ...]) -> set[str]:
    """The reply reader's reasons, less what it reads where the store desk means something else."""
    m = meaning(sentence)
    found = set(m.reasons & _MEANING_REASONS)
    tokens = lemmas(sentence)
    if "used" in found and _USED_ON.in_(tokens) and not _ITEM_STATE.in_(tokens):
        found.discard("used")
    sale = _SALE_WORDS.find(tokens)
    if "final_sale" in found and sale and all(_negated(tokens, s, 3) for s, _ in sale):
        found.discard("final_sale")
    if not m.refuses and _NOT_A_PARCEL.in_(tokens):  # an outcome on its way: "the new one is on its way"
        found.discard("in_transit")
    for reason, veto in (("in_transit", _NOT_A_PARCEL), ("parcel_found", None)):
        # said of the parcel, clause by clause: "it will reach your card" is money, "the parcel hasn't
        # been found" is negated
        if reason in found and not any(
            reason in meaning(c.text).reasons and not (veto.in_(c.lemmas) if veto else c.negated) for c in parts
        ):
            found.discard(reason)
    return found


def _desk_reasons(sentence: str, parts: tuple[Clause, ...], *, refuses: bool) -> set[str]:
    """The store desk's own reasons, clause by clause."""
    found = set()
    money_or_new = _NOT_A_PARCEL.in_(lemmas(sentence))
    for c in parts:
        readers = {
            "shipped": _shipped(c) and (refuses or not money_or_new),
            "not_late": _not_late(c, sentence),
            "already_credited": _already_credited(c),
            "not_holder": _not_holder(c, sentence),
            "original_payment": _original_payment(c, sentence),
            "already_settled": _already_settled(c),
        }
        found |= {name for name, said in readers.items() if said}
    return found


@lru_cache(maxsize=8192)
def _sentence_reasons(sentence: str) -> tuple[frozenset[str], frozenset[str]]:
    """(the reasons a sentence tells, those it asserts as facts of the ticket). A question asserts nothing
    ("has the item been used?"); a sentence that ends in one keeps what its clauses before it say."""
    if sentence.rstrip().endswith("?"):
        before = clauses(sentence)[:-1]
        if not before:
            return frozenset(), frozenset()
        sentence = ", ".join(c.text for c in before) + "."
    m = meaning(sentence)
    parts = clauses(sentence)
    found = _reply_reader_reasons(sentence, parts) | _desk_reasons(sentence, parts, refuses=m.refuses)
    asserted = set() if (m.grants and not m.refuses) else set(found) - {"already_settled"}
    if any(_settled_on_record(c) for c in parts):
        asserted.add("already_settled")
    if "unverifiable" not in found and _APPROVE_REFUSED.in_(lemmas(sentence)):
        found.add("unverifiable")  # P7's "cannot be verified or approved": told, but no fact asserted
    return frozenset(found), frozenset(asserted)


@lru_cache(maxsize=4096)
def stated_reasons(text: str) -> frozenset[str]:
    """The refusal reasons ``text`` tells the customer, in any words."""
    return frozenset(r for s in sentences(text) for r in _sentence_reasons(s)[0])


@lru_cache(maxsize=4096)
def asserted_reasons(text: str) -> frozenset[str]:
    """The reasons ``text`` asserts as facts of the ticket: not in a sentence that grants something (a
    replacement on its way is no parcel in transit), not P7's bare refusal to approve a claim, and a unit
    settled only as a fact of the records."""
    return frozenset(r for s in sentences(text) for r in _sentence_reasons(s)[1])
