"""Do the documented uses fit the default limits? 429s met by each, from one address that is not exempt.

    python -m bench.limits_fit                      # every scenario against this checkout
    python -m bench.limits_fit --checkout ../main   # the same scenarios, server and inference.py of another checkout

Each scenario gets a fresh server (``python -m service.app`` of the checkout, SQLite in a temporary
folder, ``RATE_LIMIT_EXEMPT=""`` — as on any real deployment — and ``ACCESS_LOG=true``, so every HTTP
429 is counted in its access log); WebSocket refusals are counted by the clients. Scenarios:

- ``inference``: ``inference.py`` with its defaults (a ranked run: every dev ticket, 400 episodes,
  concurrency 16) and a scripted OpenAI-compatible stub answering at once (``--llm-delay 0``) or
  after a second (``1``): the run's return code, [END] lines, successes, 429s, seconds;
- ``trainer``: 16 and 64 environments from one address over HTTP and WebSocket, as GRPO's loop
  plays them (all reset, then all act at once each generation, ``GENERATION_S`` apart), two
  episodes each (:func:`trainer`; ``tests/system/test_rate_limits_live.py`` asserts none meets a 429).

One JSON object per scenario on stdout. Loopback only, bounded: every run stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import ROOT, ServerProcess, free_port
from service import env as core

GENERATION_S = 1.0  # the policy's batched forward pass between two actions of every environment
DECISION_TASKS = [t.id for t in core.TASKS.values() if t.family == "decision"]

_ACCESS_429 = re.compile(r'" 429\b')


def _act(obs: dict[str, Any]) -> dict[str, Any]:
    """A scripted policy: look the order up, then decide."""
    return {"lookup": "order"} if obs.get("step_count", 0) == 0 else {"decision": "reject"}


class _HttpEnv:
    """One environment of an HTTP trainer: its own connection, server-made episode ids."""

    def __init__(self, url: str, index: int) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)
        self.index, self.episode_id, self.done = index, "", False
        self.obs: dict[str, Any] = {}
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
        self.index, self.done = index, False
        self.obs: dict[str, Any] = {}
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


def trainer(url: str, kind: str, n: int, episodes: int = 2) -> list[str]:
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


def refused_429s(refused: list[str]) -> int:
    """The refusals that were rate limits (HTTP 429s, or WS error frames with status 429)."""
    return sum(("429" in r or "a second" in r or "per second" in r) for r in refused)


def _server(checkout: Path, tmp: Path, name: str) -> ServerProcess:
    port = free_port()
    env = dict(
        os.environ,
        DATABASE_URL=f"sqlite+aiosqlite:///{tmp / (name + '.db')}",
        HOST="127.0.0.1",
        PORT=str(port),
        RATE_LIMIT_EXEMPT="",
        ACCESS_LOG="true",
        LOG_LEVEL="INFO",
        PYTHONPATH=str(checkout),
    )
    # `python -m service.app` of that checkout (ServerProcess starts its command in this one)
    start = (
        f"import os, runpy, sys; os.chdir({str(checkout)!r}); sys.path.insert(0, {str(checkout)!r}); "
        "runpy.run_module('service.app', run_name='__main__')"
    )
    return ServerProcess(name, [sys.executable, "-c", start], port, env, tmp)


def _inference(checkout: Path, tmp: Path, delay_s: float) -> dict[str, Any]:
    from bench.stub_openai import StubLLM

    server = _server(checkout, tmp, f"inference-{delay_s:g}")
    try:
        server.wait_healthy()
        with StubLLM(delay_s=delay_s) as stub:
            env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "API_KEY", "RUN_TOKEN")}
            env.update(
                ENV_URL=server.url,
                API_BASE_URL=stub.url,
                HF_TOKEN="bench",
                MODEL_NAME="stub/model",
                INFERENCE_STATE_DIR=str(tmp / "runs"),
                PYTHONPATH=str(checkout),
            )
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, str(checkout / "inference.py")],
                cwd=checkout,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            seconds = time.monotonic() - started
        ends = [line for line in proc.stdout.splitlines() if line.startswith("[END]")]
        return {
            "scenario": "inference.py defaults (400 dev episodes, concurrency 16)",
            "llm_delay_s": delay_s,
            "returncode": proc.returncode,
            "end_lines": len(ends),
            "successes": sum("success=true" in e for e in ends),
            "workers_stopped": proc.stderr.count("this worker stops"),
            "http_429": len(_ACCESS_429.findall(server.log_path.read_text(errors="replace"))),
            "seconds": round(seconds, 1),
        }
    finally:
        server.stop()


def _trainer(checkout: Path, tmp: Path, kind: str, n: int) -> dict[str, Any]:
    server = _server(checkout, tmp, f"trainer-{kind}-{n}")
    try:
        server.wait_healthy()
        started = time.monotonic()
        refused = trainer(server.url, kind, n)
        seconds = time.monotonic() - started
        http = len(_ACCESS_429.findall(server.log_path.read_text(errors="replace")))
        return {
            "scenario": f"trainer, {n} parallel {kind} environments, 2 episodes each",
            "http_429": http,  # in the server's access log
            "refused_429": refused_429s(refused),  # rate limits the environments were refused (HTTP or WS frames)
            "refusals": len(refused),
            "first_refusal": refused[0][:200] if refused else None,
            "seconds": round(seconds, 1),
        }
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose server and inference.py run")
    parser.add_argument("--llm-delay", type=float, nargs="*", default=[0.0, 1.0], help="seconds per LLM answer")
    parser.add_argument("--trainer", type=int, nargs="*", default=[16, 64], help="parallel environments")
    parser.add_argument("--kinds", nargs="*", default=["http", "ws"], choices=["http", "ws"])
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    with tempfile.TemporaryDirectory(prefix="limits-fit-") as tmp:
        for delay in args.llm_delay:
            print(json.dumps({"checkout": str(checkout), **_inference(checkout, Path(tmp), delay)}), flush=True)
        for n in args.trainer:
            for kind in args.kinds:
                print(json.dumps({"checkout": str(checkout), **_trainer(checkout, Path(tmp), kind, n)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
