"""The README's client snippet, run by both real OpenEnv clients against a live server.

openenv-core 0.3.0's ``EnvClient`` is async by default: ``with GenericEnvClient(...)`` raises
``TypeError: EnvClient is async by default``. ``.sync()`` (or ``async with`` and ``await``) works
in both 0.3.0 and 0.10, so that is the form the README shows. The snippet below is the README's,
verbatim, with the URL as an argument.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

from bench.harness import STALLED_AFTER_S
from tests.client.test_clients_venvs import OPENENV_CORE_030, client_venv

SNIPPET_SYNC = """
from openenv.core import GenericEnvClient  # openenv-core 0.3.0 and openenv 0.10

with GenericEnvClient(base_url="http://127.0.0.1:7860").sync() as env:
    result = env.reset(task_id="decision-hard", seed=4, split="dev")
    result = env.step({"lookup": "customer"})
    result = env.step({"decision": "reject"})
    print(result.done, result.reward, env.state())
"""

SNIPPET_ASYNC = """
import asyncio
from openenv.core import GenericEnvClient

async def main():
    async with GenericEnvClient(base_url="http://127.0.0.1:7860") as env:
        result = await env.reset(task_id="decision-hard", seed=4, split="dev")
        result = await env.step({"lookup": "customer"})
        result = await env.step({"decision": "reject"})
        print(result.done, result.reward, await env.state())

asyncio.run(main())
"""

OLD_SNIPPET = """
from openenv.core import GenericEnvClient
with GenericEnvClient(base_url="http://127.0.0.1:7860") as env:
    result = env.reset(task_id="decision-hard", seed=4, split="dev")
"""


def _run(python: str, snippet: str, url: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(snippet).replace("http://127.0.0.1:7860", url)
    return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=STALLED_AFTER_S)


def _check(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    done, reward, state = proc.stdout.strip().split(" ", 2)
    assert done == "True" and -1.0 <= float(reward) <= 1.0
    assert "step_count" in state and "2" in state


def test_readme_snippet_on_openenv_0_10(live_server: Any) -> None:
    _check(_run(sys.executable, SNIPPET_SYNC, live_server.url))
    _check(_run(sys.executable, SNIPPET_ASYNC, live_server.url))


def test_readme_snippet_on_openenv_core_0_3_0(live_server: Any) -> None:
    python = str(client_venv(OPENENV_CORE_030))
    _check(_run(python, SNIPPET_SYNC, live_server.url))
    _check(_run(python, SNIPPET_ASYNC, live_server.url))
    old = _run(python, OLD_SNIPPET, live_server.url)  # the snippet as it was: why it changed
    assert old.returncode != 0 and "EnvClient is async by default" in old.stderr


FINALS = """
import json
from openenv.core import GenericEnvClient

plan = [{"lookup": "order"}, {"lookup": "policy"}, {"add_tag": "Refund"},
        {"decision": "approve_refund", "reply": "We have refunded your order.", "close_ticket": True}]
finals = []
with GenericEnvClient(base_url="http://127.0.0.1:7860").sync() as env:
    for task in ("decision-easy", "decision-hard", "workflow-triage", "workflow-resolution"):
        for seed in (1, 2):
            result = env.reset(task_id=task, seed=seed, split="dev")
            for n in range(12):
                result = env.step(plan[min(n, len(plan) - 1)])
                if result.done:
                    break
            finals.append({"done": result.done, "reward": result.reward, **{k: result.observation.get(k) for k in
                           ("episode_id", "final", "score", "resolved")}})
print(json.dumps(finals))
"""


def test_final_observation_matches_the_grader_on_openenv_core_0_3_0(live_server: Any) -> None:
    """openenv-core 0.3.0's client reads the episode's grade from the final observation (score,
    resolved, final), the same as ``GET /grader`` — several episodes over one WS session."""
    import json

    import httpx

    proc = _run(str(client_venv(OPENENV_CORE_030)), FINALS, live_server.url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    finals = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(finals) == 8
    for final in finals:
        grade = httpx.get(
            live_server.url + "/grader", params={"episode_id": final["episode_id"]}, timeout=STALLED_AFTER_S
        ).json()
        assert final["done"] is True and final["final"] is True
        assert final["score"] == grade["score"] and final["resolved"] is grade["resolved"], (final, grade)
    assert len({f["score"] for f in finals}) > 1


def test_readme_shows_the_snippet_tested_here() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    assert SNIPPET_SYNC.strip() in readme
