"""What a deployment sets up for itself at start: the key of its secret test split, and the
submitter keys an operator preloads.

The test split is generated from ``TEST_SPLIT_KEY``; when that is unset, a random key is created
at first start and kept in the database, so the split stays the same across restarts and workers
and nobody — including someone reading the code — can rebuild its labels. Results carry the key's
fingerprint, never the key.
"""

from __future__ import annotations

import logging
import secrets

from service import env as core
from service.db import run_store
from service.db.engine import Database
from service.lib.secrets import hash_secret
from service.settings import Settings

log = logging.getLogger("service.deployment")

TEST_KEY_SECRET = "test_split_key"
WEAK_SECRET_CHARS = 16


async def load_dataset(db: Database, settings: Settings) -> core.Dataset:
    """The deployment's dataset: the public splits plus its private test split."""
    if settings.test_split_key:
        secret, source = settings.test_split_key, "TEST_SPLIT_KEY"
        if len(secret) < WEAK_SECRET_CHARS:
            log.warning(
                "TEST_SPLIT_KEY is only %d characters: its public fingerprint lets anyone guess a short key and "
                "rebuild the test split; use 32+ random characters", len(secret),
            )
    else:
        secret = await run_store.get_or_create_secret(db, TEST_KEY_SECRET, lambda: secrets.token_hex(32))
        source = "a random key kept in the database"
    dataset = core.Dataset(test_key=core.derive_test_key(secret))
    log.info(
        "test split: private to this deployment (key from %s, fingerprint %s); its tickets and labels cannot be "
        "rebuilt without the key — keep it secret and keep it to compare scores", source, dataset.test_fingerprint,
    )
    return dataset


def parse_submitter_keys(text: str) -> list[tuple[str, str]]:
    """``SUBMITTER_KEYS`` = ``name:key,name:key`` → [(name, key)]; raises ValueError on a bad entry."""
    pairs = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, key = entry.partition(":")
        if not sep or not name.strip() or len(key.strip()) < WEAK_SECRET_CHARS:
            raise ValueError(f"SUBMITTER_KEYS entries are name:key with a key of {WEAK_SECRET_CHARS}+ characters; got {name!r}")
        pairs.append((name.strip(), key.strip()))
    return pairs


async def preload_submitters(db: Database, settings: Settings) -> None:
    if not settings.submitter_keys:
        return
    for name, key in parse_submitter_keys(settings.submitter_keys):
        if not await run_store.upsert_submitter(db, name, hash_secret(key)):
            log.warning("SUBMITTER_KEYS lists submitter %r with its revoked key: it stays revoked; give the name a new "
                        "key (in SUBMITTER_KEYS, or `python -m service.submitters reissue %s`)", name, name)
    log.info("submitter keys preloaded from SUBMITTER_KEYS: %d", len(parse_submitter_keys(settings.submitter_keys)))
