"""How often a split's message sentences repeat, with the ticket-specific words masked.

A sentence is a run of text ending in ``.``, ``!`` or ``?``, or a line. Masked before comparing: product
names and what people call them, people's names, email addresses, postcodes, ids (orders, tickets,
SKUs), amounts, numbers and number words, dates and month names, sizes and colours — so two sentences
that differ only in those count as the same sentence. The figure is the share of a split's sentence
occurrences whose masked form occurs five or more times in that split (``bench/text_repetition.py``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from service.env.generator import _FIRST, _LAST
from service.env.store.generator import _COLOURS
from service.env.store.messages import nouns
from service.env.world import CATALOG

REPEATS = 5
_MONTHS = "january february march april may june july august september october november december"
_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty thirty "
    "first second third fourth fifth"
)


@lru_cache(maxsize=1)
def _masks() -> list[tuple[re.Pattern[str], str]]:
    words = sorted({c.name for c in CATALOG} | {n for ns in nouns().values() for n in ns}, key=len, reverse=True)
    colours = sorted({c for cs in _COLOURS.values() for c in cs if c}, key=len, reverse=True)
    names = sorted(set(_FIRST) | set(_LAST), key=len, reverse=True)
    alt = lambda xs: "|".join(re.escape(x) for x in xs)  # noqa: E731 - a one-line helper read once
    return [
        (re.compile(r"\S+@\S+"), "EMAIL"),
        (re.compile(r"\b(?:ord|shp|sku|prd|cus|trk|st_|tk_)[-_]?[a-z0-9-]+\b", re.I), "ID"),
        (re.compile(r"\b[A-Z]{1,2}\d{1,2}\s?\d[A-Z]{2}\b"), "POSTCODE"),
        (re.compile(rf"\b(?:{alt(words)})s?\b", re.I), "PRODUCT"),
        (re.compile(rf"\b(?:{alt(names)})\b", re.I), "NAME"),
        (re.compile(rf"\b(?:{alt(colours)})\b", re.I), "COLOUR"),
        (re.compile(r"\bsize\s+\w+\b", re.I), "SIZE"),
        (re.compile(r"[$£€]?\d[\d,./:-]*"), "NUM"),
        (re.compile(rf"\b(?:{alt((_MONTHS + ' ' + _NUMBER_WORDS).split())})\b", re.I), "NUM"),
    ]


def mask(sentence: str) -> str:
    text = sentence
    for pattern, token in _masks():
        text = pattern.sub(token, text)
    return " ".join(text.lower().split())


_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(message: str) -> list[str]:
    return [s.strip(" >-") for s in _SPLIT.split(message) if s.strip(" >-")]


def repetition(messages: Iterable[str], repeats: int = REPEATS) -> dict[str, float | int]:
    """The share of sentence occurrences whose masked form occurs ``repeats`` or more times."""
    masked = [mask(s) for m in messages for s in sentences(m)]
    counts = Counter(masked)
    frequent = sum(1 for s in masked if counts[s] >= repeats)
    return {
        "sentences": len(masked),
        "distinct": len(counts),
        "repeated_share": round(frequent / len(masked), 4) if masked else 0.0,
    }
