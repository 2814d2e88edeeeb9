"""How a reply treats the customer: rudeness (insults, dismissals, blame, lecturing, insinuation) and
leaked internal notes (risk screening, the customer's record, our fraud team). Part of the reply reader
(:mod:`service.env.reader`); like it, it names no phrase: every word is a concept of
:mod:`service.env.vocabulary`.
"""

from __future__ import annotations

import re
from itertools import pairwise

from service.env.language import PHRASES, clauses, lemmas, negated_before, normalize, sentences, without_idioms
from service.env.vocabulary import VOCABULARY

V, P = VOCABULARY, PHRASES
Tokens = tuple[str, ...]


def rudeness(text: str, tokens: Tokens) -> tuple[str, ...]:
    """Insults and dismissals, blame and lecturing, in the normalised ``text`` and its lemmas ``tokens``."""
    found = {
        " ".join(tokens[s:e]) for s, e in P.rude.find(tokens) if not negated_before(tokens, s) and not _kind(tokens, s)
    }
    plain = without_idioms(tokens)  # "not your fault" and "no fault of your own" never count
    found |= {
        " ".join(plain[s:e])
        for s, e in P.blame.find(plain)
        if not negated_before(plain, s) and not _excused(plain, s, e)
    }
    found |= {
        sentence for sentence in sentences(text) if _lectures(lemmas(sentence)) or _blames_people(lemmas(sentence))
    }
    found |= {c.text for c in clauses(text) if _lectures(c.lemmas)}  # "… so we can't replace it - treat it with care"
    asked = {after for before, after in pairwise(sentences(text)) if before.endswith("?")}
    found |= {
        c.text
        for c in clauses(text)
        if c.lemmas in V.scoffs.sequences
        and c.sentence.startswith(c.text)
        and not (c.lemmas in V.answers.sequences and c.sentence in asked)  # "Lost? No - it's on its way."
    }
    found |= {m.group(0) for m in V.hindsight.pattern.finditer(text) if _reproach(_participle(m))}
    found |= {
        m.group(0)
        for m in V.passive_hindsight.pattern.finditer(text)
        if not V.our_doing.pattern.search(text[max(0, m.start() - 40) : m.start()])
    }
    return tuple(sorted(found))


def _participle(m: re.Match[str]) -> str | None:
    """The verb a hindsight pattern captured, whichever of its alternatives matched ("you should have <tried>",
    "if you'd <contacted> us sooner, we could have …"), or None."""
    return next((g for g in m.groups() if g is not None), None)


def _reproach(verb: str | None) -> bool:
    """Hindsight reproaches with a participle of the customer's act, not an expectation ("you should have
    received an email")."""
    return verb is None or (V.participle.pattern.fullmatch(verb) is not None and verb not in V.expected.words)


def _blames_people(tokens: Tokens) -> bool:
    """Blame in a generalisation: customers' careless conduct given as the cause ("that happens when people
    don't pay attention", "it's usually down to customers not reading the label") — not the courier's."""
    if not P.generalisation.in_(tokens):
        return False
    careless = [s for s, _ in P.careless.find(tokens)]
    if any(a < s <= a + 4 for a, t in enumerate(tokens) if t in V.customers.words for s in careless):
        return True
    # no actor named: "marks like these appear when a mat isn't looked after" (not "parcels dropped in transit")
    return P.neglect.in_(tokens) and not V.handlers.words & set(tokens)


def _lectures(tokens: Tokens) -> bool:
    """Told to the customer about their future conduct: addressed to them, or an imperative with no first
    person ("perhaps treat it with more care next time"); "next time we'll take more care" is about us, and
    an invitation back ("next time, feel free to contact us") is none."""
    ours = any(t in V.ourselves_or_mine.words for t in tokens)
    addressed = bool(V.addressing.words & set(tokens)) or (not ours and P.care.in_(tokens))
    return addressed and P.lecture_time.in_(tokens) and not P.invitation.in_(tokens)


def _excused(tokens: Tokens, start: int, end: int) -> bool:
    """Blame-shaped phrases that blame nobody: "please check at your end" asks for a check, and "next
    time we'll check the stock" or "we'll take more care" are about ourselves."""
    if tokens[end - 1] in V.at_your_end.words:
        return any(t in V.checking.words for t in tokens[max(0, start - 4) : start])
    if not V.about_the_future.words & set(tokens[start:end]):
        return False
    return any(t in V.ourselves.words for t in tokens[max(0, start - 2) : end])


def _kind(tokens: Tokens, start: int) -> bool:
    """ "whatever they find" / "whatever you need" is not dismissive; a bare "whatever" is."""
    return (
        tokens[start] in V.whatever.words
        and start + 1 < len(tokens)
        and tokens[start + 1] in V.whatever_followers.words
    )


def insinuations(text: str) -> tuple[str, ...]:
    """Suspicion insinuated ("we have to be careful with requests like yours"), or how the customer
    treated the item guessed from the photos ("they look like they've been dropped a fair bit")."""
    found = [m.group(0) for m in V.insinuation.pattern.finditer(text)]
    found += [m.group(0) for m in V.claims_like_yours.pattern.finditer(text) if not _routed(text, m.start(), m.end())]
    for sentence in sentences(text):
        m = V.mishandled.pattern.search(sentence)
        if (
            m
            and V.speculation.pattern.search(sentence)
            and not V.someone_else.pattern.search(sentence)
            and not V.negated_nearby.pattern.search(sentence[: m.start()])
        ):
            found.append(sentence)
    return tuple(found)


def _routed(text: str, start: int, end: int) -> bool:
    """ "Claims like yours" named as what a team handles ("requests like yours are handled by our Returns
    team", "the colleagues responsible for reviewing claims of this kind"): routing, not suspicion."""
    return bool(
        V.handles_kind.pattern.search(text[max(0, start - 60) : start]) or V.handled_kind.pattern.match(text[end:])
    )


def leaks(text: str, all_lemmas: Tokens, teams: frozenset[str]) -> tuple[str, ...]:
    """Internal notes told to the customer: risk screening, their history, our fraud team."""
    notes = V.leaking_queues.table
    return (
        tuple(" ".join(all_lemmas[s:e]) for s, e in P.leak.find(all_lemmas) if not _third_party(all_lemmas, s, e))
        + _history(text)
        + _record_mentions(text)
        + tuple(sorted(notes[q] for q in teams if q in notes))
    )


def _third_party(tokens: Tokens, start: int, end: int) -> bool:
    """A fraud team of the bank or the card provider, not ours: "your card provider's fraud team can help"."""
    return bool(V.fraud_word.words & set(tokens[start:end])) and any(
        t in V.third_party.words for t in tokens[max(0, start - 4) : start]
    )


def _history(text: str) -> tuple[str, ...]:
    """Sentences that tell the customer their own record — a return, claim or dispute of theirs with how
    often or how many ("you've sent back eight orders this year") — but not an instruction ("once you've
    sent back the two items")."""
    out = []
    for sentence in sentences(text):
        acts = [c for c in clauses(sentence) if P.history_act.in_(c.lemmas) and not c.conditional]
        if acts and (P.frequency.in_(lemmas(sentence)) or V.counted.pattern.search(normalize(sentence))):
            out.append(sentence)
    return tuple(out)


def _record_mentions(text: str) -> tuple[str, ...]:
    """The customer's record with an ordinal or none, not only a count: "the third claim on your account
    this year", "the missing-parcel claims already on your account", "as this is your first return"."""
    out = []
    for sentence in sentences(text):
        if not V.addressed.pattern.search(sentence):
            continue
        if (
            V.ordinal_record.pattern.search(sentence)
            or V.ordinal_time.pattern.search(sentence)
            or V.past_record.pattern.search(sentence)
            or (V.plural_record.pattern.search(sentence) and V.on_record.pattern.search(sentence))
        ):
            out.append(sentence)
    return tuple(out)
