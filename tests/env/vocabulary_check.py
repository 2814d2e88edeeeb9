"""How a vocabulary entry is found in its example, by its concept's kind (the reply reader's tests and the store
desk's share it)."""

from __future__ import annotations

import re

from service.env.language import Phrases, clauses, lemmas, normalize, words
from service.env.vocabulary import Concept, Entry


def found(concept: Concept, entry: Entry, example: str) -> bool:
    """Whether ``entry`` is found in ``example``, read as its concept's kind reads it."""
    alternatives = concept.expand(entry.says)
    if concept.kind == "phrases":
        return Phrases(alternatives).in_(lemmas(example))
    text = normalize(example)
    if concept.kind in ("words", "table"):
        tokens = set(lemmas(example)) | set(words(text))
        return any(
            alt.lower() in tokens or re.search(rf"(?<!\w){re.escape(alt.lower())}(?!\w)", text) for alt in alternatives
        )
    if concept.kind == "endings":
        return any(w.endswith(alt) for alt in alternatives for w in words(text))
    if concept.kind == "clauses":
        return any(c.lemmas == tuple(alt.split()) for alt in alternatives for c in clauses(example))
    if concept.kind == "rewrites":
        return re.search(entry.says, example.lower().replace("’", "'")) is not None
    pattern = re.compile(concept.entry_regex(entry), concept.flags)
    target = example if concept.raw else text
    # a pattern anchored at its end ("…$") reads the words right before a duration: try every prefix
    return any(pattern.search(target[:end]) for end in range(len(target), -1, -1))
