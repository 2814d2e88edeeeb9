"""Re-grade stored episodes under the current grader and report every changed score.

    python -m service.regrade [--run RUN_ID] [--write] [--database-url URL]

Each finished episode is replayed from its stored transitions through the pure core (so the
stored state snapshot is checked too), graded with the current grader version, and compared
with its latest stored grade. Prints one JSON line per changed or inconsistent episode and a
final JSON summary. ``--write`` stores the new grades (one row per grader version) and refreshes
the summaries of complete runs. Exit code 0 when nothing changed, 1 when something did.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from typing import Any

from service import env as core
from service.db import repository as repo
from service.db import run_store
from service.db.engine import Database
from service.deployment import load_dataset
from service.domain.runs.services import summarize_run
from service.settings import Settings


async def regrade(
    db: Database, run_id: str | None = None, write: bool = False, dataset: core.Dataset | None = None
) -> dict[str, Any]:
    """Replay and re-grade finished episodes; ``dataset`` must hold the test key to re-grade test episodes
    (default: the key this deployment keeps in the database, or TEST_SPLIT_KEY)."""
    if dataset is None:
        dataset = await load_dataset(db, Settings.from_env())
    rows = await repo.finished_episodes(db, run_id)
    latest = await repo.latest_grades(db)
    changes: list[dict[str, Any]] = []
    touched_runs: set[str] = set()
    for row in rows:
        transitions = await repo.list_transitions(db, row.id)
        state = core.replay(
            row.task_id, row.seed, row.split, [core.Action.model_validate(t.action) for t in transitions], dataset
        )
        grade = core.grade_episode(state, dataset)
        stored_score, stored_resolved, stored_version = latest.get(row.id, (None, None, None))
        consistent = state.as_json() == row.state
        if stored_score != grade.score or stored_resolved != grade.resolved or not consistent:
            changes.append(
                {
                    "episode_id": row.id,
                    "run_id": row.run_id,
                    "task_id": row.task_id,
                    "old_score": stored_score,
                    "old_resolved": stored_resolved,
                    "old_grader_version": stored_version,
                    "new_score": grade.score,
                    "new_resolved": grade.resolved,
                    "new_grader_version": grade.grader_version,
                    "snapshot_matches_replay": consistent,
                }
            )
        if write and stored_version != grade.grader_version:
            draft = repo.GradeDraft(grade.score, grade.resolved, grade.model_dump(mode="json"), grade.grader_version)
            await repo.save_grade(db, row.id, draft)
            if row.run_id:
                touched_runs.add(row.run_id)
    if write:
        for rid in sorted(touched_runs):
            run = await run_store.get_run(db, rid)
            if run is not None and run.status == "complete":
                eps = await run_store.run_episodes(db, rid, core.GRADER_VERSION)
                await run_store.set_summary(db, rid, *summarize_run(run, eps))
    return {"episodes": len(rows), "changed": len(changes), "grader_version": core.GRADER_VERSION, "changes": changes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", help="only this run's episodes")
    parser.add_argument("--write", action="store_true", help="store new grades and refresh run summaries")
    parser.add_argument("--database-url", help="default: DATABASE_URL or the embedded SQLite file")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    if args.database_url:
        settings = replace(settings, database_url=args.database_url)
    db = settings.database()

    async def go() -> dict[str, Any]:
        try:
            return await regrade(db, args.run, args.write)
        finally:
            await db.dispose()

    report = asyncio.run(go())
    for change in report["changes"]:
        print(json.dumps(change, sort_keys=True))
    print(json.dumps({k: v for k, v in report.items() if k != "changes"}, sort_keys=True))
    return 1 if report["changed"] else 0


if __name__ == "__main__":
    sys.exit(main())
