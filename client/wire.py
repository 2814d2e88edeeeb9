"""The service's HTTP API, as the client speaks it: one ``EnvClient`` (one ``httpx.AsyncClient``)
per worker. Problem details (RFC 9457) come back as :class:`ServiceError`."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

RETRIED_STATUSES = (502, 503, 504)
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


class EnvClient:
    """reset / step / grader and the runs API over HTTP."""

    def __init__(self, base_url: str, run_token: str | None = None, timeout: float = 30.0) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self.run_token = run_token

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
        attempts: int = 3,
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> Any:
        # Transport errors and 502/503/504 are retried; /step carries a request_id, so a retried
        # step is applied once. Other statuses are answers, raised as ServiceError.
        for attempt in range(attempts):
            last = attempt + 1 == attempts
            try:
                resp = await self.http.request(method, path, headers={**self._headers(auth), **(headers or {})}, **kw)
            except httpx.TransportError as exc:
                if last:
                    raise ServiceError(0, f"{method} {path} failed: {type(exc).__name__}: {exc}") from exc
            else:
                if resp.is_success:
                    return resp.json()
                if resp.status_code not in RETRIED_STATUSES or last:
                    raise _error(resp)
            await asyncio.sleep(0.2 * 2**attempt)
        raise ServiceError(0, f"{method} {path} failed")  # pragma: no cover - the loop returns or raises

    async def tasks(self) -> dict[str, Any]:
        return await self._call("GET", "/tasks", auth=False)

    async def reset(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", "/reset", json=body, attempts=1)

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
        return await self._call("POST", "/runs", json=body, headers=headers, auth=False, attempts=1)

    async def next_episode(self, run_id: str) -> dict[str, Any] | None:
        """The run's next episode, or None when every entry is handed out or the run is complete."""
        try:
            return await self._call("POST", f"/runs/{run_id}/next", attempts=1)
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
