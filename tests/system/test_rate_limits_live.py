"""The documented uses fit the default limits (issue 20, item 4): against a live server where
loopback is **not** exempt (``RATE_LIMIT_EXEMPT=""``, as on any real deployment), ``inference.py``
at its default concurrency and a trainer with 16 or 64 parallel environments from one address —
over HTTP and over WebSocket — never meet a 429.

The server runs with ``ACCESS_LOG=true``: every HTTP answer is one access-log line, so the 429s are
counted where they are made. WebSocket frames have no access-log line; the clients count the
``status: 429`` error frames they receive.

A trainer is modelled as GRPO's environment loop does it (:func:`bench.limits_fit.trainer`): every
environment resets, then all of them act at once once per "generation" (the policy's batched forward
pass; here a pause of ``GENERATION_S``), until each episode is done. A slower machine only makes the
rounds slower. ``python -m bench.limits_fit`` prints the same counts for the full default run.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.harness import STALLED_AFTER_S
from bench.limits_fit import refused_429s, trainer
from bench.stub_openai import StubLLM
from service.env import TASKS
from service.settings import Settings
from tests.client.test_inference import END_RE, llm_env, run_inference
from tests.conftest import LiveServer

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
        limits = httpx.get(f"{server.url}/limits", timeout=STALLED_AFTER_S).json()
        assert limits["exempt"] is False, limits  # the point of these tests: loopback is limited
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_inference_at_its_default_concurrency_meets_no_429(limited_server: LiveServer, tmp_path: Path) -> None:
    """An instant LLM (the worst case for the limits) at the default concurrency of 16."""
    with StubLLM() as stub:
        proc = run_inference(
            ["--limit-per-task", "10"], limited_server.url, extra_env=llm_env(stub, tmp_path), timeout=STALLED_AFTER_S
        )
    ends = [END_RE.match(line) for line in proc.stdout.splitlines() if line.startswith("[END]")]
    rejected = http_429s(limited_server)
    print(f"inference.py --limit-per-task 10 ({10 * len(TASKS)} episodes, concurrency 16): {rejected} HTTP 429s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(ends) == 10 * len(TASKS) and all(ends), proc.stdout[-2000:]
    assert rejected == 0, proc.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["http", "ws"])
@pytest.mark.parametrize("n", [16, 64])
def test_a_trainer_with_parallel_environments_meets_no_429(limited_server: LiveServer, kind: str, n: int) -> None:
    refused = trainer(limited_server.url, kind, n)
    rejected = http_429s(limited_server) + refused_429s(refused)
    print(f"trainer, {n} parallel {kind} environments from one address: {rejected} 429s, {len(refused)} refusals")
    assert refused == [], json.dumps(refused[:5], indent=1)
    assert rejected == 0
