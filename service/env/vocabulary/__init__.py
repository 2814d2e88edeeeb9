"""What the readers know of English: one data file per concept, each entry with its example.

The reply reader (:mod:`service.env.reader`, over :mod:`service.env.language`) names no word or phrase: it
applies the concepts in this folder, loaded once at import; so do the store desk's readers
(:mod:`service.env.store.reading`, :mod:`service.env.store.customer`), from ``store/``. A concept is a TOML file,
``<folder>/<name>.toml``, named by its file (names are unique across folders)::

    about = "A refund, in any words: money going back to the customer."
    kind = "phrases"
    expect = { grants = ["refund"] }            # how meaning() reads each example (see below)
    entries = [
      { says = "money back", example = "Don't worry, you'll definitely get your money back." },
    ]

Kinds, by how ``says`` is read:

* ``phrases``: a sequence of lemmas matched on whole tokens (``"be refund"`` matches "has been
  refunded"); ``*`` skips up to three tokens (``"credit * card"``); ``<name>`` stands for every
  alternative of another concept (``"<new_item> * <dispatch>"``).
* ``words``: one token each (a lemma, or the word as written where the reader says so); ``<name>``
  includes another concept's words.
* ``endings``: word endings (``"ly"``). ``clauses``: a whole clause, as lemmas (``"come on"``).
* ``pattern``: a regular expression on the normalised text (``on = "raw"``: on the text as written;
  ``flags = "i"``: ignoring case). The entries are alternatives, joined by ``|`` between the two
  strings of ``around`` (which may hold slots too); ``<name>`` inserts another pattern concept whole, or a
  words/table/phrases concept's entries as bare alternatives.
* ``table``: ``says`` stands for ``value`` (a typo for its word, a number word for its number).
* ``rewrites``: ``says`` is a pattern replaced by ``becomes``, in order.

An entry may carry ``self_negating = true`` (it states its own negation: "not a defect"), and a
concept ``reason = true`` (its name is one of the reasons :func:`~service.env.replies.meaning` reads) and
``order_fact = true`` (the reason is a fact about the order, false in any reply where untrue).

A concept's ``reader`` says whose reading its ``expect`` describes: ``"reply"`` (the default) or ``"store"``
(``tests/env/test_store_vocabulary.py`` lists the store desk's keys: reasons stated and asserted, timelines,
amounts, topics asked, a request for a yes).

``expect`` (on the concept, or on an entry to override it) says what :func:`service.env.replies.meaning`
reads in the example: a set field of :class:`~service.env.reader.Meaning` (``grants``, ``reasons``,
``scoped``, ``refused``, ``promised_if``, ``amounts``, ``window_days``, ``elapsed``…: these at least),
``no_`` and its name (none of these), ``refuses``/``holds``/``courteous``/``prejudges``/``partial``
(exactly), ``rude``/``leaks`` (something or nothing), ``lemmas`` (the example's lemmas include these)
and ``normalized`` (its normalised text contains this). ``tests/env/test_replies_vocabulary.py`` checks
every example: the entry is found in it, and it is read as expected — so the data documents itself and
cannot rot.

To extend the reader, add an entry with the sentence that needs it as its example (docs/development.md).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().parent
KINDS = frozenset({"phrases", "words", "endings", "clauses", "pattern", "table", "rewrites"})
_CONCEPT_KEYS = frozenset(
    {"about", "kind", "expect", "entries", "around", "flags", "on", "reason", "order_fact", "reader"}
)
READERS = frozenset({"reply", "store"})  # whose reading a concept's ``expect`` describes
_ENTRY_KEYS = frozenset({"says", "example", "value", "becomes", "self_negating", "expect"})
LANGUAGE = "en"  # simplemma's dictionary, for the lemmas of text and of the entries
_SLOT = re.compile(r"<([a-z_]+)>")
_FLAGS = {"i": re.IGNORECASE}


class VocabularyError(ValueError):
    """A concept file that does not follow the format above."""


@dataclass(frozen=True)
class Entry:
    """One entry of a concept: what it says, the example that justifies it, and what it stands for."""

    says: str
    example: str
    value: Any = None  # table: what ``says`` stands for; rewrites: what replaces it
    self_negating: bool = False
    expect: dict[str, Any] | None = None  # overrides the concept's


@dataclass(frozen=True, eq=False)
class Concept:
    """A concept file, loaded: its entries and, by its kind, the words, phrases or pattern they make."""

    name: str
    kind: str
    about: str
    entries: tuple[Entry, ...]
    path: Path
    vocabulary: Vocabulary = field(repr=False)
    expect: dict[str, Any] = field(default_factory=dict)
    around: tuple[str, str] = ("", "")
    flags: int = 0
    raw: bool = False  # pattern: matched on the text as written, not normalised
    reason: bool = False
    order_fact: bool = False
    reader: str = "reply"  # the reader its expectations describe: the reply reader, or the store desk's

    @cached_property
    def alternatives(self) -> tuple[str, ...]:
        """Every alternative ``says`` makes, other concepts' slots expanded, in entry order, no repeats."""
        return _unique(alt for entry in self.entries for alt in self.expand(entry.says))

    def expand(self, says: str) -> list[str]:
        """``says`` with each ``<name>`` replaced by every alternative of that concept."""
        slot = _SLOT.search(says)
        if slot is None:
            return [says]
        inner = self.vocabulary[slot.group(1)].alternatives
        return [out for alt in inner for out in self.expand(says[: slot.start()] + alt + says[slot.end() :])]

    @cached_property
    def words(self) -> frozenset[str]:
        return frozenset(self.alternatives)

    @cached_property
    def self_negating(self) -> tuple[str, ...]:
        """The alternatives of the entries that state their own negation."""
        return _unique(alt for entry in self.entries if entry.self_negating for alt in self.expand(entry.says))

    @cached_property
    def sequences(self) -> frozenset[tuple[str, ...]]:
        """``clauses``: each entry as its sequence of lemmas."""
        return frozenset(tuple(alt.split()) for alt in self.alternatives)

    @cached_property
    def table(self) -> dict[str, Any]:
        return {entry.says: entry.value for entry in self.entries}

    @cached_property
    def regex(self) -> str:
        """``pattern``: the regular expression the entries make (slots filled, in ``around`` too), as a string."""
        body = "|".join(self.filled(e.says) for e in self.entries)
        return self.filled(self.around[0]) + body + self.filled(self.around[1])

    def entry_regex(self, entry: Entry) -> str:
        """``pattern``: the regular expression of one entry alone, between the concept's ``around``."""
        return self.filled(self.around[0]) + self.filled(entry.says) + self.filled(self.around[1])

    def filled(self, text: str) -> str:
        """A pattern's ``text`` with each ``<name>`` replaced by what that concept inserts."""
        return _SLOT.sub(lambda m: self.vocabulary[m.group(1)].inserted, text)

    @cached_property
    def inserted(self) -> str:
        """What a ``<name>`` slot of a pattern becomes: a pattern whole, other kinds' entries as alternatives."""
        return self.regex if self.kind == "pattern" else "|".join(self.alternatives)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.regex, self.flags)

    @cached_property
    def rewrites(self) -> tuple[tuple[re.Pattern[str], str], ...]:
        return tuple((re.compile(entry.says), str(entry.value)) for entry in self.entries)


class Vocabulary:
    """Every concept of a folder, by name: ``VOCABULARY.refund`` or ``VOCABULARY["refund"]``."""

    def __init__(self, folder: Path) -> None:
        self.concepts: dict[str, Concept] = {}
        for path in sorted(folder.rglob("*.toml")):
            concept = _load(path, self)
            if concept.name in self.concepts:
                raise VocabularyError(f"{path}: a concept named {concept.name!r} exists already")
            self.concepts[concept.name] = concept
        self.__dict__.update(self.concepts)  # plain attributes: the reader looks them up in its inner loops
        # the concepts whose names are the reasons a reply asserts (Meaning.reasons)
        self.reasons: tuple[Concept, ...] = tuple(c for c in self.concepts.values() if c.reason)
        for concept in self.concepts.values():
            for text in (*(entry.says for entry in concept.entries), *concept.around):
                for slot in _SLOT.findall(text):
                    if slot not in self.concepts:
                        raise VocabularyError(f"{concept.path}: {text!r} names no concept {slot!r}")

    def __getitem__(self, name: str) -> Concept:
        return self.concepts[name]

    def __getattr__(self, name: str) -> Concept:
        try:
            return self.concepts[name]
        except KeyError:
            raise AttributeError(f"no concept {name!r} in the vocabulary") from None


def _load(path: Path, vocabulary: Vocabulary) -> Concept:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    unknown = set(data) - _CONCEPT_KEYS
    if unknown or data.get("kind") not in KINDS or "about" not in data or data.get("reader", "reply") not in READERS:
        raise VocabularyError(
            f"{path}: needs about, a kind of {sorted(KINDS)} and a reader of {sorted(READERS)}; "
            f"unknown keys {sorted(unknown)}"
        )
    entries = []
    for raw in data.get("entries", ()):
        if set(raw) - _ENTRY_KEYS or "says" not in raw or "example" not in raw:
            raise VocabularyError(f"{path}: an entry needs says and example, and only {sorted(_ENTRY_KEYS)}: {raw}")
        entries.append(
            Entry(
                says=raw["says"],
                example=raw["example"],
                value=raw.get("value", raw.get("becomes")),
                self_negating=raw.get("self_negating", False),
                expect=raw.get("expect"),
            )
        )
    around = data.get("around", ("", ""))
    return Concept(
        name=path.stem,
        kind=data["kind"],
        about=data["about"],
        entries=tuple(entries),
        path=path,
        vocabulary=vocabulary,
        expect=data.get("expect", {}),
        around=(around[0], around[1]),
        flags=sum(_FLAGS[f] for f in data.get("flags", "")),
        raw=data.get("on") == "raw",
        reason=data.get("reason", False),
        order_fact=data.get("order_fact", False),
        reader=data.get("reader", "reply"),
    )


def _unique(items: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


VOCABULARY = Vocabulary(FOLDER)
"""The reader's vocabulary, loaded once at import."""
