"""The documented uses fit the default limits (issue 20, item 4): against a live server where
loopback is **not** exempt (``RATE_LIMIT_EXEMPT=""``, as on any real deployment), ``inference.py``
at its default concurrency and a trainer with 16 or 64 parallel environments from one address —
over HTTP and over WebSocket — never meet a 429.

The server runs with ``ACCESS_LOG=true``: every HTTP answer is one access-log line, so the 429s are
counted where they are made. WebSocket frames have no access-log line; the clients count the
``status: 429`` error frames they receive.

A trainer is modelled as GRPO's environment loop does it: every environment resets, then all of
them act at once once per "generation" (the policy's batched forward pass; here a pause of
``GENERATION_S``), until each episode is done. A slower machine only makes the rounds slower.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service import env as core
from service.settings import Settings
from tests.client.stub_openai import StubLLM
from tests.client.test_inference import END_RE, llm_env, run_inference
from tests.conftest import LiveServer

GENERATION_S = 1.0
DECISION_TASKS = [t.id for t in core.TASKS.values() if t.family == "decision"]
_ACCESS_429 = re.compile(r'" 429\b')


def http_429s(server: LiveServer) -> int:
    """429 answers in the server's access log so far."""
    return len(_ACCESS_429.findall(server.log_path.read_text(errors="replace")))


@pytest.fixture
def limited_server(settings: Settings, tmp_path: Path) -> Iterator[LiveServer]:
    if settings.database_url.startswith("postgresql"):
        pytest.skip("the limits live in the app's memory: one backend is enough")
    server = LiveServer(
        settings,
        tmp_path / "server.log",
        extra_env={"RATE_LIMIT_EXEMPT": "", "ACCESS_LOG": "true", "LOG_LEVEL": "INFO"},
        command=[sys.executable, "-m", "service.app"],
    )
    try:
        limits = httpx.get(f"{server.url}/limits", timeout=10).json()
        assert limits["exempt"] is False, limits  # the point of these tests: loopback is limited
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_inference_at_its_default_concurrency_meets_no_429(limited_server: LiveServer, tmp_path: Path) -> None:
    """An instant LLM (the worst case for the limits) at the default concurrency of 16."""
    with StubLLM() as stub:
        proc = run_inference(
            ["--limit-per-task", "10"], limited_server.url, extra_env=llm_env(stub, tmp_path), timeout=600
        )
    ends = [END_RE.match(line) for line in proc.stdout.splitlines() if line.startswith("[END]")]
    rejected = http_429s(limited_server)
    print(f"inference.py --limit-per-task 10 (60 episodes, concurrency 16): {rejected} HTTP 429s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(ends) == 60 and all(ends), proc.stdout[-2000:]
    assert rejected == 0, proc.stderr[-3000:]


def _act(obs: dict[str, Any]) -> dict[str, Any]:
    """A scripted policy: look the order up, then decide."""
    return {"lookup": "order"} if obs.get("step_count", 0) == 0 else {"decision": "reject"}


class _HttpEnv:
    """One environment of an HTTP trainer: its own connection, server-made episode ids."""

    def __init__(self, url: str, index: int) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)
        self.index, self.episode_id, self.obs, self.done = index, "", {}, False
        self.refused: list[str] = []

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        resp = self.http.post(path, json=body)
        if resp.status_code != 200:
            self.refused.append(f"{path} {resp.status_code} {resp.text[:200]}")
            return None
        return resp.json()

    def reset(self, episode: int) -> None:
        task = DECISION_TASKS[(self.index + episode) % len(DECISION_TASKS)]
        body = self._post("/reset", {"task_id": task, "seed": self.index + 100 * episode, "split": "train"})
        self.done = body is None
        if body is not None:
            self.episode_id, self.obs = body["metadata"]["episode_id"], body["observation"]

    def step(self) -> None:
        body = self._post("/step", {"episode_id": self.episode_id, "action": _act(self.obs)})
        if body is None:
            self.done = True
            return
        self.obs, self.done = body["observation"], bool(body["done"])

    def close(self) -> None:
        self.http.close()


class _WsEnv:
    """One environment of a WebSocket trainer: openenv's ``GenericEnvClient``, one session each."""

    def __init__(self, url: str, index: int) -> None:
        from openenv.core import GenericEnvClient

        self.client = GenericEnvClient(base_url=url).sync()
        self.client.__enter__()
        self.index, self.obs, self.done = index, {}, False
        self.refused: list[str] = []

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a refused frame raises; the test counts it
            self.refused.append(f"{type(exc).__name__}: {exc}"[:300])
            return None

    def reset(self, episode: int) -> None:
        task = DECISION_TASKS[(self.index + episode) % len(DECISION_TASKS)]
        result = self._call(self.client.reset, task_id=task, seed=self.index + 100 * episode, split="train")
        self.done = result is None
        if result is not None:
            self.obs = result.observation if isinstance(result.observation, dict) else {}

    def step(self) -> None:
        result = self._call(self.client.step, _act(self.obs))
        if result is None:
            self.done = True
            return
        self.obs, self.done = (result.observation if isinstance(result.observation, dict) else {}), bool(result.done)

    def close(self) -> None:
        self.client.__exit__(None, None, None)


def _trainer(url: str, kind: str, n: int, episodes: int = 2) -> list[str]:
    """``n`` environments in lockstep rounds, ``episodes`` each; every refusal any of them met."""
    envs: list[Any] = []
    opened = [
        threading.Thread(target=lambda i=i: envs.append((_WsEnv if kind == "ws" else _HttpEnv)(url, i)))
        for i in range(n)
    ]
    for t in opened:
        t.start()
    for t in opened:
        t.join()
    try:
        for episode in range(episodes):
            _in_parallel([lambda e=e, k=episode: e.reset(k) for e in envs])
            while not all(e.done for e in envs):
                time.sleep(GENERATION_S)  # the policy generates the next action of every environment at once
                _in_parallel([e.step for e in envs if not e.done])
    finally:
        _in_parallel([e.close for e in envs])
    return [r for e in envs for r in e.refused]


def _in_parallel(calls: list[Any]) -> None:
    threads = [threading.Thread(target=c) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["http", "ws"])
@pytest.mark.parametrize("n", [16, 64])
def test_a_trainer_with_parallel_environments_meets_no_429(limited_server: LiveServer, kind: str, n: int) -> None:
    refused = _trainer(limited_server.url, kind, n)
    rejected = http_429s(limited_server) + sum(("429" in r or "per second" in r or "a second" in r) for r in refused)
    print(f"trainer, {n} parallel {kind} environments from one address: {rejected} 429s, {len(refused)} refusals")
    assert refused == [], json.dumps(refused[:5], indent=1)
    assert rejected == 0
