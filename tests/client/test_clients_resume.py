"""What OpenEnv's own client does when its socket dies (a replica killed behind a balancer, a proxy
dropping the tunnel, the idle reaper), and the recovery docs/deploying.md gives for it.

openenv 0.10's ``GenericEnvClient`` raises on the call whose socket was closed, and opens a new
socket on the next call: a new server session, which holds no episode. ``reset(episode_id=E,
resume=True)`` — reset's keyword arguments are the frame's data — re-attaches to the stored episode
on that socket, and the episode goes on where it was, nothing lost. The socket is closed here by
the server's idle reaper (``WS_IDLE_TIMEOUT_S=1``); the test waits for its log line, not a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.settings import Settings
from tests.conftest import LiveServer


def step_count(env: Any) -> int:
    state = env.state()
    return int(state["step_count"] if isinstance(state, dict) else state.step_count)


def test_generic_env_client_resumes_its_episode_on_a_new_socket(settings: Settings, tmp_path: Path) -> None:
    from openenv.core import GenericEnvClient

    server = LiveServer(settings, tmp_path / "server.log", extra_env={"WS_IDLE_TIMEOUT_S": "1", "LOG_LEVEL": "INFO"})
    try:
        with GenericEnvClient(base_url=server.url).sync() as env:
            first = env.reset(task_id="decision-hard", seed=4, split="dev")
            episode_id = first.observation["episode_id"]
            env.step({"lookup": "customer"})
            server.wait_for_log("ws session reaped")  # the server closed this client's socket
            with pytest.raises(Exception) as lost:  # noqa: PT011 - whatever the client raises, it names the cause
                env.step({"lookup": "order"})
            assert "reset" in str(lost.value) or "closed" in str(lost.value).lower(), lost.value
            resumed = env.reset(episode_id=episode_id, resume=True)  # on the client's new socket
            assert resumed.observation["episode_id"] == episode_id
            assert step_count(env) == 1  # the step before the drop is there, the failed one is not
            result = env.step({"decision": "reject"})
            assert result.done and step_count(env) == 2
    finally:
        server.stop()
