"""The reply reader's vocabulary documents itself (issue 23): every entry of every concept file
(``service/env/vocabulary/``) carries an example, the entry is found in it, and :func:`meaning` reads the
example as the entry claims. The engine names no phrase, the lemma fixes are only those simplemma does
not already make, and the package ships every file.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import simplemma

from service.env import conduct, language, reader
from service.env.language import lemma, lemmas, normalize
from service.env.replies import Meaning, meaning
from service.env.store import customer, reading
from service.env.vocabulary import FOLDER, LANGUAGE, VOCABULARY, Vocabulary, VocabularyError
from tests.env.vocabulary_check import found

ROOT = Path(__file__).resolve().parents[2]
# the reply reader's concepts (the store desk's are tests/env/test_store_vocabulary.py's)
REPLY = [c for c in VOCABULARY.concepts.values() if c.reader == "reply"]
ENTRIES = [(c, i, e) for c in REPLY for i, e in enumerate(c.entries)]


def _read_as(m: Meaning, example: str, expect: dict[str, Any]) -> list[str]:
    """What in ``expect`` the meaning of ``example`` does not satisfy."""
    wrong = []
    for key, want in expect.items():
        if key == "lemmas":
            ok = set(want) <= set(lemmas(example))
        elif key == "normalized":
            ok = want in normalize(example)
        elif key.startswith("no_"):
            ok = not set(want) & set(getattr(m, key[3:]))
        elif key in ("rude", "leaks"):
            ok = bool(getattr(m, key)) == want
        elif isinstance(want, bool):
            ok = getattr(m, key) == want
        elif key == "elapsed":
            ok = {tuple(x) for x in want} <= set(m.elapsed)
        else:
            ok = set(want) <= set(getattr(m, key))
        if not ok:
            wrong.append(f"{key}={want!r} (read: {getattr(m, key[3:] if key.startswith('no_') else key, None)!r})")
    return wrong


@pytest.mark.parametrize("folder", sorted({c.path.parent.name for c in REPLY}))
def test_every_example_is_read_as_its_entry_claims(folder: str) -> None:
    problems = []
    for concept, index, entry in ENTRIES:
        if concept.path.parent.name != folder:
            continue
        where = f"{concept.path.relative_to(FOLDER)} #{index} {entry.says!r}"
        if not entry.example.strip():
            problems.append(f"{where}: no example")
            continue
        if not found(concept, entry, entry.example):
            problems.append(f"{where}: not found in {entry.example!r}")
            continue
        wrong = _read_as(meaning(entry.example), entry.example, entry.expect or concept.expect)
        if wrong:
            problems.append(f"{where}: {entry.example!r} read wrong: {'; '.join(wrong)}")
    assert not problems, f"{len(problems)} entries:\n" + "\n".join(problems)


def test_every_concept_says_what_it_is_and_is_used() -> None:
    engine = "\n".join(Path(m.__file__ or "").read_text() for m in (reader, conduct, language, reading, customer))
    texts = [t for c in VOCABULARY.concepts.values() for t in (*(e.says for e in c.entries), *c.around)]
    slots = {s for t in texts for s in re.findall(r"<([a-z_]+)>", t)}
    for concept in VOCABULARY.concepts.values():
        assert len(concept.about) > 15 and concept.entries, concept.path
        used = re.search(rf"\b(?:V|P|VOCABULARY|PHRASES)\.{concept.name}\b", engine) or concept.name in slots
        assert used or concept.reason, f"{concept.path}: no rule of the engine applies it"


def _literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("module", [reader, conduct, language])
def test_the_engine_names_no_word_or_phrase(module: Any) -> None:
    """No string in the engine holds two letters in a row (a regex escape like \\b aside): every word it
    knows comes from the vocabulary."""
    path = Path(module.__file__)
    found = [(line, s) for line, s in _literals(path) if re.search(r"[A-Za-z]{2}", re.sub(r"\\[A-Za-z]", "", s))]
    assert not found, found


def test_the_check_would_catch_a_phrase_in_the_engine(tmp_path: Path) -> None:
    module = tmp_path / "engine.py"
    module.write_text('"""Doc."""\nX = P.refund\nif t == "refund":\n    pass\n')
    assert [s for _, s in _literals(module) if re.search(r"[A-Za-z]{2}", s)] == ["refund"]


def test_only_the_lemma_fixes_simplemma_needs_remain() -> None:
    fixes = VOCABULARY.lemma_fixes.table
    for word, fixed in fixes.items():
        assert simplemma.lemmatize(word, lang=LANGUAGE).lower() != fixed, f"simplemma already reads {word!r}"
        assert lemma(word) == fixed
    # the 19 fixes removed in issue 23: simplemma gives them itself
    for word, base in {
        "worn": "wear", "wore": "wear", "sent": "send", "paid": "pay", "found": "find", "gotten": "get",
        "got": "get", "came": "come", "began": "begin", "bought": "buy", "took": "take", "refunded": "refund",
        "data": "data", "was": "be", "were": "be", "is": "be", "are": "be", "been": "be", "am": "be",
    }.items():  # fmt: skip
        assert lemma(word) == base, word


def test_the_package_ships_every_concept_file() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = data["service.env.vocabulary"]
    files = [p.relative_to(FOLDER).as_posix() for p in FOLDER.rglob("*.toml")]
    assert len(files) == len(VOCABULARY.concepts)
    assert all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), files


def test_a_concept_file_that_breaks_the_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    good = 'about = "A test concept of a few words."\nkind = "phrases"\nentries = [{ says = "x", example = "x" }]\n'
    (tmp_path / "a" / "one.toml").write_text(good)
    assert Vocabulary(tmp_path).one.alternatives == ("x",)
    (tmp_path / "a" / "two.toml").write_text(good.replace('"x"', '"<nothing>"', 1))
    with pytest.raises(VocabularyError, match="names no concept"):
        Vocabulary(tmp_path)
    (tmp_path / "a" / "two.toml").write_text(good.replace("says", "said"))
    with pytest.raises(VocabularyError, match="needs says and example"):
        Vocabulary(tmp_path)
