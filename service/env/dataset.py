"""The ticket sets: the public train/dev splits, a deployment's private test split, and the
committed ``seed_data/`` artefacts.

A :class:`Dataset` is what a deployment serves. Its public splits are the same everywhere (their
keys derive from the generator version); its test split is generated from the deployment's
secret ``test_key``, so only a deployment that holds the key can build — and grade — it. Tickets
are regenerated on demand and memoised, so the core needs no file I/O.

``seed_data/`` holds the published copy of the public splits with their gold labels, the rendered
policy document, and a manifest with counts and a content hash (the test split contributes only
its size). ``python -m service.env write seed_data`` (``make data``) rewrites it bit for bit;
``check`` verifies it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.env.errors import EnvError
from service.env.generator import (
    CELLS,
    GENERATOR_VERSION,
    SPLIT_SIZES,
    generate_ticket,
    pool_size,
    public_split_key,
    ticket_id_for,
)
from service.env.policy import evaluate, render_policy_markdown
from service.env.store.clauses import render_store_policy
from service.env.store.generator import (
    STORE_GENERATOR_VERSION,
    STORE_SPLIT_SIZES,
    generate_store_ticket,
    store_pool_size,
    store_ticket_id,
)
from service.env.store.policy import decide
from service.env.store.world import StoreTicket
from service.env.world import DIFFICULTIES, SPLITS, Difficulty, Family, Split, Ticket

DATASET_VERSION = f"gen-{GENERATOR_VERSION}+store-{STORE_GENERATOR_VERSION}"
HIDDEN_SPLIT: Split = "test"
PUBLIC_SPLITS: tuple[Split, ...] = tuple(s for s in SPLITS if s != HIDDEN_SPLIT)
# Deriving the test key from an operator's passphrase is deliberately slow: the key's fingerprint
# is public, so a short passphrase could otherwise be guessed offline from it.
_KDF_SALT = b"ecomm-support-env/test-split-key"


class UnknownTicket(EnvError):
    pass


class MissingTestKey(EnvError):
    pass


# Cached: a process derives each secret's key once (every app start pays it otherwise — 0.2–0.7 s —,
# and a test process starts hundreds of apps); a guesser's cost per try is unchanged.
@lru_cache(maxsize=16)
def derive_test_key(secret: str) -> bytes:
    """The 32-byte test-split key for a deployment secret (``TEST_SPLIT_KEY``), via scrypt."""
    if not secret:
        raise ValueError("the test split secret must not be empty")
    return hashlib.scrypt(secret.encode(), salt=_KDF_SALT, n=2**14, r=8, p=1, dklen=32)


def key_fingerprint(key: bytes) -> str:
    """A public, non-reversible name for a test key: results are comparable only under the same one."""
    return hmac.new(key, b"fingerprint", hashlib.sha256).hexdigest()[:16]


@lru_cache(maxsize=8192)
def _ticket(key: bytes, split: Split, family: Family, difficulty: Difficulty, position: int) -> Ticket:
    return generate_ticket(key, split, family, difficulty, position)


@lru_cache(maxsize=64)
def _pool(key: bytes, family: Family, difficulty: Difficulty, size: int) -> tuple[str, ...]:
    return tuple(ticket_id_for(key, family, difficulty, k) for k in range(size))


@lru_cache(maxsize=2048)
def _store_ticket(key: bytes, split: Split, difficulty: Difficulty, position: int) -> StoreTicket:
    return generate_store_ticket(key, split, difficulty, position)


@lru_cache(maxsize=64)
def _store_pool(key: bytes, difficulty: Difficulty, size: int) -> tuple[str, ...]:
    return tuple(store_ticket_id(key, difficulty, k) for k in range(size))


@lru_cache(maxsize=16)
def _store_index(key: bytes, split: Split) -> dict[str, tuple[Difficulty, int]]:
    return {
        tid: (difficulty, k)
        for difficulty in DIFFICULTIES
        for k, tid in enumerate(_store_pool(key, difficulty, store_pool_size(split, difficulty)))
    }


def family_pool_size(split: Split, family: Family, difficulty: Difficulty) -> int:
    """How many tickets the (family, difficulty) pool of ``split`` holds, for every family."""
    if family == "store":
        return store_pool_size(split, difficulty)
    return pool_size(split, family, difficulty)


@lru_cache(maxsize=16)
def _index(key: bytes, split: Split) -> dict[str, tuple[Family, Difficulty, int]]:
    """Ticket id → (family, difficulty, position) for every ticket of a split."""
    return {
        tid: (family, difficulty, k)
        for family, difficulty in CELLS
        for k, tid in enumerate(_pool(key, family, difficulty, pool_size(split, family, difficulty)))
    }


@dataclass(frozen=True)
class Dataset:
    """The splits a deployment serves: train and dev always, test when it holds ``test_key``."""

    test_key: bytes | None = None

    @property
    def splits(self) -> tuple[Split, ...]:
        return SPLITS if self.test_key is not None else PUBLIC_SPLITS

    @property
    def test_fingerprint(self) -> str | None:
        return key_fingerprint(self.test_key) if self.test_key is not None else None

    def key(self, split: str) -> bytes:
        if split in PUBLIC_SPLITS:
            return public_split_key(split)
        if split == HIDDEN_SPLIT:
            if self.test_key is None:
                raise MissingTestKey("the test split is generated from a deployment key, and none is configured here")
            return self.test_key
        raise EnvError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")

    def pool(self, split: str, family: Family, difficulty: Difficulty) -> tuple[str, ...]:
        """Ids of one (family, difficulty) pool of ``split``; ``seed = k`` selects entry ``k``."""
        key = self.key(split)
        if family == "store":
            return _store_pool(key, difficulty, store_pool_size(split, difficulty))  # type: ignore[arg-type]
        return _pool(key, family, difficulty, pool_size(split, family, difficulty))  # type: ignore[arg-type]

    def store_ticket(self, ticket_id: str) -> StoreTicket:
        """The store-desk conversation with this id; raises :class:`UnknownTicket`."""
        for split in self.splits:
            key = self.key(split)
            place = _store_index(key, split).get(ticket_id)
            if place is not None:
                return _store_ticket(key, split, *place)
        raise UnknownTicket(f"unknown store ticket id {ticket_id!r}")

    def store_tickets(self, split: str) -> list[StoreTicket]:
        """Every store-desk conversation of ``split``, easy, medium then hard."""
        key = self.key(split)
        return [
            _store_ticket(key, split, difficulty, k)
            for difficulty in DIFFICULTIES
            for k in range(store_pool_size(split, difficulty))  # type: ignore[arg-type]
        ]

    def ticket(self, ticket_id: str) -> Ticket:
        """The ticket with this id, from any split this dataset serves; raises :class:`UnknownTicket`."""
        for split in self.splits:
            key = self.key(split)
            place = _index(key, split).get(ticket_id)
            if place is not None:
                return _ticket(key, split, *place)
        raise UnknownTicket(f"unknown ticket id {ticket_id!r}")

    def tickets(self, split: str) -> list[Ticket]:
        """Every ticket of ``split``, pool by pool in :data:`CELLS` order."""
        key = self.key(split)
        return [
            _ticket(key, split, family, difficulty, k)
            for family, difficulty in CELLS
            for k in range(pool_size(split, family, difficulty))  # type: ignore[arg-type]
        ]


PUBLIC = Dataset()
"""The public splits only: what anyone can rebuild from this code."""


# ------------------------------------------------------------------------------------ artefacts


def _labelled_record(t: Ticket) -> dict[str, Any]:
    verdict = evaluate(t)
    return {**t.model_dump(mode="json"), "gold": verdict.model_dump(mode="json")}


def _store_record(t: StoreTicket) -> dict[str, Any]:
    return {**t.model_dump(mode="json"), "gold": decide(t).model_dump(mode="json")}


def render_artefacts() -> dict[str, str]:
    """Every file of ``seed_data/`` as text, keyed by file name: the public splits only."""
    files: dict[str, str] = {}
    counts: dict[str, Any] = {}
    store_counts: dict[str, Any] = {}
    for split in PUBLIC_SPLITS:
        stores = PUBLIC.store_tickets(split)
        files[f"store-{split}.jsonl"] = "".join(
            json.dumps(_store_record(t), sort_keys=True, ensure_ascii=False) + "\n" for t in stores
        )
        plans = Counter((t.difficulty, t.recipe.split(";")[0]) for t in stores)
        store_counts[split] = {
            "total": len(stores),
            "plans": [{"difficulty": d, "first_request": p, "count": n} for (d, p), n in sorted(plans.items())],
        }
        tickets = PUBLIC.tickets(split)
        files[f"{split}.jsonl"] = "".join(
            json.dumps(_labelled_record(t), sort_keys=True, ensure_ascii=False) + "\n" for t in tickets
        )
        cells = Counter((t.family, t.difficulty, evaluate(t).gold) for t in tickets)
        counts[split] = {
            "total": len(tickets),
            "cells": [{"family": f, "difficulty": d, "gold": g, "count": n} for (f, d, g), n in sorted(cells.items())],
        }
    files["policy.md"] = render_policy_markdown()
    files["store-policy.md"] = render_store_policy()
    content = hashlib.sha256()
    for name in sorted(files):
        content.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    manifest = {
        "dataset_version": DATASET_VERSION,
        "generator_version": GENERATOR_VERSION,
        "splits": {
            s: {"size": SPLIT_SIZES[s], "pools": {f"{f}-{d}": pool_size(s, f, d) for f, d in CELLS}} for s in SPLITS
        },
        "counts": counts,
        "store": {
            "generator_version": STORE_GENERATOR_VERSION,
            "splits": {
                s: {"size": STORE_SPLIT_SIZES[s], "pools": {d: store_pool_size(s, d) for d in DIFFICULTIES}}
                for s in SPLITS
            },
            "counts": store_counts,
        },
        "content_sha256": content.hexdigest(),
        "note": "train and dev are public and rebuilt from the code; the test split is generated from each "
        "deployment's secret key (TEST_SPLIT_KEY) and is not published: only its size is listed here.",
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
