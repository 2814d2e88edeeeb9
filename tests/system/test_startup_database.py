"""Starting with a database that is not there yet, or not migrated.

- Unavailable at start (TEST_SPLIT_KEY unset, so the start reads the test key from it; migrations on):
  the start retries with one warning line per attempt and completes once the database answers; if it
  never does within DB_START_TIMEOUT_S, the start fails with one error line that says what to check —
  no driver traceback from our loggers.
- Not migrated (MIGRATE_ON_START=false on an empty database): a warning at start, and every request
  that needs the missing tables answers a 503 problem that says to run the migrations (not a 500).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from bench.harness import STALLED_AFTER_S
from service.app import create_app
from service.db.migrate import head_revision
from service.settings import Settings


def unreachable_sqlite(tmp_path: Path) -> tuple[Settings, Path, Path]:
    """Settings whose SQLite file sits behind a directory that has been renamed away (as in the fault tests)."""
    volume, away = tmp_path / "volume", tmp_path / "volume.away"
    volume.mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.db").symlink_to(volume / "test.db")
    volume.rename(away)
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'data' / 'test.db'}",
        baseline_seeds_per_task=1,
        db_connect_timeout_s=0.5,
        db_pool_timeout_s=0.5,
    )
    return settings, volume, away


def app_logged(settings: Settings, caplog: pytest.LogCaptureFixture) -> Any:
    """``create_app(settings)``, with caplog still listening (Litestar's logging setup replaces the root
    logger's handlers when the app is built)."""
    app = create_app(settings)
    if caplog.handler not in logging.getLogger().handlers:
        logging.getLogger().addHandler(caplog.handler)
    return app


class _OnFirstRetry(logging.Handler):
    """Runs ``action`` once, when the start first logs that it is retrying."""

    def __init__(self, action: Any) -> None:
        super().__init__(logging.WARNING)
        self.action, self.fired = action, False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.fired and "retrying in" in record.getMessage():
            self.fired = True
            self.action()


def our_tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("service") and r.exc_info]


async def test_a_start_waits_for_a_database_that_comes_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings, volume, away = unreachable_sqlite(tmp_path)
    mount = _OnFirstRetry(lambda: away.rename(volume))  # the volume is mounted once the start has said it waits
    logging.getLogger("service.deployment").addHandler(mount)
    try:
        start = replace(settings, db_start_timeout_s=STALLED_AFTER_S)  # a safety net: the volume comes back
        async with AsyncTestClient(app=app_logged(start, caplog)) as client:
            resp = await client.post("/reset", json={"task_id": "workflow-triage", "seed": 1})
            assert resp.status_code == 200, resp.text
            assert (await client.get("/ready")).status_code == 200
    finally:
        logging.getLogger("service.deployment").removeHandler(mount)
    assert mount.fired
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert retries and "DB_START_TIMEOUT_S" in retries[0] and "unavailable" in retries[0], retries
    assert not our_tracebacks(caplog)


async def test_a_start_without_a_database_fails_in_one_clear_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings, _, _ = unreachable_sqlite(tmp_path)
    with pytest.raises(Exception) as failed:  # noqa: PT011 - the test client wraps what the lifespan raised
        async with AsyncTestClient(app=app_logged(replace(settings, db_start_timeout_s=1), caplog)):
            pass
    assert "StartupFailed" in repr(failed.value) or "StartupFailed" in str(failed.value), repr(failed.value)
    [error] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("service")]
    assert error.startswith("start failed:") and "DATABASE_URL" in error and "DB_START_TIMEOUT_S=1" in error, error
    assert not our_tracebacks(caplog)


async def test_an_unmigrated_database_answers_503_saying_to_migrate(
    empty_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    app = app_logged(replace(empty_settings, migrate_on_start=False, test_split_key="k" * 40), caplog)
    async with AsyncTestClient(app=app) as client:
        for method, path, kwargs in (
            ("POST", "/reset", {"json": {"task_id": "workflow-triage", "seed": 1}}),
            ("GET", "/leaderboard", {}),
            ("GET", "/state", {"params": {"episode_id": "x"}}),
        ):
            resp = await client.request(method, path, **kwargs)
            assert resp.status_code == 503, (path, resp.status_code, resp.text)
            body = resp.json()
            assert body["type"].endswith("/database-not-migrated") and "alembic upgrade head" in body["detail"], body
            assert resp.headers["retry-after"].isdigit()
    warnings = [r.getMessage() for r in caplog.records if "MIGRATE_ON_START=false" in r.getMessage()]
    assert warnings and f"at revision None, not {head_revision()}" in warnings[0], warnings


async def test_an_unmigrated_database_without_a_test_key_fails_the_start_saying_to_migrate(
    empty_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(Exception):  # noqa: PT011, B017 - the test client wraps what the lifespan raised
        async with AsyncTestClient(
            app=app_logged(replace(empty_settings, migrate_on_start=False, db_start_timeout_s=0.5), caplog)
        ):
            pass
    [error] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("service")]
    assert "not migrated" in error and "alembic upgrade head" in error, error
