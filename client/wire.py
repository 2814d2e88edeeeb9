"""The service's HTTP API, as the client speaks it: one ``EnvClient`` (one ``httpx.AsyncClient``)
per worker. Problem details (RFC 9457) come back as :class:`ServiceError`."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger("inference")

RETRIED_STATUSES = (502, 503, 504)  # the request may not have reached the service, or it was unavailable
RATE_LIMITED = 429  # never applied: always safe to retry, after Retry-After
MAX_ATTEMPTS = 6  # per call, for 429s and the statuses above
BACKOFF_S = 0.25  # the first wait without a Retry-After; doubles per attempt, +0–50 % jitter
MAX_WAIT_S = 30.0  # a Retry-After longer than this (a quota for hours) is an answer, not a wait
PACE_SHARE = 0.8  # the share of a limit a paced client uses (GET /limits), leaving room for anything else
RUN_PAGE_SIZE = 200  # the most a run page holds (RUN_PAGE_MAX)


class ServiceError(RuntimeError):
    """A non-2xx answer from the service (problem details are summarised in the message)."""

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.body = status, detail, body


def service_answers(url: str) -> bool:
    """True when ``url`` is an OpenEnv service: ``GET /health`` says healthy."""
    try:
        return httpx.get(url.rstrip("/") + "/health", timeout=3.0).json().get("status") == "healthy"
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


def _error(resp: httpx.Response) -> ServiceError:
    try:
        body = resp.json()
    except ValueError:
        body = resp.text
    detail = body.get("detail") if isinstance(body, dict) else None
    return ServiceError(resp.status_code, str(detail or body)[:500], body)


def retry_after_s(resp: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), or None when absent or unreadable."""
    raw = resp.headers.get("retry-after", "").strip()
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_s(attempt: int, retry_after: float | None) -> float:
    """The wait before attempt ``attempt + 1``: never less than Retry-After, jittered up to half again
    (so workers told the same Retry-After do not come back in one burst), and bounded."""
    base = retry_after if retry_after is not None else BACKOFF_S * 2**attempt
    return min(MAX_WAIT_S, base * (1 + 0.5 * random.random()))


class Pace:
    """At most ``rate`` requests a second, over every client sharing it: each request waits for its
    slot (a slot is handed out before any await, so the event loop's tasks never take one twice)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self._next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        at = max(now, self._next)
        self._next = at + self.interval
        if at > now:
            await asyncio.sleep(at - now)


@dataclass(frozen=True)
class Pacing:
    """How fast the clients of one evaluation may call the service, from its ``GET /limits`` (share
    one across the workers): every call under the address ceiling and its bearer token's budget;
    calls without a credential (resets, run creation) under the address's own budget too. Nothing
    is paced for an exempt client or a server that publishes no limits."""

    every_call: Pace | None = None
    with_token: Pace | None = None
    without_credential: Pace | None = None

    @classmethod
    def from_limits(cls, limits: dict[str, Any] | None) -> Pacing:
        if not limits or limits.get("exempt", True):
            return cls()
        rates = limits.get("limits") or {}

        def pace(*names: str) -> Pace | None:
            found = [float(rates[n]) for n in names if isinstance(rates.get(n), (int, float)) and rates[n] > 0]
            return Pace(PACE_SHARE * min(found)) if found else None

        return cls(pace("rate_limit_address_per_s"), pace("rate_limit_run_token_per_s"), pace("rate_limit_per_s"))

    async def wait(self, token: bool) -> None:
        for pace in (self.every_call, self.with_token if token else self.without_credential):
            if pace is not None:
                await pace.wait()


class EnvClient:
    """reset / step / grader and the runs API over HTTP. Every call is paced by ``pacing`` (when given)
    and retried on 429 after its ``Retry-After``; transport errors and 502/503/504 are retried too,
    for a call that cannot be applied twice only when the service says the request was not applied."""

    def __init__(
        self,
        base_url: str,
        run_token: str | None = None,
        timeout: float = 30.0,
        pacing: Pacing | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport)
        self.run_token = run_token
        self.pacing = pacing or Pacing()
        self.rate_limited = 0  # 429s this client was answered (and retried)

    async def aclose(self) -> None:
        await self.http.aclose()

    def _headers(self, auth: bool) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.run_token}"} if auth and self.run_token else {}

    async def _call(
        self,
        method: str,
        path: str,
        *,
        auth: bool = True,
        repeatable: bool = True,
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> Any:
        """``repeatable``: applying the request twice is harmless (reads, and /step, which carries a
        request_id); otherwise a transport error or 5xx is retried only when the answer says the
        request was not applied (a 429, or a 503 that is not ``outcome-unknown``)."""
        sent = {**self._headers(auth), **(headers or {})}
        for attempt in range(MAX_ATTEMPTS):
            last = attempt + 1 == MAX_ATTEMPTS
            await self.pacing.wait("Authorization" in sent)
            try:
                resp = await self.http.request(method, path, headers=sent, **kw)
            except httpx.TransportError as exc:
                if last or not repeatable:
                    raise ServiceError(0, f"{method} {path} failed: {type(exc).__name__}: {exc}") from exc
                wait = backoff_s(attempt, None)
            else:
                if resp.is_success:
                    return resp.json()
                error = _error(resp)
                if last or not self._retried(resp, error, repeatable):
                    raise error
                wait = backoff_s(attempt, retry_after_s(resp))
                if (retry_after_s(resp) or 0.0) > MAX_WAIT_S:
                    raise error  # a quota for hours: the answer, not a wait
                self.rate_limited += resp.status_code == RATE_LIMITED
                log.debug("%s %s answered %d; retrying in %.1fs", method, path, resp.status_code, wait)
            await asyncio.sleep(wait)
        raise ServiceError(0, f"{method} {path} failed")  # pragma: no cover - the loop returns or raises

    @staticmethod
    def _retried(resp: httpx.Response, error: ServiceError, repeatable: bool) -> bool:
        if resp.status_code == RATE_LIMITED:
            return True
        if resp.status_code not in RETRIED_STATUSES:
            return False
        kind = str(error.body.get("type") or "") if isinstance(error.body, dict) else ""
        return repeatable or (resp.status_code == 503 and not kind.endswith("/outcome-unknown"))

    async def limits(self) -> dict[str, Any] | None:
        """``GET /limits`` (the address this client counts as, and the limits), None on a server without it."""
        try:
            body = await self._call("GET", "/limits", auth=False)
        except ServiceError:
            return None
        return body if isinstance(body, dict) else None

    async def tasks(self) -> dict[str, Any]:
        return await self._call("GET", "/tasks", auth=False)

    async def reset(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", "/reset", json=body, repeatable=False)

    async def resume(self, episode_id: str) -> dict[str, Any]:
        return await self._call("POST", "/reset", json={"episode_id": episode_id, "resume": True})

    async def step(self, episode_id: str, action: dict[str, Any]) -> dict[str, Any]:
        body = {"action": action, "episode_id": episode_id, "request_id": uuid.uuid4().hex}
        return await self._call("POST", "/step", json=body)

    async def grade(self, episode_id: str) -> dict[str, Any] | None:
        """``GET /grader``'s answer (``score``, and ``resolved`` on servers that report it), or None
        when it is withheld (test split until the run completes) or the episode is not gradable."""
        try:
            body = await self._call("GET", "/grader", params={"episode_id": episode_id})
        except ServiceError:
            return None
        return body if isinstance(body, dict) else None

    async def create_run(self, submitter_key: str | None = None, **body: Any) -> dict[str, Any]:
        """``POST /runs``; a test-split run is authorised by the submitter key (``SUBMITTER_KEY``)."""
        headers = {"Authorization": f"Bearer {submitter_key}"} if submitter_key else {}
        return await self._call("POST", "/runs", json=body, headers=headers, auth=False, repeatable=False)

    async def next_episode(self, run_id: str) -> dict[str, Any] | None:
        """The run's next episode, or None when every entry is handed out or the run is complete."""
        try:
            return await self._call("POST", f"/runs/{run_id}/next", repeatable=False)
        except ServiceError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            if exc.status == 409 and (body.get("code") == "run_exhausted" or body.get("run_status") == "complete"):
                return None
            raise

    async def get_run(self, run_id: str) -> dict[str, Any]:
        """The run with every episode row (run pages are paged: all pages, concatenated)."""
        run = await self._call("GET", f"/runs/{run_id}", params={"page": 1, "per_page": RUN_PAGE_SIZE})
        episodes, pages = list(run.get("episodes") or []), int((run.get("page") or {}).get("pages") or 1)
        for number in range(2, pages + 1):
            more = await self._call("GET", f"/runs/{run_id}", params={"page": number, "per_page": RUN_PAGE_SIZE})
            episodes += more.get("episodes") or []
        return {**run, "episodes": episodes}

    async def report_usage(self, run_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        body = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        await self._call("POST", f"/runs/{run_id}/usage", json=body)
