"""OpenEnv's own typed actions: a client-side ``Action`` subclass, sent by the real clients.

In openenv-core 0.3.0 and openenv 0.10 the ``Action`` base model carries ``metadata: Dict = {}``, and
``GenericEnvClient._step_payload`` sends ``action.model_dump()`` — so every typed action arrives with
a ``metadata`` object. The service accepts it (ignored by the core, declared in GET /schema) and still
refuses any other unknown field.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import httpx

from bench.harness import STALLED_AFTER_S
from tests.client.test_clients_venvs import OPENENV_CORE_030, client_venv

TYPED_ACTION_CLIENT = """
import json
from typing import Optional

from openenv.core import GenericEnvClient
from openenv.core.env_server.types import Action


class EcommAction(Action):  # a client's typed action, as OpenEnv's templates write them
    decision: Optional[str] = None
    reply: Optional[str] = None
    lookup: Optional[str] = None


with GenericEnvClient(base_url="http://127.0.0.1:7860").sync() as env:
    first = env.reset(task_id="decision-easy", seed=2, split="dev")
    looked = env.step(EcommAction(lookup="order"))
    last = env.step(EcommAction(decision="reject", reply="We checked your order.", metadata={"trace": "t-1"}))
    print(json.dumps({"episode_id": first.observation["episode_id"], "looked": looked.done, "done": last.done,
                      "final": last.observation.get("final"), "state": env.state()}))
"""


def _play(python: str, url: str) -> dict[str, Any]:
    code = textwrap.dedent(TYPED_ACTION_CLIENT).replace("http://127.0.0.1:7860", url)
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=STALLED_AFTER_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(out: dict[str, Any], url: str) -> None:
    assert out["looked"] is False and out["done"] is True and out["final"] is True
    assert out["state"]["step_count"] == 2
    grade = httpx.get(url + "/grader", params={"episode_id": out["episode_id"]}, timeout=STALLED_AFTER_S).json()
    assert grade["step_count"] == 2 and 0.0 <= grade["score"] <= 1.0


def test_typed_action_over_ws_on_openenv_0_10(live_server: Any) -> None:
    _check(_play(sys.executable, live_server.url), live_server.url)


def test_typed_action_over_ws_on_openenv_core_0_3_0(live_server: Any) -> None:
    _check(_play(str(client_venv(OPENENV_CORE_030)), live_server.url), live_server.url)


def test_typed_action_dump_over_http(live_server: Any) -> None:
    """What ``Action.model_dump()`` gives, posted to ``POST /step``; metadata must be an object, and
    other unknown fields stay refused by name."""
    from openenv.core.env_server.types import Action

    class EcommAction(Action):
        decision: str | None = None

    url = live_server.url
    episode_id = httpx.post(
        url + "/reset", json={"task_id": "decision-easy", "seed": 3}, timeout=STALLED_AFTER_S
    ).json()["metadata"]["episode_id"]
    for bad, field in (
        ({"decision": "reject", "metadata": "x"}, "action.metadata"),
        ({"decision": "reject", "metadata": {}, "bogus": 1}, "action.bogus"),
    ):
        resp = httpx.post(url + "/step", json={"episode_id": episode_id, "action": bad}, timeout=STALLED_AFTER_S)
        assert resp.status_code == 422 and field in resp.json()["detail"], resp.text
    resp = httpx.post(
        url + "/step",
        json={"episode_id": episode_id, "action": EcommAction(decision="reject").model_dump()},
        timeout=STALLED_AFTER_S,
    )
    assert resp.status_code == 200 and resp.json()["done"] is True, resp.text
    schema = httpx.get(url + "/schema", timeout=STALLED_AFTER_S).json()["action"]
    assert schema["properties"]["metadata"]["type"] == "object"
    assert schema["additionalProperties"] is False  # everything else stays refused
