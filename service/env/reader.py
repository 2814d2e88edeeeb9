"""What a reply to the customer says: read on meaning, deterministically. The engine, naming no phrase.

:func:`meaning` turns a reply into a :class:`Meaning` — the remedies it grants unconditionally (or
the claim itself, "your return is approved"), those it only offers, whether it refuses, whether it is
a holding reply, the denial reasons it asserts, the time limits, warranty lengths and amounts it
states, the order ids it quotes, the teams it names, courtesy (warm words, or a greeting with a helpful
close), rudeness (insults, blame, lecturing, insinuation) and leaked risk notes.
:func:`service.env.replies.judge` compares that meaning with the agent's decision and the ticket.

Every word and phrase it knows is a concept of :mod:`service.env.vocabulary` (one data file each,
with the example that justifies each entry): ``P.refund`` is the refund concept as phrases, ``V.chain``
a word list, ``V.money`` a pattern. The rules here say how the concepts combine:

* It reads lemmas on whole tokens within clauses (:mod:`service.env.language`), and negation is scoped
  to what it negates ("we can't refund used items" asserts use; "it hasn't been used" does not; "no
  need to send anything back" and "we would never refuse" refuse nothing; "we haven't approved or
  refused anything yet" decides nothing).
* A condition is judged by what it hangs on: a decision or a finding leaves the outcome open ("if the
  team approves it, you'll be refunded" promises nothing, and a fronted "if …," reaches the rest of its
  sentence), the customer's choice makes the remedy an option ("if you'd prefer a refund"), while the
  customer's own action or a step of the process still promises it ("if you post it back we'll refund
  you", "will be sent once our team has finished its review").
* Modality ("may", "whether") hedges; process words ("our team will finalise it") do not; a remedy that
  is the object of our own act is granted in any verb ("I'll push a refund through").
* Reasons are denial reasons only where the reply declines ("a replacement is on its way" in an
  approval is not the in-transit reason); facts about the order count in any reply. A rule's only trigger
  ("we only treat a parcel as lost when the carrier reports it lost") asserts nothing of this order, and
  this order's days counted ("which comes to 92 days here") are elapsed time, never a stated limit.

``tests/env/corpus/replies*.jsonl`` holds human-labelled replies; docs/methodology.md reports this
reader's false-positive and false-negative rates on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum, StrEnum, auto
from functools import lru_cache
from itertools import pairwise

from service.env.conduct import insinuations, leaks, rudeness
from service.env.language import (
    NEGATORS,
    PHRASES,
    TEMPORAL,
    Clause,
    Phrases,
    clauses,
    lemmas,
    negated_before,
    normalize,
    without_idioms,
    words,
)
from service.env.vocabulary import VOCABULARY

V, P = VOCABULARY, PHRASES
Tokens = tuple[str, ...]


@dataclass(frozen=True)
class Meaning:
    grants: frozenset[str]  # granted unconditionally: "refund", "replacement", or "claim" (the claim itself approved)
    offers: frozenset[str]  # remedies mentioned only on an open condition, hedged or as a question
    refuses: bool  # an unconditional refusal (of a remedy, the claim, the return)
    holds: bool  # says the ticket is being passed on / looked into
    reasons: frozenset[str]  # denial reasons asserted
    window_days: frozenset[int]  # return-window lengths stated
    warranty_days: frozenset[int]  # warranty lengths stated
    amounts: frozenset[float]  # money amounts stated
    order_digits: frozenset[str]  # order numbers quoted (digits)
    courteous: bool
    rude: tuple[str, ...] = field(default=())  # insults, dismissals, blame and lecturing
    leaks: tuple[str, ...] = field(default=())
    options: frozenset[str] = frozenset()  # offers left to the customer's choice: "if you'd prefer a refund"
    prejudges: bool = False  # speculates on the team's decision: "I doubt they'll accept it"
    facts: frozenset[str] = frozenset()  # facts about the order asserted in any reply: the window passed, used…
    elapsed: tuple[tuple[int, str], ...] = ()  # (days, an Elapsed kind) since delivery, as stated
    teams: frozenset[str] = frozenset()  # the queues whose teams the reply names: "our Billing team" -> "Billing"
    partial: bool = False  # states a part of the refund ("a partial refund", "half the price"): never the true one
    refused: frozenset[str] = (
        frozenset()
    )  # what a refusal refuses: a remedy it names (or its sentence named), else "claim"
    scoped: frozenset[str] = frozenset()  # reasons named only as a rule's scope ("we accept returns within 30 days")
    promised_if: frozenset[str] = frozenset()  # remedies promised if the parcel is late: "if it's not here by Friday"
    names_handler: bool = False  # names who handles the ticket: a team, a colleague ("we're looking into it": no one)
    covered: bool = False  # says this item is covered by its warranty now: "your lamp is covered by its warranty"


class Elapsed(StrEnum):
    """How a stated time since delivery is qualified (``vocabulary/facts/qualifiers.toml``)."""

    exact = auto()
    at_least = auto()
    at_most = auto()
    about = auto()


class _Condition(Enum):
    OPEN = auto()  # a decision or a finding: "if the team approves it"
    CHOICE = auto()  # the customer's: "if you'd prefer a refund"
    DEADLINE = auto()  # the parcel late by a date: "if it hasn't arrived by Friday" (what follows is a promise)


REFUND, REPLACEMENT, CLAIM = V.refund.name, V.replacement.name, V.claim.name
_TO = frozenset((w,) for w in V.infinitive.words)
_ORDER_FACTS = frozenset(c.name for c in V.reasons if c.order_fact)
_SELF_NEGATING = {c.name: Phrases(c.self_negating) for c in V.reasons}
_REASON_PHRASES = [(c.name, getattr(P, c.name), _SELF_NEGATING[c.name]) for c in V.reasons]


@lru_cache(maxsize=8192)
def meaning(reply: str) -> Meaning:
    """What ``reply`` says (pure, cached)."""
    r = _read(reply)
    text = normalize(reply)
    teams = _teams(reply)
    windows, warranties = _durations(text)
    amounts = {float((m.group(1) or m.group(2)).replace(",", "")) for m in V.money.pattern.finditer(text)}
    all_lemmas = lemmas(reply)
    elapsed = _elapsed(text)
    # this order's time since delivery stated beside a shorter window ("- Delivered: 92 days ago - Return window:
    # 30 days") states the window passed, in any layout
    asserted = r.reasons | ({V.window.name} if _past_window(elapsed, windows) else set())
    return Meaning(
        grants=frozenset(r.grants),
        offers=frozenset(r.offers - r.grants),
        refuses=r.refuses,
        holds=r.holds or bool(teams),
        reasons=frozenset(asserted | r.scoped),
        window_days=frozenset(windows),
        warranty_days=frozenset(warranties),
        amounts=frozenset(amounts),
        order_digits=frozenset(m.group(1) for m in V.order_digits.pattern.finditer(text)),
        courteous=P.courtesy.in_(all_lemmas)
        or (V.greeting.pattern.match(text) is not None and P.helpful.in_(all_lemmas)),
        rude=rudeness(text, all_lemmas) + insinuations(text),
        leaks=leaks(text, all_lemmas, teams),
        options=frozenset(r.options - r.grants),
        prejudges=r.prejudges,
        facts=frozenset(r.facts),
        elapsed=elapsed,
        teams=teams,
        partial=any(
            not V.not_partial.pattern.search(text[max(0, m.start() - 12) : m.start()])
            for m in V.partial.pattern.finditer(text)
        ),
        refused=frozenset(r.refused),
        promised_if=frozenset(r.promised_if),
        scoped=frozenset(r.scoped - asserted),
        names_handler=bool(teams) or P.handler.in_(all_lemmas),
        covered=r.covered,
    )


def _past_window(elapsed: tuple[tuple[int, str], ...], windows: set[int]) -> bool:
    """A time since delivery stated longer than a return window stated."""
    return any(days > window for days, kind in elapsed if kind != Elapsed.at_most for window in windows)


# ------------------------------------------------------------------------- clause by clause


@dataclass
class _Said:
    """What one sentence refuses and asserts, dropped when the sentence says its rule does not apply
    ("Earbuds are normally a hygiene item, but that rule doesn't apply when we've sent the wrong model")."""

    inapplicable: bool = False
    refuses: bool = False
    refused: set[str] = field(default_factory=set)
    reasons: set[str] = field(default_factory=set)
    scoped: set[str] = field(default_factory=set)  # reasons named of returns or items in general
    facts: set[str] = field(default_factory=set)


@dataclass
class _Reading:
    """What a reply's clauses say, folded clause by clause (:func:`meaning` freezes it)."""

    grants: set[str] = field(default_factory=set)
    offers: set[str] = field(default_factory=set)
    options: set[str] = field(default_factory=set)
    refuses: bool = False
    refused: set[str] = field(default_factory=set)
    promised_if: set[str] = field(default_factory=set)
    holds: bool = False
    prejudges: bool = False
    reasons: set[str] = field(default_factory=set)
    scoped: set[str] = field(default_factory=set)
    facts: set[str] = field(default_factory=set)
    covered: bool = False

    def commit(self, said: _Said) -> None:
        if not said.inapplicable:
            self.refuses = self.refuses or said.refuses
            self.refused |= said.refused
            self.reasons |= said.reasons
            self.scoped |= said.scoped
            self.facts |= said.facts


def _read(reply: str) -> _Reading:
    r = _Reading()
    carried: _Condition | None = None
    sentence = None
    mentioned: set[str] = set()  # remedies the sentence has named so far, for "…, and I've done so"
    said = _Said()
    warranty_named = False  # the last sentence named the warranty without saying it ended
    for clause in clauses(reply):
        if clause.sentence != sentence:  # a condition reaches no further than its sentence
            warranty_named = sentence is not None and _names_warranty(sentence, said)
            r.commit(said)
            carried, sentence, mentioned = None, clause.sentence, set()
            said = _Said(P.inapplicable.in_(lemmas(clause.sentence)))
            line = _label_line(clause.sentence)
            if line is not None:  # "- Duplicate charge: none found": the label and its value read as one
                _assert_reasons(line, said)
        outcome, opens = _outcome(clause, carried)
        carried = carried or opens  # "If they accept it, they'll email a label, and the refund will follow"
        if not outcome.conditional and not outcome.refuses and _future_or_done_so(clause.lemmas):
            r.grants |= mentioned  # "there's nothing stopping us from refunding it, and I've now done so"
        if not outcome.conditional and _bare_approval(clause.lemmas):
            r.grants |= mentioned  # "Refund: approved." — a label, then its value
        mentioned |= outcome.offers | outcome.grants
        r.grants |= outcome.grants
        r.offers |= outcome.offers
        r.options |= outcome.options
        r.promised_if |= outcome.promised_if
        said.refuses = said.refuses or outcome.refuses
        if outcome.refuses:  # "it's sold out, so we can't send one": the remedy its sentence named
            said.refused |= outcome.refused or (mentioned & {REFUND, REPLACEMENT}) or {CLAIM}
        r.holds = r.holds or (P.hold.in_(clause.lemmas) and not _nobody_named(clause.lemmas))
        r.prejudges = r.prejudges or _prejudges(clause, outcome)
        if not outcome.conditional:
            _assert_reasons(clause, said)
            r.covered = r.covered or _covered_now(clause)
            if warranty_named and _ends_by_anaphora(clause):  # "… a 90-day warranty. That period has now ended."
                said.reasons.add(V.warranty.name)
                said.facts.add(V.warranty.name)
        elif _limit_rule(clause):
            (said.scoped if _general(clause) else said.reasons).add(V.window.name)
    r.commit(said)
    return r


@dataclass(frozen=True)
class _Outcome:
    grants: frozenset[str] = frozenset()
    offers: frozenset[str] = frozenset()
    refuses: bool = False
    conditional: bool = False  # on an open condition: it asserts no facts either ("if it turns out to be faulty")
    options: frozenset[str] = frozenset()
    refused: frozenset[str] = frozenset()  # the remedies a refusal names
    promised_if: frozenset[str] = frozenset()  # the remedies promised if the parcel is late by a date


def _outcome(clause: Clause, inherited: _Condition | None) -> tuple[_Outcome, _Condition | None]:
    """What one clause grants, offers or refuses, and the condition it opens for the rest of its sentence
    ("If they confirm you were charged twice, the extra charge will be refunded"): None, OPEN, or CHOICE
    (the customer's: "If you'd prefer a refund instead, just let me know and I'll arrange it")."""
    tokens, span = clause.lemmas, clause.condition
    kind = _condition_kind(tokens, span) if span is not None else None
    opens = kind if span is not None and span[0] <= 1 and span[1] == len(tokens) else None
    inside: Tokens = ()
    outside = tokens
    if kind is not None and span is not None:
        inside, outside = tokens[span[0] : span[1]], tokens[: span[0]] + tokens[span[1] :]
    outside = _without_double_negation(outside)
    offers = _remedies(inside)
    if kind is not None or inherited is not None:
        offers |= _remedies(outside)
        choice = _Condition.CHOICE in (kind, inherited) and not P.hedge.in_(outside)
        late = _Condition.DEADLINE in (kind, inherited)
        options = frozenset(offers if choice else ())
        offers |= {CLAIM} if _floats_exception(tokens) else set()
        return _Outcome(
            offers=frozenset(offers), conditional=True, options=options, promised_if=frozenset(offers if late else ())
        ), opens
    if _undecided(outside) or _authority(outside):  # "nothing is decided yet", "more than I can approve myself"
        return _Outcome(offers=frozenset(offers | _remedies(outside))), opens
    if _refuses(outside):  # "we might not be able to help" hedges the refusal: it decides nothing
        refuses = not V.maybe.words & set(outside)
        return _Outcome(offers=frozenset(offers), refuses=refuses, refused=frozenset(_remedies(outside))), opens
    remedies = _remedies(outside)
    plain = without_idioms(outside)
    # a condition that still promises ("once they've looked at it") hedges nothing by its own words
    asserted = outside if span is None else tokens[: span[0]] + tokens[span[1] :]
    asserted = _drop(asserted, P.decided)  # "I've decided to let it slide": a decision made is no hedge
    asserted = _drop(asserted, P.looked)  # "I've had a good look at your order and refunded it": a check done
    asserted = _drop(asserted, P.no_condition)  # "we'll ship it out as soon as possible": no hedge
    if clause.question or P.hedge.in_(asserted) or any(t in NEGATORS for t in plain):
        asked = clause.question and P.choice.in_(outside)  # "would you like a replacement instead?"
        offers |= remedies | ({CLAIM} if _floats_exception(outside) else set())
        return _Outcome(offers=frozenset(offers), options=frozenset(remedies if asked else ())), opens
    done = P.grant.in_(outside) or _future_or_done(outside) or _done_unsaid_subject(clause)
    grants = set(remedies) if remedies and done else set()
    if _new_item_sent(_drop(_drop(outside, P.mention), P.not_the_item)):  # sending the new item is the grant
        grants.add(REPLACEMENT)
    if _claim_approved(outside) or P.anticipate.in_(outside) or P.return_arranged.in_(outside) or _puts_right(outside):
        grants.add(CLAIM)
    if remedies - grants:  # "I'll push a refund through", "we've actioned a full refund"
        grants |= _acted_on(clause) & remedies
    return _Outcome(grants=frozenset(grants), offers=frozenset(offers | (remedies - grants))), opens


def _condition_kind(tokens: Tokens, span: tuple[int, int]) -> _Condition | None:
    """Whether a condition leaves the outcome open, leaves it to the customer, or still promises it (None).
    A decision or a finding leaves it open ("if our team agrees", "once approved", "if a second charge did
    go through"); a step of the process ("once our team has finished its review") or the customer's own
    action ("if you post it back to us") does not."""
    start, end = span
    part = tokens[start:end]
    subject = next((t for t in part[1:] if t not in V.auxiliaries.words), None)
    you = subject in V.second_person.words
    if you and _chooses(part):
        return _Condition.CHOICE
    if P.deadline.in_(part) and P.not_arrived.in_(part):
        return _Condition.DEADLINE
    if P.deciding.in_(part):
        return _Condition.OPEN
    if tokens[start] in TEMPORAL or you:
        return None
    return _Condition.OPEN


def _floats_exception(tokens: Tokens) -> bool:
    """An exception to the policy still being considered ("let me check whether we can make an exception"):
    the claim is left open. (A refused one, "we can't make an exception", decides.)"""
    return P.exception.in_(tokens) and not any(t in NEGATORS for t in without_idioms(tokens))


def _chooses(part: Tokens) -> bool:
    """The customer chooses a remedy ("if you'd prefer", "if you'd rather have a refund", "if you'd like
    one") rather than an action of their own ("if you'd like to return it": still a promise)."""
    choosing = [s for s, _ in P.choice.find(part)]
    return bool(choosing) and (bool(_remedies(part)) or any(part[s + 1 : s + 2] not in _TO for s in choosing))


# ------------------------------------------------------------------------- remedies and grants


def _remedies(tokens: Tokens) -> set[str]:
    """The remedies ``tokens`` name (a remedy named as the ticket's subject, "your refund request", is none)."""
    tokens = _drop(_drop(tokens, P.mention), P.not_the_item)
    found = {name for name, p in ((REFUND, P.refund), (REPLACEMENT, P.replacement)) if p.in_(tokens)}
    if REFUND not in found and _money_back(tokens):
        found.add(REFUND)
    if REPLACEMENT not in found and _new_item_sent(tokens):
        found.add(REPLACEMENT)
    return found


def _money_back(tokens: Tokens) -> bool:
    """An amount going back to the customer: "your $313.99 will be back with you by Friday"."""
    return any(
        t.startswith("$") and V.money_back_words.words & set(tokens[i + 1 : i + 6]) for i, t in enumerate(tokens)
    )


def _new_item_sent(tokens: Tokens) -> bool:
    """A new or the right item on its way, whatever the words between: "we'll get another pair out to
    you", "a brand-new Wireless Earbuds will be dispatched". The adjective must qualify a thing ("you're
    right, we'll refund you" sends no item)."""
    items = [
        i
        for i, t in enumerate(tokens)
        if t in V.new_item.words
        and i + 1 < len(tokens)
        and tokens[i + 1].isalpha()
        and tokens[i + 1] not in V.not_a_thing.words
    ]
    return bool(items) and (P.sent_to_you.in_(tokens) or any(t in V.send_verbs.words for t in tokens))


def _puts_right(tokens: Tokens) -> bool:
    """Putting the problem right promises the outcome: "Billing will put it right"."""
    return any(
        any(t in V.future_or_perfect.words for t in tokens[max(0, s - 4) : s]) for s, _ in P.put_right.find(tokens)
    )


def _claim_approved(tokens: Tokens) -> bool:
    """ "Your return for order X is approved": the claim itself is decided, no remedy named."""
    return P.claim.in_(tokens) and any(
        not negated_before(tokens, s) and tokens[s - 1 : s] not in _TO for s, _ in P.approve.find(tokens)
    )


def _future_or_done(tokens: Tokens) -> bool:
    """A remedy verb in the future, the perfect or the passive: "we will reimburse you"."""
    for i, token in enumerate(tokens):
        if token in V.remedy_verbs.words:
            j = _skip_back(tokens, i - 1, V.adverbs.words)
            if j >= 0 and tokens[j] in V.future_perfect_or_passive.words:
                return True
    return False


def _done_unsaid_subject(clause: Clause) -> bool:
    """A report with its subject left out, the remedy verb first as a participle: "Order X: refunded $370.99
    for the lamp", "Fully reimbursed today" (the subject and "have" unsaid, as in a terse update). A verb
    group after it makes the participle an adjective: "refunded items must be returned first"."""
    tokens, raw = clause.lemmas, words(clause.text)
    if len(raw) != len(tokens):
        return False
    i = next((k for k, t in enumerate(tokens) if t not in V.adverbs.words and not _is_adverb(t)), None)
    return (
        i is not None
        and tokens[i] in V.remedy_verbs.words
        and (_ends(raw[i], V.participle_endings.words) or raw[i] in V.irregular_participles.words)
        and not any(t in V.future_perfect_or_passive.words or t in V.modals.words for t in tokens[i + 1 :])
    )


def _future_or_done_so(tokens: Tokens) -> bool:
    """ "I've now done so", "we will do that" (or a clause ending in "done", cut before its "so")."""
    found = P.done_so.find(tokens)
    if found:
        i = found[0][0]
    elif tokens and tokens[-1] in V.done_verb.words:
        i = len(tokens) - 1
    else:
        return False
    j = _skip_back(tokens, i - 1, V.adverbs.words)
    return j >= 0 and tokens[j] in V.future_or_perfect.words


def _bare_approval(tokens: Tokens) -> bool:
    """A clause that is only an approval ("approved", "confirmed and processed"), as in "Refund: approved"."""
    approval = V.approval_words.words
    return (
        bool(tokens)
        and any(t in approval for t in tokens)
        and all(t in approval or t in V.plain_fillers.words for t in tokens)
    )


def _acted_on(clause: Clause) -> set[str]:
    """Remedies that are the object of our own act, in any verb: "I'll push a refund through", "I'm
    putting a replacement in the post", "we've actioned a full refund". The verb must be ours (I, we),
    in the future, the perfect or the progressive, and give something (not "look into", "explain")."""
    tokens, raw = clause.lemmas, words(clause.text)
    found: set[str] = set()
    for i, t in enumerate(tokens[:-1]):
        if t not in V.first_person.words or len(raw) != len(tokens):
            continue
        aux, j = tokens[i + 1], i + 2
        if aux not in V.future_perfect_or_passive.words:
            continue
        going = aux in V.progressive_aux.words and P.going_to.at(tokens, j) is not None
        j += 2 if going else 0
        will = going or aux in V.will.words  # then "go" is the verb: "we will go ahead and refund you"
        while j < len(tokens) and tokens[j] in V.act_fillers.words and not (tokens[j] in V.go.words and will):
            j += 1
        if j >= len(tokens) or tokens[j] in V.not_giving.words or tokens[j] in NEGATORS or not tokens[j].isalpha():
            continue
        word = raw[j]
        perfect = not going and aux in V.perfect_aux.words
        if perfect and not (_ends(word, V.participle_endings.words) or word in V.irregular_participles.words):
            continue
        if not going and aux in V.progressive_aux.words and not _ends(word, V.progressive_endings.words):
            continue
        found |= _remedies(tokens[j + 1 : j + 5])
    return found


# ------------------------------------------------------------------------- refusals and hedges


def _refuses(tokens: Tokens) -> bool:
    """A refusal verb that is not itself negated ("we would never refuse" refuses nothing), or a negator
    governing a refusable act within the same proposition ("we can't accept", "nothing to refund")."""
    tokens = without_idioms(tokens)  # "no need to send anything back" refuses nothing
    if any(not negated_before(tokens, s) for s, _ in P.refuse_verb.find(tokens)):
        return True
    objects = [s for s, _ in P.refuse_object.find(tokens) if P.do_not.at(tokens, s) is None]
    for n in _negators(tokens):
        if _governs(tokens, n, P.refuse_verb) or _governs(tokens, n, V.inert.words):
            continue  # "we'd never decline", "that rule doesn't apply", "don't worry"
        if any(n < s <= n + 6 and not _new_proposition(tokens[n + 1 : s]) for s in objects):
            return True
    return False


def _negators(tokens: Tokens) -> list[int]:
    return [i for i, t in enumerate(tokens) if t in NEGATORS and not P.refuse_verb.in_(tokens[i : i + 1])]


def _governs(tokens: Tokens, n: int, verbs: Phrases | frozenset[str]) -> bool:
    """The negation at ``n`` governs one of ``verbs`` (through auxiliaries and a verb chain)."""
    i = n + 1
    while i < len(tokens) and tokens[i] in V.chain.words:
        i += 1
    if isinstance(verbs, Phrases):
        return any(s == i for s, _ in verbs.find(tokens))
    return i < len(tokens) and tokens[i] in verbs


def _new_proposition(between: Tokens) -> bool:
    """ "it didn't arrive and we're sending one": "and"/"or" then a subject starts a new proposition."""
    return any(t in V.coordinators.words and nxt in V.clause_subjects.words for t, nxt in pairwise(between))


def _without_double_negation(tokens: Tokens) -> Tokens:
    """``tokens`` without a denied obstacle and the first negation or refusal it cancels ("there's no
    reason we can't refund this", "nothing is stopping us from refunding it")."""
    spans = P.obstacle_denied.find(tokens)
    if not spans:
        return tokens
    start, end = spans[0]
    rest = list(tokens[end:])
    for i, t in enumerate(rest):
        if t in NEGATORS:
            del rest[i]
            break
    return tokens[:start] + tuple(rest)


def _undecided(tokens: Tokens) -> bool:
    """ "We haven't approved or refused anything yet", "no decision has been made": neither outcome."""
    if P.undecided.in_(tokens):
        return True
    plain = without_idioms(tokens)
    if not any(t in NEGATORS for t in plain):
        return False
    either = P.approve.in_(plain) and P.refuse_act.in_(plain) and bool(V.either_or.words & set(plain))
    return either or (bool(V.not_yet.words & set(plain)) and P.decision_words.in_(plain))


def _authority(tokens: Tokens) -> bool:
    """The agent's own authority, not a grant: "above the amount I can approve myself"."""
    return P.authority.in_(tokens) or bool(V.myself.words & set(tokens) and V.ability.words & set(tokens))


def _nobody_named(tokens: Tokens) -> bool:
    """ "Someone will be in touch" passes the ticket on to no one in particular."""
    return any(t in V.anyone.words for t in tokens) and not P.who.in_(tokens)


def _prejudges(clause: Clause, outcome: _Outcome) -> bool:
    """Speculates on the team's decision: "I doubt they'll accept it", "they nearly always say yes"."""
    if clause.question:
        return False
    if P.speculate.in_(clause.lemmas) and P.decides.in_(clause.lemmas):
        return True
    return P.usually.in_(clause.lemmas) and P.verdict.in_(clause.lemmas) and not outcome.conditional


# ------------------------------------------------------------------------- reasons


def _assert_reasons(clause: Clause, said: _Said) -> None:
    """The denial reasons an unconditional clause asserts, and the facts about the order among them. A
    clause about returns or items in general states the rule's scope ("we accept returns within 30 days,
    and only for unused items", "used items can't be returned"): its reasons say nothing of this order."""
    found = _reasons(clause)
    if _rule_trigger(clause):  # "we only treat a parcel as lost when the carrier reports it lost"
        start, end = clause.condition or (0, 0)
        rule = replace(clause, lemmas=clause.lemmas[:start] + clause.lemmas[end:])
        found = _reasons(rule) | (found & {V.window.name})
    if _general(clause):
        said.scoped |= found
        return
    said.reasons |= found
    said.facts |= found & _ORDER_FACTS
    tokens = clause.lemmas
    if P.window.in_(tokens) and P.window_passed.in_(tokens) and not P.window_ok.in_(tokens):
        said.facts.add(V.window.name)


def _label_line(sentence: str) -> Clause | None:
    """A line of findings, a label and its short value ("- duplicate charge: none found"), as one clause."""
    m = V.label_line.pattern.match(sentence)
    if m is None:
        return None
    text = m.group(1) + " " + m.group(2)
    return Clause(text, lemmas(text), sentence)


def _covered_now(clause: Clause) -> bool:
    """This item said to be covered by its warranty now ("your lamp is covered by its warranty"), not in the
    past ("it was covered by a 180-day warranty"), negated, asked, said of faults in general, or beside its end."""
    return (
        P.covered_now.in_(clause.lemmas)
        and not clause.negated
        and not clause.question
        and bool(V.this_order.words & set(words(clause.text)))  # "faults are covered by our warranty": the rule
        and not P.expiry.in_(lemmas(clause.sentence))
        and not V.past_be.words & set(words(clause.text))
    )


def _rule_trigger(clause: Clause) -> bool:
    """The clause's condition is a rule's only trigger ("only when the carrier reports it lost", "only if it
    is unused"): what the condition says is the rule's, never asserted of this order. The condition must have
    its own subject ("we only billed you once for this order" is a count). The window stays a reason there:
    "we only accept returns if 30 days haven't passed" is read by its own rule."""
    span, tokens = clause.condition, clause.lemmas
    if span is None or span[1] - span[0] < 2 or tokens[span[0]] not in V.triggers.words:
        return False  # "it came only a day after the estimate": a time, no rule's trigger
    if not V.restrictive.words & set(tokens[: span[0]]):
        return False
    return tokens[span[0] + 1] in V.subjects.words | V.determiners.words  # a clause, not "billed only once"


def _general(clause: Clause) -> bool:
    """The clause speaks of returns or items in general (a plural, "items"), not of this order ("it", "your")."""
    raw = set(words(clause.text))
    return bool(raw & V.general_things.words) and not raw & V.this_order.words


def _reasons(clause: Clause) -> set[str]:
    """The denial reasons ``clause`` asserts: each read by its own rule, or else asserted un-negated ("the
    warranty may have expired" asserts nothing)."""
    if V.maybe.words & set(clause.lemmas):
        return set()
    clause = _without_adverbs(clause)
    found = set()
    for name, phrases, self_negating in _REASON_PHRASES:
        rule = _REASON_RULES.get(name)
        if rule(phrases, clause) if rule is not None else _asserted(phrases, self_negating, clause):
            found.add(name)
    return found


def _asserted(phrases: Phrases, self_negating: Phrases, clause: Clause) -> bool:
    """A phrase not negated, or one that carries its own negation ("not a defect", "only one charge")."""
    if self_negating.in_(clause.lemmas):
        return True
    return any(not negated_before(clause.lemmas, start) for start, _ in phrases.find(clause.lemmas))


def _without_adverbs(clause: Clause) -> Clause:
    """Adverbs inside a verb group say nothing about the reason: "it has clearly been used", "the shoes was
    already used"."""
    kept = tuple(t for t in clause.lemmas if not _is_adverb(t) and t not in V.inner_adverbs.words)
    return clause if kept == clause.lemmas else replace(clause, lemmas=kept)


def _window_reason(phrases: Phrases, clause: Clause) -> bool:
    """A limit stated as passed or binding, not "you're well within the 30-day return period". The limit
    may sit in another clause of the sentence: "Our returns period is one month from delivery, and since
    it arrived 41 days ago, I'm unable to accept the return"."""
    tokens, sentence = clause.lemmas, lemmas(clause.sentence)
    if not phrases.in_(tokens) or P.window_ok.in_(tokens):
        return False
    return P.limit_statement.in_(sentence) or any(t in NEGATORS for t in without_idioms(sentence))


def _used_reason(phrases: Phrases, clause: Clause) -> bool:
    """The item's use, unless the sentence describes ordinary wear ("the wear that builds up with use")."""
    if _describes_wear(lemmas(clause.sentence)):
        return False
    return any(not negated_before(clause.lemmas, start) for start, _ in phrases.find(clause.lemmas))


def _wear_reason(phrases: Phrases, clause: Clause) -> bool:
    if _SELF_NEGATING[V.normal_wear.name].in_(clause.lemmas):
        return True
    return _describes_wear(lemmas(clause.sentence)) and _asserted(phrases, Phrases(()), clause)


def _describes_wear(sentence: Tokens) -> bool:
    """A sentence describing ordinary wear. Use alone ("it has been in regular use") describes wear only
    beside what wear leaves: marks, scuffs, what the photos show, "rather than a fault"."""
    if not P.wear_description.in_(sentence):
        return False
    plain = _drop(sentence, P.use_only)
    return plain != sentence and P.wear_signs.in_(plain) or P.wear_description.in_(plain)


def _unverifiable_reason(phrases: Phrases, clause: Clause) -> bool:
    return phrases.in_(clause.lemmas) and clause.negated  # "we can't verify", never "we verified"


def _found_reason(phrases: Phrases, clause: Clause) -> bool:
    """The parcel found, not an arrival still to come ("it should reach you") nor a dated delivery
    ("the item reached you 41 days ago", "it's been 44 days since you got it")."""
    tokens = clause.lemmas
    if V.payment_words.words & set(tokens) and not V.parcel_words.words & set(tokens):
        return False  # "a pending charge sometimes shows up on statements"
    dated = V.elapsed_time.pattern.search(clause.sentence) is not None
    plain = {s for s, _ in P.arrivals.find(tokens)} if dated else set()
    return any(
        not negated_before(tokens, s)
        and not V.prospective.words & set(tokens[max(0, s - 2) : s])
        and s not in plain
        and not _understands(tokens, s)
        for s, _ in phrases.find(tokens)
    )


def _understands(tokens: Tokens, s: int) -> bool:
    """ "I totally get it" is understanding the customer, not a parcel arriving: "get" after I or we."""
    before = [t for t in tokens[:s] if t not in V.adverbs.words and not _ends(t, V.adverb_endings.words)]
    return tokens[s] in V.understanding_verbs.words and bool(before) and before[-1] in V.first_person.words


def _in_transit_reason(phrases: Phrases, clause: Clause) -> bool:
    """Still on its way — a parcel lost in transit is not ("was lost in transit, so we can't refund it")."""
    self_negating = _SELF_NEGATING[V.in_transit.name]
    tokens = _drop(clause.lemmas, P.lost)
    if tokens != clause.lemmas and not self_negating.in_(tokens):
        return any(not negated_before(tokens, s) for s, _ in phrases.find(tokens))
    return _asserted(phrases, self_negating, clause)


def _lost_reason(phrases: Phrases, clause: Clause) -> bool:
    return any(not negated_before(clause.lemmas, s) for s, _ in phrases.find(clause.lemmas))


def _warranty_reason(phrases: Phrases, clause: Clause) -> bool:
    """The warranty's end stated in the sentence; its scope ("which our warranty doesn't cover") or a
    warranty still running ("it may still be covered") is no reason to decline."""
    if not P.expiry.in_(lemmas(clause.sentence)) or (P.warranty_running.in_(clause.lemmas) and not clause.negated):
        return False
    return _asserted(phrases, Phrases(()), clause)


def _names_warranty(sentence: str, said: _Said) -> bool:
    return P.warranty.in_(lemmas(sentence)) and V.warranty.name not in said.reasons


def _ends_by_anaphora(clause: Clause) -> bool:
    """The warranty's end said of "that period", "it" or "this" in the sentence after it was named."""
    sentence = lemmas(clause.sentence)
    return (
        P.expiry.in_(clause.lemmas) and P.anaphora.in_(sentence) and not P.warranty.in_(sentence) and not clause.negated
    )


def _limit_rule(clause: Clause) -> bool:
    """The window stated as the rule's own trigger, not a condition on an outcome: "our returns close once 30
    days have passed" (a clause that offers a remedy is an outcome: "once it's back, we'll refund it")."""
    tokens = clause.lemmas
    return (
        not clause.question
        and P.window_passed.in_(tokens)
        and not _remedies(tokens)
        and _window_reason(P.window, clause)
    )


_REASON_RULES = {
    V.window.name: _window_reason,
    V.used.name: _used_reason,
    V.normal_wear.name: _wear_reason,
    V.unverifiable.name: _unverifiable_reason,
    V.parcel_found.name: _found_reason,
    V.warranty.name: _warranty_reason,
    V.in_transit.name: _in_transit_reason,
    V.lost.name: _lost_reason,
}


# ------------------------------------------------------------------------- facts: durations, dates, teams


def _lengths(text: str) -> list[tuple[int, int, int]]:
    """(days, start, end) of every stated duration."""
    unit_days = V.unit_days.table
    out = [(round(int(m.group(1)) * unit_days[m.group(2)]), m.start(), m.end()) for m in V.days.pattern.finditer(text)]
    out += [
        (round(V.word_numbers.table[m.group(1)] * unit_days[m.group(2)]), m.start(), m.end())
        for m in V.word_days.pattern.finditer(text)
    ]
    return out


def _durations(text: str) -> tuple[set[int], set[int]]:
    """The return-window and warranty lengths stated: each duration goes to the nearer context (an elapsed
    time is never a limit: "delivered 223 days ago"; "ship within two days" is no window)."""
    windows: set[int] = set()
    warranties: set[int] = set()
    for days, start, end in _lengths(text):
        before, after = text[max(0, start - 40) : start], text[end : end + 50]
        if V.elapsed_after.pattern.match(after) or V.elapsed_before.pattern.search(before) or _counted(before):
            continue
        if V.earlier_period.pattern.search(before) and not V.warranty_context.pattern.search(before):
            windows.add(days)  # "after the first 30 days, faults go under the warranty": the window before it
            continue
        warranty = _distance(V.warranty_context.pattern, before, after)
        window = _distance(V.window_context.pattern, before, after)
        if warranty is not None and (window is None or warranty <= window):
            warranties.add(days)
        elif window is not None or (
            warranty is None and _distance(V.shared_context.pattern, before, after) is not None
        ):
            # a shared context ("180 days from the date of delivery") belongs to a warranty the same
            # sentence names, even beyond the near context: "the warranty on the {long name} - 180 days …"
            (warranties if window is None and _warranty_sentence(text, start, end) else windows).add(days)
    return windows, warranties


def _counted(before: str) -> bool:
    """This order's days counted ("which comes to 92 days here") or the customer's contact dated ("your
    report came in 369 days after delivery") right before a duration: the time since delivery, no limit."""
    return V.count_to.pattern.search(before) is not None or V.contact_at.pattern.search(before) is not None


def _warranty_sentence(text: str, start: int, end: int) -> bool:
    """Whether the sentence around ``text[start:end]`` names a warranty and no return window."""
    left = max(text.rfind(stop, 0, start) for stop in (". ", "! ", "? ", "\n"))
    right = min((i for i in (text.find(stop, end) for stop in (". ", "! ", "? ", "\n")) if i >= 0), default=len(text))
    sentence = text[left + 1 : right]
    return V.warranty_context.pattern.search(sentence) is not None and V.window_context.pattern.search(sentence) is None


def _distance(pattern: re.Pattern[str], before: str, after: str) -> int | None:
    gaps = [len(before) - m.end() for m in pattern.finditer(before)] + [m.start() for m in pattern.finditer(after)]
    return min(gaps) if gaps else None


def _elapsed(text: str) -> tuple[tuple[int, str], ...]:
    """The time since delivery the reply states ("it arrived 43 days ago", "it has been more than 30
    days since you received it", "you've had it for six weeks"), with how it is qualified."""
    out = []
    for days, start, end in _lengths(text):
        before, after = text[max(0, start - 60) : start], text[end : end + 60]
        if not (
            V.arrived_before.pattern.search(before)
            or (V.elapsed_after.pattern.match(after) and V.arrival_near.pattern.search(before))
            or V.since_arrival.pattern.match(after)
            or (V.contact_at.pattern.search(before) and V.after_arrival.pattern.match(after))
            or (V.count_to.pattern.search(before) and V.arrival_near.pattern.search(text[max(0, start - 120) : start]))
        ):
            continue
        qualifier = V.qualifier.pattern.search(before[-25:])
        kind = Elapsed.exact if qualifier is None else V.qualifiers.table[qualifier.group(1)]
        unit = text[start:end].split()[-1].rstrip("s").split("-")[-1]  # "30-day" -> "day"
        in_days = V.unit_days.table.get(unit) == 1
        out.append((days, kind if kind != Elapsed.exact or in_days else Elapsed.about))
    return tuple(out)


def _teams(reply: str) -> frozenset[str]:
    """The teams a reply names, by their queue: "our Billing team", "handed it to Escalations" (not the
    bank's own fraud team)."""
    found = {
        V.team_queues.table[m.group(1).lower()]
        for m in V.team.pattern.finditer(reply)
        if not V.theirs.pattern.search(reply[max(0, m.start() - 30) : m.start()])
    }
    found |= {m.group(1) or m.group(2) for m in V.bare_team.pattern.finditer(reply)}
    return frozenset(found)


# ------------------------------------------------------------------------- token helpers


def _drop(tokens: Tokens, phrases: Phrases) -> Tokens:
    """``tokens`` without every span ``phrases`` matches."""
    spans = phrases.find(tokens)
    return tuple(t for i, t in enumerate(tokens) if not any(a <= i < b for a, b in spans)) if spans else tokens


def _skip_back(tokens: Tokens, i: int, skipped: frozenset[str]) -> int:
    """The index of the first token at or before ``i`` that is not in ``skipped`` (-1 if none)."""
    while i >= 0 and tokens[i] in skipped:
        i -= 1
    return i


def _ends(word: str, endings: frozenset[str]) -> bool:
    return any(word.endswith(e) for e in endings)


def _is_adverb(token: str) -> bool:
    return _ends(token, V.adverb_endings.words) and len(token) > 4 and token not in V.not_adverbs.words
