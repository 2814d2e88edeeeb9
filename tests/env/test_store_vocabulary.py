"""The store desk's readers keep their vocabulary in data files too (issue 23): every entry of
``service/env/vocabulary/store/`` carries an example, the entry is found in it, and the store desk reads the
example as the entry says — the refusal reasons told and asserted (:mod:`service.env.store.reading`), the
timelines and amounts, the topics the customer hears asked and whether a sentence asks for a yes
(:mod:`service.env.store.customer`). The readers name no phrase or pattern themselves.

Each entry's ``expect`` (or its concept's) lists what the store desk reads in the example: ``stated``,
``asserted``, ``topics`` (at least these), ``no_stated``, ``no_asserted``, ``no_topics`` (none of these),
``timelines`` (spans, at least these), ``amounts`` (cents, at least these) and ``yes`` (exactly). An entry
with ``expect = {}`` is only found in its example: 216 of the 391 entries moved from the code have no
sentence where the reader's verdict rests on them alone (another entry of the table reads it too).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from service.env.language import sentences
from service.env.store import customer, reading
from service.env.store.customer import asks_for_a_yes, topics_in
from service.env.store.reading import asserted_reasons, stated_amounts, stated_reasons, stated_timelines
from service.env.vocabulary import VOCABULARY, Concept, Entry
from tests.env.vocabulary_check import found

STORE = [c for c in VOCABULARY.concepts.values() if c.reader == "store"]


def _read_as(example: str, expect: dict[str, Any]) -> list[str]:
    """What in ``expect`` the store desk does not read in ``example``."""
    read: dict[str, Any] = {
        "stated": set(stated_reasons(example)),
        "asserted": set(asserted_reasons(example)),
        "topics": set(topics_in(example)),
        "timelines": {list(span) and tuple(span) for span in stated_timelines(example)},
        "amounts": set(stated_amounts(example)),
    }
    wrong = []
    for key, want in expect.items():
        if key == "yes":
            got: Any = any(asks_for_a_yes(s) for s in sentences(example))
            ok = got == want
        elif key.startswith("no_"):
            got = read[key[3:]]
            ok = not set(want) & got
        else:
            got = read[key]
            ok = {tuple(w) if isinstance(w, list) else w for w in want} <= got
        if not ok:
            wrong.append(f"{key}={want!r} (read: {sorted(got) if isinstance(got, set) else got!r})")
    return wrong


def _expect(concept: Concept, entry: Entry) -> dict[str, Any]:
    return entry.expect if entry.expect is not None else concept.expect


@pytest.mark.parametrize("concept", STORE, ids=lambda c: c.name)
def test_every_store_example_is_read_as_its_entry_says(concept: Concept) -> None:
    problems = []
    for index, entry in enumerate(concept.entries):
        where = f"{concept.name} #{index} {entry.says!r}"
        if not found(concept, entry, entry.example):
            problems.append(f"{where}: not found in {entry.example!r}")
            continue
        wrong = _read_as(entry.example, _expect(concept, entry))
        if wrong:
            problems.append(f"{where}: {entry.example!r} read wrong: {'; '.join(wrong)}")
    assert not problems, "\n".join(problems)


def test_the_store_vocabulary_is_where_the_readers_had_it() -> None:
    """The tables moved whole: 391 phrase entries in 26 phrase concepts, and the patterns and word lists."""
    phrases = [c for c in STORE if c.kind == "phrases"]
    assert len(phrases) == 26 and sum(len(c.entries) for c in phrases) == 391
    assert all(c.path.parent.name == "store" for c in STORE) and len(STORE) >= 50


def _literal_calls(module: Any) -> list[tuple[int, str]]:
    """Phrase tables and patterns the module writes itself: a ``Phrases``, ``re`` or ``frozenset`` call on a
    string with a word in it (two letters in a row, regex escapes aside)."""
    tree = ast.parse(Path(module.__file__).read_text())
    found_ = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name not in ("Phrases", "frozenset", "set") and not name.startswith("re."):
            continue
        for arg in ast.walk(node):
            text = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""
            if re.search(r"[A-Za-z]{2}", re.sub(r"\\[A-Za-z]", "", text)):
                found_.append((node.lineno, text))
    return found_


@pytest.mark.parametrize("module", [reading, customer], ids=["reading", "customer"])
def test_the_store_readers_write_no_phrase_table_or_pattern(module: Any) -> None:
    assert not _literal_calls(module)


def test_the_check_would_catch_a_table_in_code(tmp_path: Path) -> None:
    class Module:
        __file__ = str(tmp_path / "m.py")

    Path(Module.__file__).write_text(
        'X = Phrases("ship|dispatch")\nY = re.compile(r"\\bhow many\\b")\nZ = re.compile(r"\\d+")\n'
    )
    assert [s for _, s in _literal_calls(Module)] == ["ship|dispatch", "\\bhow many\\b"]
