"""The store desk's text: customer messages composed from independent parts, and the customer's answers.

The wording lives in data files (``phrases/message.json``, ``phrases/answers.json``, ``phrases/nouns.json``):
each slot is a list of variants written in a small grammar —

- ``<slot>`` expands a variant of another slot, ``<slot?>`` does so half the time (else nothing);
- ``[a|b|c]`` picks one alternative (an alternative may be empty: ``[ please|]``);
- ``{name}`` is a value of the ticket (the item, the order, the customer's email, …).

A message is assembled from parts chosen independently — an opener, the context of the purchase, the
complaint and its details, what the writer wants, asides, identity details, a sign-off, an earlier
message quoted below, a message forwarded by someone else — so that sentences repeat little across a
split (``bench/text_repetition.py`` measures it). No part states the policy's answer: the facts that
decide a request are in the records, and what the writer says about them (how late, how long ago) is
their own recollection.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

PHRASES = Path(__file__).with_name("phrases")
_SLOT = re.compile(r"<([a-z0-9_]+)(\??)>")
_ALT = re.compile(r"\[([^\[\]]*\|[^\[\]]*)\]")
_VALUE = re.compile(r"\{([a-z0-9_]+)\}")


@cache
def bank(name: str) -> Mapping[str, tuple[str, ...]]:
    """A phrase file: slot → its variants (comment keys starting with '_' are dropped)."""
    data = json.loads((PHRASES / f"{name}.json").read_text(encoding="utf-8"))
    return {k: tuple(v) for k, v in data.items() if not k.startswith("_")}


@cache
def nouns() -> Mapping[str, tuple[str, ...]]:
    """Product name → what people call it ("Trail Running Shoes" → "running shoes", "trainers")."""
    data = json.loads((PHRASES / "nouns.json").read_text(encoding="utf-8"))
    return {k: tuple(v) for k, v in data.items() if not k.startswith("_")}


@dataclass
class Grammar:
    rng: random.Random
    slots: Mapping[str, tuple[str, ...]]
    values: Mapping[str, str]

    def slot(self, name: str, must_say: str | None = None, must_not_say: str | None = None) -> str:
        """A variant of ``name``; with ``must_say``, one whose template contains that text (``"{item}"``); with
        ``must_not_say``, one whose template does not (when there is such a variant)."""
        variants = self.slots.get(name)
        if not variants:
            raise KeyError(f"no phrase slot {name!r}")
        if must_say is not None:
            variants = tuple(v for v in variants if must_say in v) or variants
        if must_not_say is not None:
            variants = tuple(v for v in variants if must_not_say not in v) or variants
        return self.expand(self.rng.choice(variants))

    def expand(self, template: str, depth: int = 0) -> str:
        if depth > 8:
            raise RecursionError(f"phrase grammar nests too deep at {template!r}")
        text = template
        while True:  # innermost alternations first
            m = _ALT.search(text)
            if m is None:
                break
            text = text[: m.start()] + self.rng.choice(m.group(1).split("|")) + text[m.end() :]

        def slot(m: re.Match[str]) -> str:
            if m.group(2) == "?" and self.rng.random() < 0.5:
                return ""
            return self.expand(self.rng.choice(self.slots[m.group(1)]), depth + 1)

        text = _SLOT.sub(slot, text)

        def value(m: re.Match[str]) -> str:
            if m.group(1) not in self.values:
                raise KeyError(f"phrase {template!r} needs the value {{{m.group(1)}}}")
            return self.values[m.group(1)]

        return _VALUE.sub(value, text)


def tidy(text: str) -> str:
    """Spacing and capitals after composition: no double spaces, no space before punctuation, a capital
    at the start of every sentence."""
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" +([,.!?;:])", r"\1", text)
    text = re.sub(r"([,;:])(?=[^\s\d])", r"\1 ", text)
    text = re.sub(r"\.\.(?!\.)", ".", text)
    text = re.sub(r"(^|[.!?]\s+|\n\s*)([a-z])(?![\w.+-]*@)", lambda m: m.group(1) + m.group(2).upper(), text)
    return "\n".join(line.strip() for line in text.split("\n")).strip()


# ------------------------------------------------------------------------------ item and time


def item_noun(rng: random.Random, name: str) -> str:
    return rng.choice(nouns().get(name, (name.lower(),)))


def ago(days: int) -> str:
    """A loose phrase for how long ago (the writer's own words, not the records)."""
    if days <= 1:
        return "yesterday"
    if days < 7:
        return f"{_NUMBER_WORDS.get(days, str(days))} days ago"
    if days < 11:
        return "last week"
    if days < 18:
        return "a couple of weeks ago"
    if days < 26:
        return "about three weeks ago"
    if days < 40:
        return "about a month ago"
    if days < 75:
        return "a month or two ago"
    return "a few months ago"


def spoken_date(iso: str, rng: random.Random) -> str:
    d = date.fromisoformat(iso)
    month = d.strftime("%B")
    return rng.choice(
        (f"{d.day} {month}", f"{month} {d.day}", f"the {_ordinal(d.day)} of {month}", f"{d.day}/{d.month}")
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


_NUMBER_WORDS = {
    1: "one",
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
    11: "eleven",
    12: "twelve",
    14: "fourteen",
}


def spelled(n: int) -> str:
    """A count in words ("three"), digits past twelve."""
    return _NUMBER_WORDS.get(n, str(n))


def number(n: int, rng: random.Random) -> str:
    return _NUMBER_WORDS.get(n, str(n)) if rng.random() < 0.5 else str(n)


# ------------------------------------------------------------------------------ composition


@dataclass(frozen=True)
class Part:
    """One request as the message tells it: its slot family and the values its phrases need."""

    family: str  # damaged | defective | wrong_item | missing | late | change_of_mind | exchange | …
    values: dict[str, str]
    extras: tuple[str, ...] = ()  # further slots to say after the complaint (condition, photos, want, …)
    partial: bool = False  # about part of a line's units: the complaint must name them with {item}


def compose(rng: random.Random, parts: list[Part], shared: dict[str, Any]) -> tuple[str, str]:
    """The subject and body of a first message (see the module docstring)."""
    slots = bank("message")
    body: list[str] = []
    values: dict[str, str] = {k: str(v) for k, v in shared.items() if isinstance(v, str | int)}
    g = Grammar(rng, slots, values)
    opening = g.slot("greeting") + rng.choice((",\n\n", ", ", " — ", "!\n\n"))
    forward = bool(shared.get("forward"))  # the holder's own message, forwarded by the relative who writes
    if shared.get("relation") and not forward:
        body.append(g.slot("relative_intro"))
    for index, part in enumerate(parts):
        g.values = {**values, **part.values}
        paragraph = []
        context = g.slot("context") if not index and rng.random() < 0.45 else ""
        said_order = part.values.get("order_ref", "\0") in context
        # a part of a line's units is said by {item} ("one of the two lamps"), never by the short name; an
        # order the context named is not named again
        lead = g.slot(
            f"{part.family}_complaint",
            must_say="{item}" if part.partial else None,
            must_not_say="{order_ref}" if said_order else None,
        )
        if index:
            lead = g.slot("joiner") + " " + lead[:1].lower() + lead[1:]
        if context:
            paragraph.append(context)
        paragraph.append(lead)
        for extra in part.extras:
            paragraph.append(g.slot(extra))
        if rng.random() < 0.35:
            paragraph.append(g.slot(f"{part.family}_detail"))
        body.append(" ".join(paragraph))
    g.values = values
    if shared.get("gave_identity"):
        body.append(g.slot("identity_offer"))
    if shared.get("other_card"):
        body.append(g.slot("other_card"))
    if rng.random() < 0.3:
        body.append(g.slot("aside"))
    if shared.get("insists") and rng.random() < 0.5:
        body.append(g.slot("pressure"))
    if shared.get("injection"):
        body.insert(rng.randrange(1, len(body) + 1), g.slot("injection"))
    if forward:  # the forwarded message is signed by the holder, the note above it by the writer
        g.values = {**values, "name": str(shared.get("holder_first") or values["name"])}
    closing = g.slot("signoff", must_say="{name}" if forward else None)
    g.values = values
    text = opening + "\n\n".join(body) + "\n\n" + closing
    if forward:
        note = g.slot("forward_note") + "\n\n" + g.slot("signoff", must_say="{name}")
        text = note + "\n\n" + g.slot("forward_header") + "\n\n" + text
    elif shared.get("quoted"):
        text = (
            text
            + "\n\n"
            + g.slot("quoted_header")
            + "\n"
            + "\n".join("> " + line if line else ">" for line in tidy(g.slot("quoted_body")).split("\n"))
        )
    g.values = {**values, **parts[0].values}
    subject = g.slot(f"subject_{parts[0].family}")
    return tidy(subject), tidy(text)


def answer(rng: random.Random, slot: str, values: Mapping[str, str]) -> str:
    """One sentence (or a few) of the customer's reply, from ``phrases/answers.json``."""
    return tidy(Grammar(rng, bank("answers"), values).slot(slot))
