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
from dataclasses import dataclass
from functools import lru_cache

import simplemma

# Numbers written as words, for durations ("two weeks", "a month") and counts ("three days ago").
WORD_NUMBERS = {
    "one": 1,
    "a": 1,
    "an": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "ten": 10,
    "twelve": 12,
    "fourteen": 14,
    "fifteen": 15,
    "eighteen": 18,
    "twenty": 20,
    "thirty": 30,
    "sixty": 60,
    "ninety": 90,
}

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'", "´": "'"})
_CONTRACTIONS = (
    (re.compile(r"\bcan't\b|\bcannot\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"\b(\w+)n't\b"), r"\1 not"),
    (re.compile(r"\b(\w+)'ll\b"), r"\1 will"),
    (re.compile(r"\b(\w+)'ve\b"), r"\1 have"),
    (re.compile(r"\b(\w+)'re\b"), r"\1 are"),
    (re.compile(r"\b(\w+)'d\b"), r"\1 would"),
    (re.compile(r"\b(i)'m\b"), r"\1 am"),
    (re.compile(r"\b(it|that|there|what|here|he|she)'s\b"), r"\1 is"),
    # the same contractions typed without the apostrophe: "we cant", "Ive passed"
    (re.compile(r"\bcant\b"), "can not"),
    (re.compile(r"\bwont\b"), "will not"),
    (re.compile(r"\b(do|did|does|is|was|are|were|have|has|had|could|would|should)nt\b"), r"\1 not"),
    (re.compile(r"\b(i|we|you|they)ve\b"), r"\1 have"),
    (re.compile(r"\b(you|they)(ll|re)\b"), lambda m: m.group(1) + (" will" if m.group(2) == "ll" else " are")),
    (re.compile(r"\bim\b"), "i am"),
    (re.compile(r"\bthats\b"), "that is"),
)
# Frequent misspellings of the words the readers look for.
_TYPOS = {
    "recieve": "receive",
    "recieved": "received",
    "thansk": "thanks",
    "thnaks": "thanks",
    "thx": "thanks",
    "pls": "please",
    "plz": "please",
    "unfortunatly": "unfortunately",
    "sory": "sorry",
    "replacment": "replacement",
    "refudn": "refund",
    "warrenty": "warranty",
    "warrantee": "warranty",
    "garantee": "guarantee",
    "appologies": "apologies",
    "recieving": "receiving",
    "definately": "definitely",
    "ur": "your",
    "u": "you",
    "cos": "because",
    "coz": "because",
}
_WORD = re.compile(r"\$?\d+(?:[.,]\d+)*|[a-z]+(?:-[a-z]+)*|[a-z]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# Clause boundaries: punctuation and the conjunctions that start a new proposition.
_CLAUSE = re.compile(
    r"[;:,()—–]|\s-\s|\b(?:but|however|although|though|whereas|while|so|because|since|unless|otherwise|and then)\b"
)
_LEMMA_FIXES = {
    "worn": "wear",
    "wore": "wear",
    "sent": "send",
    "broke": "break",
    "paid": "pay",
    "found": "find",
    "left": "leave",
    "gotten": "get",
    "got": "get",
    "gone": "go",
    "came": "come",
    "began": "begin",
    "bought": "buy",
    "took": "take",
    "refunded": "refund",
    "data": "data",
    "us": "us",
    "was": "be",
    "were": "be",
    "is": "be",
    "are": "be",
    "been": "be",
    "am": "be",
}

NEGATORS = frozenset(
    {
        "not",
        "no",
        "never",
        "unable",
        "nothing",
        "neither",
        "nor",
        "without",
        "cannot",
        "decline",
        "deny",
        "refuse",
        "reject",
    }
)
CONDITIONS = frozenset({"if", "once", "when", "whenever", "whether", "unless", "after"})
# Participles that open a condition only as the clause's first word (or before "that"): "provided it is
# unused, …" — not "we've provided a label". Matched on the words, as their lemmas are plain verbs.
_PARTICIPLE_CONDITIONS = frozenset({"provided", "providing", "assuming", "supposing"})
TEMPORAL = frozenset({"once", "when", "whenever", "after", "as"})  # "as" opens "as soon as"
# A consequent inside the clause starts at a subject followed by a modal: "if you post it back we'll refund you".
_SUBJECTS = frozenset({"we", "i", "they", "it", "you", "this", "that", "there", "he", "she"})
_MODALS = frozenset({"will", "would", "can", "shall", "could", "may", "might", "should"})


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
    return simplemma.lemmatize(word, lang="en").lower()


def words(text: str) -> list[str]:
    """Lower-case word tokens of already-normalised text (hyphenated words stay whole and also split)."""
    out = []
    for token in _WORD.findall(text):
        if "-" in token and not token.startswith("$"):
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
    if token in CONDITIONS or (token == "should" and i == 0):
        return True
    if token == "as" and tokens[i + 1 : i + 3] == ("soon", "as"):
        return True
    return i < len(raw) and raw[i] in _PARTICIPLE_CONDITIONS and (i == 0 or raw[i + 1 : i + 2] == ["that"])


def without_idioms(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """``tokens`` without the idioms whose "no"/"not" negates nothing ("at no cost", "not your fault")."""
    spans = _IDIOMS.find(tokens)
    if not spans:
        return tokens
    drop = {i for start, end in spans for i in range(start, end)}
    return tuple(t for i, t in enumerate(tokens) if i not in drop)


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
    """Alternatives of lemma sequences, matched on whole tokens; ``*`` skips up to three tokens."""

    GAP = 3

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.alternatives: tuple[tuple[str, ...], ...] = tuple(_parse(alt) for alt in spec.split("|") if alt.strip())
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


_IDIOMS = Phrases(
    "no cost|no charge|no extra|no additional|no problem|no worries|no worry|no trouble|no hassle|no need to worry|"
    "no later than|not your fault|no fault of your own|not only|no doubt|without delay|without any cost|without charge|"
    "no questions ask|free of charge|"
    # eagerness, not refusal: "we can't wait to get the right one to you"
    "can not wait|could not wait|not wait to|"
    # not having to do something refuses nothing: "no need to send anything back", "you don't have to return it"
    "no need to|not need to|need not|not have to|not necessary to"
)
