"""What a deployment sets up for itself at start: migrations, the key of its secret test split, and
the submitter keys an operator preloads (:func:`set_up_database`, retried while the database is away).

The test split is generated from ``TEST_SPLIT_KEY``; when that is unset, a random key is created
at first start and kept in the database, so the split stays the same across restarts and workers
and nobody — including someone reading the code — can rebuild its labels. Results carry the key's
fingerprint, never the key.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time

from alembic.runtime.migration import MigrationContext

from service import env as core
from service.db import run_store
from service.db.engine import Database
from service.db.errors import DatabaseNotMigrated, fault_from
from service.db.migrate import head_revision, upgrade_to_head
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
                "rebuild the test split; use 32+ random characters",
                len(secret),
            )
    else:
        secret = await run_store.get_or_create_secret(db, TEST_KEY_SECRET, lambda: secrets.token_hex(32))
        source = "a random key kept in the database"
    dataset = core.Dataset(test_key=core.derive_test_key(secret))
    log.info(
        "test split: private to this deployment (key from %s, fingerprint %s); its tickets and labels cannot be "
        "rebuilt without the key — keep it secret and keep it to compare scores",
        source,
        dataset.test_fingerprint,
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
            raise ValueError(
                f"SUBMITTER_KEYS entries are name:key with a key of {WEAK_SECRET_CHARS}+ characters; got {name!r}"
            )
        pairs.append((name.strip(), key.strip()))
    return pairs


async def preload_submitters(db: Database, settings: Settings) -> None:
    if not settings.submitter_keys:
        return
    for name, key in parse_submitter_keys(settings.submitter_keys):
        if not await run_store.upsert_submitter(db, name, hash_secret(key)):
            log.warning(
                "SUBMITTER_KEYS lists submitter %r with its revoked key: it stays revoked; give the name a new "
                "key (in SUBMITTER_KEYS, or `python -m service.submitters reissue %s`)",
                name,
                name,
            )
    log.info("submitter keys preloaded from SUBMITTER_KEYS: %d", len(parse_submitter_keys(settings.submitter_keys)))


class StartupFailed(Exception):
    """The database did not answer within DB_START_TIMEOUT_S while the service was setting it up."""


async def set_up_database(database: Database, settings: Settings) -> core.Dataset:
    """What start needs from the database — migrations (MIGRATE_ON_START), the test split's key when
    TEST_SPLIT_KEY is unset, preloaded submitter keys — retried while the database is unavailable, one
    log line per attempt, for at most ``db_start_timeout_s``; then :class:`StartupFailed` with one line
    that says what to check (no driver traceback)."""
    deadline = time.monotonic() + settings.db_start_timeout_s
    delay, attempt = 0.25, 0
    while True:
        attempt += 1
        try:
            if settings.migrate_on_start:
                await upgrade_to_head(database)
            else:
                await _warn_unless_migrated(database)
            dataset = await load_dataset(database, settings)
            await preload_submitters(database, settings)
            return dataset
        except Exception as exc:
            fault = fault_from(exc)
            if fault is None:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                what = "not migrated" if isinstance(fault, DatabaseNotMigrated) else "unavailable"
                message = (
                    f"the database ({database.describe()}) was still {what} after {attempt} attempts in "
                    f"DB_START_TIMEOUT_S={settings.db_start_timeout_s:g} s: {fault.reason} — check DATABASE_URL and "
                    "that the database is up"
                    + (" and migrated (alembic upgrade head)" if what == "not migrated" else "")
                )
                log.error("start failed: %s", message)
                raise StartupFailed(message) from None
            log.warning(
                "database %s at start (attempt %d: %s); retrying in %.1f s, for up to %.0f s more (DB_START_TIMEOUT_S)",
                "not migrated" if isinstance(fault, DatabaseNotMigrated) else "unavailable",
                attempt,
                fault.reason,
                min(delay, left),
                left,
            )
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 5.0)


async def _warn_unless_migrated(database: Database) -> None:
    """MIGRATE_ON_START=false: say so at start if the database is behind this version (requests answer 503)."""
    try:
        current = await database.read(lambda conn: MigrationContext.configure(conn).get_current_revision())
    except Exception as exc:  # noqa: BLE001 - only a warning; unreachable is reported by GET /ready
        log.warning(
            "MIGRATE_ON_START=false: cannot read the database's revision (%s)", fault_from(exc) or type(exc).__name__
        )
        return
    if current != head_revision():
        log.warning(
            "MIGRATE_ON_START=false and the database is at revision %s, not %s: requests that need the missing "
            "tables answer 503 until the operator runs `alembic upgrade head`",
            current,
            head_revision(),
        )
