"""Operator command for submitter keys: who may submit test-split runs, and how often.

    python -m service.submitters create NAME [--quota N]   # prints the new key once
    python -m service.submitters revoke NAME              # and its open runs stop, never released
    python -m service.submitters reissue NAME            # a new key for NAME (revoked or not), printed once
    python -m service.submitters list

Keys are stored hashed (SHA-256 of a 256-bit random key); the database named by ``DATABASE_URL``
(or the embedded SQLite file) is migrated first if needed. A submitter's quota is its number of
test runs per ``TEST_RUN_QUOTA_PERIOD_S`` (default: ``TEST_RUN_QUOTA``); only test runs count. For
automation, ``SUBMITTER_KEYS=name:key,…`` preloads keys at every start instead; a key revoked here
stays revoked even while SUBMITTER_KEYS still lists it (give the name a new key there, or reissue).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
from typing import Any

from service.db import run_store
from service.db.migrate import upgrade_to_head
from service.lib.secrets import hash_secret
from service.settings import Settings


async def _run(args: argparse.Namespace, settings: Settings) -> tuple[int, Any]:
    db = settings.database()
    try:
        await upgrade_to_head(db)
        if args.command == "create":
            key = "sk_" + secrets.token_urlsafe(32)
            try:
                record = await run_store.create_submitter(db, args.name, hash_secret(key), args.quota)
            except run_store.SubmitterExists:
                return 1, {"error": f"a submitter named {args.name!r} exists; revoke it or pick another name"}
            return 0, {
                "name": record.name,
                "key": key,
                "quota": record.quota,
                "note": "shown once: give it to the submitter; it goes in `Authorization: Bearer <key>` of POST /runs",
            }
        if args.command == "reissue":
            if await run_store.submitter_by_name(db, args.name) is None:
                return 1, {"error": f"no submitter named {args.name!r}; create it"}
            key = "sk_" + secrets.token_urlsafe(32)
            await run_store.upsert_submitter(db, args.name, hash_secret(key))  # a new key: active again
            return 0, {"name": args.name, "key": key, "note": "shown once; the name's previous key no longer works"}
        if args.command == "revoke":
            revoked, expired = await run_store.revoke_submitter(db, args.name)
            if not revoked:
                return 1, {"error": f"no active submitter named {args.name!r}"}
            return 0, {
                "revoked": args.name,
                "runs_expired": expired,
                "note": "its open runs stopped now: they take no further request and are never released",
            }
        rows = await run_store.list_submitters(db)
        return 0, [
            {
                "name": r.name,
                "quota": r.quota,
                "created_at": r.created_at.isoformat(),
                "revoked_at": r.revoked_at.isoformat() if r.revoked_at else None,
            }
            for r in rows
        ]
    finally:
        await db.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m service.submitters", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", help="create a submitter key (printed once)")
    create.add_argument("name")
    create.add_argument("--quota", type=int, default=None, help="test runs per period (default: TEST_RUN_QUOTA)")
    revoke = sub.add_parser("revoke", help="revoke a submitter's key")
    revoke.add_argument("name")
    reissue = sub.add_parser("reissue", help="give a submitter a new key (printed once); re-activates a revoked one")
    reissue.add_argument("name")
    sub.add_parser("list", help="list submitters (never their keys)")
    args = parser.parse_args(argv)
    if args.command == "create" and args.quota is not None and args.quota < 0:
        parser.error("--quota must be >= 0")
    code, out = asyncio.run(_run(args, Settings.from_env()))
    print(json.dumps(out, indent=2), file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
