"""The ticket sets: lookup by id, task pools, and the committed ``seed_data/`` artefacts.

Tickets are regenerated on demand from (split, index) and memoised, so the core needs no file
I/O. ``seed_data/`` holds the published copy — train and dev with their gold labels, test without
labels or hidden facts — plus the rendered policy document and a manifest with counts and a
content hash. ``python -m service.env write seed_data`` (``make data``) rewrites it bit for
bit; ``check`` verifies it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.env.generator import GENERATOR_VERSION, SPLIT_SEED_BASE, SPLIT_SIZES, generate_ticket, ticket_cell
from service.env.policy import evaluate, render_policy_markdown
from service.env.world import SPLITS, Difficulty, Family, Split, Ticket

DATASET_VERSION = f"gen-{GENERATOR_VERSION}"


class UnknownTicket(ValueError):
    pass


@lru_cache(maxsize=8192)
def _ticket(split: Split, index: int) -> Ticket:
    return generate_ticket(split, index)


def ticket_id_for(split: Split, index: int) -> str:
    return f"{split}-{SPLIT_SEED_BASE[split] + index}"


def load_ticket(ticket_id: str) -> Ticket:
    """The ticket with this id (``<split>-<seed>``); raises :class:`UnknownTicket`."""
    split, _, seed = ticket_id.partition("-")
    if split not in SPLIT_SIZES or not seed.isdigit():
        raise UnknownTicket(f"unknown ticket id {ticket_id!r}")
    index = int(seed) - SPLIT_SEED_BASE[split]  # type: ignore[index]
    if not 0 <= index < SPLIT_SIZES[split]:  # type: ignore[index]
        raise UnknownTicket(f"unknown ticket id {ticket_id!r}")
    return _ticket(split, index)  # type: ignore[arg-type]


@lru_cache(maxsize=64)
def tickets_for(split: Split, family: Family, difficulty: Difficulty) -> tuple[str, ...]:
    """Ids of the tickets of one split that belong to a (family, difficulty) cell, in order."""
    return tuple(
        ticket_id_for(split, i) for i in range(SPLIT_SIZES[split]) if ticket_cell(i) == (family, difficulty)
    )


def split_tickets(split: Split) -> list[Ticket]:
    return [_ticket(split, i) for i in range(SPLIT_SIZES[split])]


# ------------------------------------------------------------------------------------ artefacts

def _public_record(t: Ticket) -> dict[str, Any]:
    """What a test-split ticket publishes: no hidden facts, no internal recipe, no label."""
    return {
        "ticket_id": t.ticket_id,
        "split": t.split,
        "family": t.family,
        "difficulty": t.difficulty,
        "opened_on": t.opened_on,
        "subject": t.subject,
        "message": t.message,
    }


def _labelled_record(t: Ticket) -> dict[str, Any]:
    verdict = evaluate(t)
    return {**t.model_dump(mode="json"), "gold": verdict.model_dump(mode="json")}


def render_artefacts() -> dict[str, str]:
    """Every file of ``seed_data/`` as text, keyed by file name."""
    files: dict[str, str] = {}
    counts: dict[str, Any] = {}
    for split in SPLITS:
        tickets = split_tickets(split)
        record = _public_record if split == "test" else _labelled_record
        files[f"{split}.jsonl"] = "".join(json.dumps(record(t), sort_keys=True, ensure_ascii=False) + "\n" for t in tickets)
        cells = Counter((t.family, t.difficulty, evaluate(t).gold) for t in tickets)
        counts[split] = {
            "total": len(tickets),
            "cells": [
                {"family": f, "difficulty": d, "gold": g, "count": n} for (f, d, g), n in sorted(cells.items())
            ],
        }
    files["policy.md"] = render_policy_markdown()
    content = hashlib.sha256()
    for name in sorted(files):
        content.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    manifest = {
        "dataset_version": DATASET_VERSION,
        "generator_version": GENERATOR_VERSION,
        "splits": {s: {"size": SPLIT_SIZES[s], "seed_range": [SPLIT_SEED_BASE[s], SPLIT_SEED_BASE[s] + SPLIT_SIZES[s] - 1]} for s in SPLITS},
        "counts": counts,
        "content_sha256": content.hexdigest(),
        "note": "test.jsonl publishes messages only; its labels and hidden facts stay on the server.",
    }
    files["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    return files


def write(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in render_artefacts().items():
        (folder / name).write_text(text, encoding="utf-8")


def stale_files(folder: Path) -> list[str]:
    """Names of files in ``folder`` that differ from a fresh render (empty when up to date)."""
    return [
        name
        for name, text in render_artefacts().items()
        if not (folder / name).exists() or (folder / name).read_text(encoding="utf-8") != text
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("write", "check"):
        print("usage: python -m service.env write|check FOLDER", file=sys.stderr)
        return 2
    folder = Path(argv[1])
    if argv[0] == "write":
        write(folder)
        print(json.loads((folder / "manifest.json").read_text())["content_sha256"])
        return 0
    stale = stale_files(folder)
    if stale:
        print(f"stale: {', '.join(stale)} — run `make data`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
