"""Background upkeep of a running service: the retention pass, on a timer in the app's lifespan.

Every worker runs it; passes are idempotent (deletes re-check their condition in the deleting
transaction), so several workers only share the work. What is deleted and when:
:mod:`service.db.retention`, with the ages from :class:`~service.settings.Settings`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import get_args

from service import env as core
from service.db import clock, mcp_store, retention
from service.db.engine import Database
from service.db.errors import DatabaseFault
from service.domain.runs.services import RunService
from service.settings import Settings

log = logging.getLogger("service.housekeeping")

PUBLIC_SPLITS = tuple(split for split in get_args(core.Split) if split != core.HIDDEN_SPLIT)


async def retention_pass(
    db: Database, runs: RunService, settings: Settings, now: datetime | None = None
) -> retention.Purged:
    """Write this process's clock and learn how far it runs ahead of the slowest live process's
    (:func:`service.db.retention.align`); expire idle runs, then delete what is past its retention age and
    MCP sessions unused past ``mcp_session_idle_s``, every age measured against the slowest clock; returns
    what was deleted."""
    if now is None:
        await retention.align(db, clock.PROCESS_CLOCK, settings.retention_interval_s)
        now = clock.cutoff_now()
    await runs.expire_idle()  # a run idle past its TTL becomes expired (and, later, purgeable)
    sessions = await mcp_store.purge_idle(db, now - timedelta(seconds=settings.mcp_session_idle_s))
    finished = settings.retain_finished_episodes_s
    purged = await retention.purge(
        db,
        unfinished_before=now - timedelta(seconds=settings.retain_unfinished_episodes_s),
        finished_before=now - timedelta(seconds=finished) if finished is not None else None,
        expired_runs_before=now - timedelta(seconds=settings.retain_expired_runs_s),
        ranked_keep=settings.retain_ranked_runs_per_entrant,
        ranked_splits=PUBLIC_SPLITS,  # test runs stay: bounded by TEST_RUN_QUOTA, and the Ladder reads them
    )
    return replace(purged, mcp_sessions=sessions)


async def retention_loop(db: Database, runs: RunService, settings: Settings) -> None:
    """Run :func:`retention_pass` every ``retention_interval_s`` until cancelled; never dies of a failure.
    After each pass, says once if the wall clock has jumped away from the clock ages are counted by."""
    warned = False
    try:  # at once: a process started after a wall-clock jump learns how far ahead it runs before it ages anything
        await retention.align(db, clock.PROCESS_CLOCK, settings.retention_interval_s)
    except DatabaseFault as exc:
        log.warning("could not write this process's clock yet: %s", exc.reason)
    try:
        await _passes(db, runs, settings, warned)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.shield(retention.leave(db, clock.PROCESS_CLOCK))


async def _passes(db: Database, runs: RunService, settings: Settings, warned: bool) -> None:
    while True:
        await asyncio.sleep(settings.retention_interval_s)
        try:
            purged = await retention_pass(db, runs, settings)
        except DatabaseFault as exc:  # an outage: the next pass tries again
            log.warning("retention pass skipped: %s", exc.reason)
            continue
        except Exception:
            log.exception("retention pass failed")
            continue
        if purged:
            log.info("retention purged %s", retention.describe(purged))
        warned = _warn_of_a_clock_jump(warned)


def _warn_of_a_clock_jump(warned: bool) -> bool:
    drift = clock.PROCESS_CLOCK.drift()
    if warned or abs(drift) < clock.DRIFT_WARNING_S:
        return warned
    log.warning(
        "the wall clock moved %+.0f s away from the time this process counts since it started: stamps, TTLs and "
        "retention keep counting from the start (nothing is aged by the jump); a restart takes the wall clock "
        "as it is then",
        drift,
    )
    return True
