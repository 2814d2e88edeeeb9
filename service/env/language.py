"""Reading free text deterministically: words, lemmas, clauses, negation and conditions.

The reply grader (:mod:`service.env.replies`) and the scripted customer (:mod:`service.env.customer`)
read what agents write. Both work on *lemmas* (simplemma's English dictionary, bundled with the
package: nothing is downloaded), matched on whole tokens — so "caused" never contains "used" and
"Underwear" never contains "wear" — and on *clauses*, the span a negation or a condition reaches
(:attr:`Clause.condition` marks the condition's own tokens, so "if you post it back we'll refund you"
keeps its consequent apart). Contractions typed without their apostrophe ("cant", "Ive") and a few
frequent misspellings ("recieve") are normalised first.

A :class:`Phrases` set is written as alternatives of lemma sequences: ``"money back|refund"``; a
``*`` inside a sequence skips up to three tokens (``"send * replacement"`` matches "send you a
replacement"), and alternatives are indexed by their first lemma. Everything is pure and cached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import simplemma

from service.env.vocabulary import LANGUAGE, VOCABULARY, Concept

V = VOCABULARY
WORD_NUMBERS: dict[str, int] = V.word_numbers.table  # "two weeks", "a month", "three days ago"
NEGATORS = V.negators.words
CONDITIONS = V.conditions.words
TEMPORAL = V.temporal.words  # a condition of time: a step of the process still promises

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'", "´": "'"})
_CONTRACTIONS = V.contractions.rewrites
_TYPOS: dict[str, str] = V.typos.table
_LEMMA_FIXES: dict[str, str] = V.lemma_fixes.table
_WORD = re.compile(r"[a-z]+-\d+|\$?\d+(?:[.,]\d+)*|[a-z]+(?:-[a-z]+)*|[a-z]")
_IDENTIFIER = re.compile(r"[a-z]+-\d+")  # "ord-83677752": one token, so a phrase's gap counts it once
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = V.clause_breaks.pattern
_PARTICIPLE_CONDITIONS = V.participle_conditions.words  # matched on the words: their lemmas are plain verbs
_SUBJECTS, _MODALS = V.subjects.words, V.modals.words
_FRONTED = V.fronted_conditions.words  # a condition only where it opens the clause: "should you need anything"
_THAT = [[w] for w in V.that_complement.words]  # "provided that …"
_CHAIN, _NEGATION_HEADS = V.chain.words, V.negation_heads.words  # what a negation reaches through, and starts with


@lru_cache(maxsize=16384)
def normalize(text: str) -> str:
    text = text.translate(_APOSTROPHES).lower()
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    return text


@lru_cache(maxsize=32768)
def lemma(word: str) -> str:
    word = _TYPOS.get(word, word)
    if word in _LEMMA_FIXES:
        return _LEMMA_FIXES[word]
    if not word.isalpha():
        return word
    return simplemma.lemmatize(word, lang=LANGUAGE).lower()


def words(text: str) -> list[str]:
    """Lower-case word tokens of already-normalised text (hyphenated words split; an identifier stays whole)."""
    out = []
    for token in _WORD.findall(text):
        if "-" in token and not token.startswith("$") and not _IDENTIFIER.fullmatch(token):
            out.extend(token.split("-"))
        else:
            out.append(token)
    return out


@lru_cache(maxsize=8192)
def lemmas(text: str) -> tuple[str, ...]:
    return tuple(lemma(w) for w in words(normalize(text)))


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


@dataclass(frozen=True)
class Clause:
    text: str  # normalised
    lemmas: tuple[str, ...]
    sentence: str  # the normalised sentence it belongs to

    @property
    def negated(self) -> bool:
        return any(t in NEGATORS for t in without_idioms(self.lemmas))

    @property
    def conditional(self) -> bool:
        return self.condition is not None

    @property
    def condition(self) -> tuple[int, int] | None:
        """The (start, end) token span of the condition ("if our team agrees"), or None.

        It runs from the condition word to the consequent ("…, we'll refund you": a subject and a
        modal after the condition's own subject) or to the end of the clause. "should" is a condition
        only where it opens the clause ("should you need anything"). Whether the condition really
        leaves the outcome open is for the reader to judge (:mod:`service.env.replies`)."""
        tokens, raw = self.lemmas, words(self.text)  # one word per lemma
        start = next((i for i in range(len(tokens)) if _opens_condition(tokens, raw, i)), None)
        if start is None:
            return None
        for i in range(start + 2, len(tokens) - 1):
            if tokens[i] in _SUBJECTS and tokens[i + 1] in _MODALS:
                return start, i
        return start, len(tokens)

    @property
    def question(self) -> bool:
        return self.sentence.rstrip().endswith("?")


def _opens_condition(tokens: tuple[str, ...], raw: list[str], i: int) -> bool:
    token = tokens[i]
    if token in CONDITIONS or (token in _FRONTED and i == 0):
        return True
    if _AS_SOON_AS.at(tokens, i) is not None:  # "as soon as it's back", never "as soon as possible"
        return _NO_CONDITION.at(tokens, i) is None
    return i < len(raw) and raw[i] in _PARTICIPLE_CONDITIONS and (i == 0 or raw[i + 1 : i + 2] in _THAT)


def without_idioms(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """``tokens`` without the idioms whose "no"/"not" negates nothing ("at no cost", "not your fault")."""
    spans = _IDIOMS.find(tokens)
    if not spans:
        return tokens
    drop = {i for start, end in spans for i in range(start, end)}
    return tuple(t for i, t in enumerate(tokens) if i not in drop)


def negated_before(tokens: tuple[str, ...], start: int) -> bool:
    """A negator governs the phrase at ``start``: auxiliaries, modals and a verb chain may stand in
    between ("we can't approve", "I'm not going to refuse this", "we would never dream of turning it down")."""
    i = start - 1
    while i >= 0 and tokens[i] in _CHAIN:
        i -= 1
    return i >= 0 and tokens[i] in _NEGATION_HEADS


@lru_cache(maxsize=4096)
def clauses(text: str) -> tuple[Clause, ...]:
    """The text's clauses, in order, each with its lemmas and the sentence it belongs to."""
    out = []
    for sentence in sentences(normalize(text)):
        for part in _CLAUSE.split(sentence):
            if part and part.strip():
                out.append(Clause(part.strip(), lemmas(part), sentence))
    return tuple(out)


class Phrases:
    """Alternatives of lemma sequences, matched on whole tokens; ``*`` skips up to three tokens.

    Built from a concept of the vocabulary (its alternatives) or from alternatives given directly."""

    GAP = 3

    def __init__(self, alternatives: Concept | Iterable[str]) -> None:
        if isinstance(alternatives, Concept):
            texts: tuple[str, ...] = alternatives.alternatives
        elif isinstance(alternatives, str):  # "a|b|c", never its characters
            texts = tuple(alternatives.split("|"))
        else:
            texts = tuple(alternatives)
        self.alternatives: tuple[tuple[str, ...], ...] = tuple(_parse(alt) for alt in texts if alt.strip())
        # Alternatives by their first lemma, so a token is tried only against those that can start there.
        self._by_first: dict[str, list[int]] = {}
        for index, alt in enumerate(self.alternatives):
            self._by_first.setdefault(alt[0], []).append(index)

    def find(self, tokens: tuple[str, ...]) -> list[tuple[int, int]]:
        """Every (start, end) token span where an alternative matches, alternative by alternative."""
        found = []
        for start, token in enumerate(tokens):
            for index in self._by_first.get(token, ()):
                end = _match(self.alternatives[index], tokens, start)
                if end is not None:
                    found.append((index, start, end))
        return [(start, end) for _, start, end in sorted(found)]

    def at(self, tokens: tuple[str, ...], start: int) -> int | None:
        """The end of an alternative that matches at ``start``, or None."""
        token = tokens[start] if start < len(tokens) else None
        for index in self._by_first.get(token, ()) if token is not None else ():
            end = _match(self.alternatives[index], tokens, start)
            if end is not None:
                return end
        return None

    def in_(self, tokens: tuple[str, ...]) -> bool:
        return any(
            _match(self.alternatives[index], tokens, start) is not None
            for start, token in enumerate(tokens)
            for index in self._by_first.get(token, ())
        )


def _parse(alt: str) -> tuple[str, ...]:
    """One alternative as lemmas, ``*`` kept as a gap (the word tokenizer alone would drop it)."""
    out: list[str] = []
    for i, part in enumerate(alt.split("*")):
        if i:
            out.append("*")
        out.extend(lemma(w) for w in words(normalize(part)))
    return tuple(out)


def _match(alt: tuple[str, ...], tokens: tuple[str, ...], start: int) -> int | None:
    i, j = 0, start
    while i < len(alt):
        if alt[i] == "*":
            nxt = alt[i + 1] if i + 1 < len(alt) else None
            if nxt is None:
                return j
            for skip in range(Phrases.GAP + 1):
                if j + skip < len(tokens) and tokens[j + skip] == nxt:
                    j += skip
                    break
            else:
                return None
            i += 1
            continue
        if j >= len(tokens) or tokens[j] != alt[i]:
            return None
        i, j = i + 1, j + 1
    return j


class ConceptPhrases:
    """Every phrases concept of the vocabulary as :class:`Phrases`, built on first use: ``PHRASES.refund``."""

    def __getattr__(self, name: str) -> Phrases:
        phrases = Phrases(VOCABULARY[name])
        setattr(self, name, phrases)
        return phrases


PHRASES = ConceptPhrases()
_IDIOMS = PHRASES.idioms
_AS_SOON_AS = PHRASES.as_soon_as
_NO_CONDITION = PHRASES.no_condition
