"""The client honours the service's limits (issue 20, item 4): 429 and 503 are retried after their
``Retry-After`` with jittered, bounded backoff; a call that cannot be applied twice is retried only
when the answer says it was not applied; a client paces itself to the limits ``GET /limits``
publishes; an episode that still fails ends its block with the error.

The service is an ``httpx.MockTransport``; ``asyncio.sleep`` is recorded, never slept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from client import runner, wire

PROBLEM = {"content-type": "application/problem+json"}


def problem(status: int, slug: str, retry_after: str | None = None) -> httpx.Response:
    headers = {**PROBLEM, **({"Retry-After": retry_after} if retry_after is not None else {})}
    body = {"type": f"https://ecomm-support-env.local/problems/{slug}", "title": slug, "status": status, "detail": slug}
    return httpx.Response(status, headers=headers, json=body)


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(wire.asyncio, "sleep", sleep)
    return waits


def client_of(answers: Callable[[httpx.Request, int], httpx.Response], token: str | None = None) -> wire.EnvClient:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return answers(request, calls["n"])

    env = wire.EnvClient("http://service", token, transport=httpx.MockTransport(handler))
    env.calls = calls  # type: ignore[attr-defined]
    return env


def ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"observation": {"step_count": 1}, "reward": 0.0, "done": False})


async def test_a_429_is_retried_after_its_retry_after_with_jitter(slept: list[float]) -> None:
    env = client_of(lambda r, n: problem(429, "rate-limited", "2") if n <= 2 else ok(r))
    result = await env.step("ep", {"lookup": "order"})
    assert result["observation"]["step_count"] == 1 and env.calls["n"] == 3  # type: ignore[attr-defined]
    assert len(slept) == 2 and all(2.0 <= w <= 3.0 for w in slept), slept  # never sooner than told
    assert env.rate_limited == 2


async def test_retries_are_bounded(slept: list[float]) -> None:
    env = client_of(lambda r, n: problem(429, "rate-limited", "1"))
    with pytest.raises(wire.ServiceError) as refused:
        await env.step("ep", {"lookup": "order"})
    assert refused.value.status == 429 and env.calls["n"] == wire.MAX_ATTEMPTS  # type: ignore[attr-defined]
    assert len(slept) == wire.MAX_ATTEMPTS - 1 and max(slept) <= wire.MAX_WAIT_S


async def test_without_retry_after_the_backoff_grows(slept: list[float]) -> None:
    env = client_of(lambda r, n: problem(503, "database-unavailable") if n <= 3 else ok(r))
    await env.step("ep", {"lookup": "order"})
    base = [wire.BACKOFF_S * 2**i for i in range(3)]
    assert all(b <= w <= 1.5 * b for b, w in zip(base, slept, strict=True)), slept


async def test_a_retry_after_of_hours_is_the_answer_not_a_wait(slept: list[float]) -> None:
    env = client_of(lambda r, n: problem(429, "episode-quota-exceeded", "3600"))
    with pytest.raises(wire.ServiceError) as refused:
        await env.reset(task_id="decision-easy")
    assert refused.value.status == 429 and slept == [] and env.calls["n"] == 1  # type: ignore[attr-defined]


async def test_a_reset_is_retried_only_when_it_was_not_applied(slept: list[float]) -> None:
    # a 429 or a 503 "unavailable" was not applied: retried; an outcome-unknown 503 or a lost
    # connection may have been, so a second reset would start a second episode: not retried
    env = client_of(
        lambda r, n: (
            problem(429, "rate-limited", "1")
            if n == 1
            else problem(503, "database-unavailable", "1")
            if n == 2
            else ok(r)
        )
    )
    await env.reset(task_id="decision-easy")
    assert env.calls["n"] == 3  # type: ignore[attr-defined]
    env = client_of(lambda r, n: problem(503, "outcome-unknown", "1"))
    with pytest.raises(wire.ServiceError):
        await env.reset(task_id="decision-easy")
    assert env.calls["n"] == 1  # type: ignore[attr-defined]

    def lost(request: httpx.Request, n: int) -> httpx.Response:
        raise httpx.ConnectError("connection reset")

    env = client_of(lost)
    with pytest.raises(wire.ServiceError):
        await env.reset(task_id="decision-easy")
    assert env.calls["n"] == 1  # type: ignore[attr-defined]


async def test_a_step_is_retried_with_the_same_request_id(slept: list[float]) -> None:
    ids: list[str] = []

    def answers(request: httpx.Request, n: int) -> httpx.Response:
        ids.append(json.loads(request.content)["request_id"])
        return problem(503, "outcome-unknown", "1") if n == 1 else ok(request)

    await client_of(answers).step("ep", {"lookup": "order"})
    assert len(ids) == 2 and ids[0] == ids[1]  # applied at most once by the service


def test_pacing_follows_the_published_limits() -> None:
    limits = {
        "exempt": False,
        "limits": {"rate_limit_per_s": 20, "rate_limit_run_token_per_s": 50, "rate_limit_address_per_s": 100},
    }
    pacing = wire.Pacing.from_limits(limits)
    assert pacing.every_call is not None and pacing.every_call.interval == pytest.approx(1 / 80)
    assert pacing.with_token is not None and pacing.with_token.interval == pytest.approx(1 / 40)
    assert pacing.without_credential is not None and pacing.without_credential.interval == pytest.approx(1 / 16)
    assert wire.Pacing.from_limits({**limits, "exempt": True}) == wire.Pacing()
    assert wire.Pacing.from_limits(None) == wire.Pacing()  # a server without GET /limits


async def test_a_pace_spaces_requests_across_the_clients_sharing_it(slept: list[float]) -> None:
    pace = wire.Pace(10.0)
    await asyncio.gather(*(pace.wait() for _ in range(5)))
    assert len(slept) == 4 and sorted(slept)[-1] == pytest.approx(0.4, abs=0.05)


async def test_an_episode_that_still_fails_ends_its_block_with_the_error(slept: list[float]) -> None:
    env = client_of(lambda r, n: problem(429, "rate-limited", "1"), token="tok")

    class Agent:
        async def act(self, obs: dict[str, Any]) -> Any:
            return runner.Turn({"lookup": "order"})

        def observe_result(self, *args: Any) -> None:
            pass

    lines: list[str] = []
    start = runner.Started("run_x-00001", "decision-easy", 0, 0, {"step_count": 0}, False, "dev")
    outcome = await runner.play_episode(env, Agent(), start, "b", "m", runner.Deadline(None), lines.append, True)
    assert not outcome.finished and "HTTP 429" in (outcome.error or "")
    assert outcome.pending is None  # printed now, not held for the run's verdicts
    assert lines[0].startswith("[START]") and lines[-1].startswith("[END] success=false steps=0 ")
