"""Operator command: record that a run was checked, so its leaderboard row stops being self-reported.

    python -m service.verify verify RUN_ID --by NAME [--note TEXT]   # who checked it, and what
    python -m service.verify unverify RUN_ID
    python -m service.verify list

Every row of the leaderboard is **self-reported** — its agent and model names are whatever the
submitter declared, and nothing the service sees tells a model from a script that solves the tickets
— until an operator has checked the run some other way (reproduced it, read its code, seen the
model's logs) and records it here: who, when, and what they checked. The board shows who verified a
row and when, the run page too, and ``GET /leaderboard?verified=true`` shows only verified rows.
Only complete runs can be verified. The database named by ``DATABASE_URL`` (or the embedded SQLite
file) is migrated first if needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from service.db import run_store
from service.db.migrate import upgrade_to_head
from service.settings import Settings

NOTE_MAX = 500  # runs.verification_note


async def _run(args: argparse.Namespace, settings: Settings) -> tuple[int, Any]:
    db = settings.database()
    try:
        await upgrade_to_head(db)
        if args.command == "verify":
            if not await run_store.verify_run(db, args.run_id, args.by, args.note):
                return 1, {"error": f"no complete run with id {args.run_id!r} (only complete runs can be verified)"}
            run = await run_store.get_run(db, args.run_id)
            assert run is not None and run.verified_at is not None
            return 0, {
                "verified": run.id,
                "by": run.verified_by,
                "at": run.verified_at.isoformat(),
                "note": run.verification_note,
            }
        if args.command == "unverify":
            if not await run_store.unverify_run(db, args.run_id):
                return 1, {"error": f"no verified run with id {args.run_id!r}"}
            return 0, {"unverified": args.run_id}
        return 0, [
            {
                "run_id": r.id,
                "split": r.split,
                "agent": r.agent,
                "model": r.model,
                "submitter": r.submitter,
                "verified_by": r.verified_by,
                "verified_at": r.verified_at.isoformat() if r.verified_at else None,
                "note": r.verification_note,
            }
            for r in await run_store.verified_runs(db)
        ]
    finally:
        await db.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m service.verify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="record who checked a complete run, and what they checked")
    verify.add_argument("run_id")
    verify.add_argument("--by", required=True, help="who checked it (shown on the board)")
    verify.add_argument("--note", default=None, help=f"what was checked (shown on the run page; ≤ {NOTE_MAX} chars)")
    unverify = sub.add_parser("unverify", help="withdraw a verification: the row is self-reported again")
    unverify.add_argument("run_id")
    sub.add_parser("list", help="list verified runs")
    args = parser.parse_args(argv)
    if args.command == "verify":
        if not args.by.strip() or len(args.by) > 128:
            parser.error("--by must be a name of 1 to 128 characters")
        if args.note is not None and len(args.note) > NOTE_MAX:
            parser.error(f"--note must be at most {NOTE_MAX} characters")
    code, out = asyncio.run(_run(args, Settings.from_env()))
    print(json.dumps(out, indent=2), file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
