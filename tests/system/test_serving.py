"""How the service is served: uvicorn options from settings, and the garbage-collector tuning."""

from __future__ import annotations

import gc
from collections.abc import Iterator
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
