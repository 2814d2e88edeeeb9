"""The ``openenv-agent`` package's HTTP client (PyPI, a cached throwaway venv) against a live server.

Its ``OpenEnvClient`` probes ``/openapi.json``, finds ``/reset`` and speaks the "gym" style:
``POST /reset`` with no body, ``POST /step {"action": {...}}`` and ``GET /state`` — never an
episode_id. It keeps one ``httpx.Client``, so the cookie ``/reset`` sets carries its episode: it
works on the default server (no SINGLE_SESSION), and two of its clients never share an episode.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from typing import Any

from bench.harness import STALLED_AFTER_S
from tests.client.test_clients_venvs import client_venv

OPENENV_AGENT = "openenv-agent==0.2.0"

SCRIPT = """
import json, sys
from openenv_agent import OpenEnvClient

url = sys.argv[1]
with OpenEnvClient(base_url=url) as a, OpenEnvClient(base_url=url) as b:
    first_a, first_b = a.reset(), b.reset()
    steps = []
    for client in (a, b, a):
        obs, reward, done, info = client.step({"lookup": "order"})
        steps.append({"episode_id": obs.get("episode_id"), "reward": reward, "done": done})
    obs, reward, done, info = a.step({"decision": "reject", "reply": "We checked your order.", "close_ticket": True})
    steps.append({"episode_id": obs.get("episode_id"), "reward": reward, "done": done})
    print(json.dumps({"style": a._api_style, "a": first_a["episode_id"], "b": first_b["episode_id"], "steps": steps,
                      "state_a": a.state(), "state_b": b.state()}))
"""


def test_openenv_agent_client_plays_its_own_episode(live_server: Any) -> None:
    python = client_venv(OPENENV_AGENT)
    proc = subprocess.run(
        [str(python), "-c", textwrap.dedent(SCRIPT), live_server.url],
        capture_output=True,
        text=True,
        timeout=STALLED_AFTER_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["style"] == "gym" and out["a"] != out["b"]
    assert [s["episode_id"] for s in out["steps"]] == [out["a"], out["b"], out["a"], out["a"]]
    assert all(isinstance(s["reward"], float) for s in out["steps"]) and out["steps"][-1]["done"] is True
    assert out["state_a"]["episode_id"] == out["a"] and out["state_a"]["step_count"] == 3
    assert out["state_b"]["episode_id"] == out["b"] and out["state_b"]["step_count"] == 1
