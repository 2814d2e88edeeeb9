"""How the service is served: uvicorn options from settings, and the garbage-collector tuning."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service import app as app_module
from service.lib import access_log
from service.settings import Settings


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_serving_options_come_from_the_environment() -> None:
    default = Settings.from_env({})
    assert (default.access_log, default.ws_per_message_deflate) == (False, False)
    chosen = Settings.from_env({"ACCESS_LOG": "1", "WS_PER_MESSAGE_DEFLATE": "true"})
    assert (chosen.access_log, chosen.ws_per_message_deflate) == (True, True)


def test_serve_passes_the_settings_to_uvicorn_and_tunes_the_collector(
    monkeypatch: pytest.MonkeyPatch, restore_gc: None
) -> None:
    import uvicorn

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append({"app": app, **kw}))
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    settings = Settings(host="127.0.0.1", port=8123, access_log=True, log_level="WARNING")
    app_module.serve("the-app", settings)
    assert calls == [
        {
            "app": "the-app",
            "host": "127.0.0.1",
            "port": 8123,
            "log_level": "warning",
            "access_log": True,
            "ws_per_message_deflate": False,
            "ws_max_size": settings.max_body_bytes + 1024,  # an oversized frame is refused before it is read whole
            "proxy_headers": False,  # the app works out client addresses itself (TRUSTED_PROXY_HOPS)
            "http": "service.lib.connections:GuardedHttpProtocol",  # request deadline, per-address cap
            "ws": "service.lib.connections:GuardedWebSocketProtocol",
            "timeout_keep_alive": 5,
            "log_config": access_log.log_config(),  # no query string in a log line
        }
    ]
    assert gc.get_threshold() == app_module.GC_THRESHOLDS
    assert gc.get_freeze_count() > 0  # everything alive before serving is out of the collector's way


def test_the_worker_factory_tunes_the_collector_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path, restore_gc: None
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'f.db'}")
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    app_module.app_factory()
    assert gc.get_threshold() == app_module.GC_THRESHOLDS and gc.get_freeze_count() > 0


def test_serve_with_workers_forks_them_after_importing_the_factory(
    monkeypatch: pytest.MonkeyPatch, restore_gc: None
) -> None:
    """``WORKERS`` > 1 goes to the pre-fork supervisor with the factory itself (imported here, before
    any fork) and the same uvicorn options; uvicorn's spawning supervisor is not used."""
    import uvicorn

    from service import workers

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(workers, "serve_workers", lambda *args: calls.append(args))
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: pytest.fail("uvicorn.run spawns its workers"))
    settings = Settings(host="127.0.0.1", port=8124, workers=3, worker_timeout_s=42.0, db_start_timeout_s=30.0)
    app_module.serve("service.app:app_factory", settings)
    assert calls == [  # a start may take the lifespan's own database wait on top of the worker timeout
        (app_module.app_factory, "127.0.0.1", 8124, 3, 42.0, 72.0, app_module.uvicorn_options(settings)),
    ]
    assert Settings.from_env({"WORKER_TIMEOUT_S": "7.5"}).worker_timeout_s == 7.5


def test_serving_raises_the_soft_open_file_limit_and_warns_when_the_hard_one_is_too_low(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each WebSocket session holds a socket: a soft limit of 1,024 would refuse sessions long before
    ``MAX_CONCURRENT_ENVS``; the soft limit goes up to the hard one, and a hard one too low is named."""
    import resource

    limits = {"now": (1024, 65536)}
    monkeypatch.setattr(resource, "getrlimit", lambda _which: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda _which, value: limits.update(now=value))
    assert app_module.raise_open_file_limit(Settings(max_concurrent_envs=4096)) == 65536
    assert limits["now"] == (65536, 65536) and "open-file limit" not in caplog.text
    limits["now"] = (1024, 2048)
    assert app_module.raise_open_file_limit(Settings(max_concurrent_envs=4096)) == 2048
    assert "open-file limit 2048 (hard 2048) is below the 4352 that MAX_CONCURRENT_ENVS=4096 needs" in caplog.text


def test_a_worker_holds_the_sessions_the_performance_docs_measured_by_default() -> None:
    """docs/performance.md#sessions-at-scale-on-one-worker sizes the default: 1,024 sessions per worker."""
    assert Settings.from_env({}).max_concurrent_envs == Settings().max_concurrent_envs == 1024
    assert "`MAX_CONCURRENT_ENVS` | `1024`" in (Path(__file__).parents[2] / "docs" / "api.md").read_text()
