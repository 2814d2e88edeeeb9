"""Evaluate an agent against ecomm-support-env: ``python inference.py``.

By default the evaluation is a server-side *run* (``POST /runs``): the server picks the episodes,
grades them itself and ranks the finished run on its leaderboard. ``--direct`` plays plain
``/reset`` + ``/step`` episodes instead (no run, nothing ranked).

stdout carries exactly three kinds of line and nothing else (the hackathon-era log format)::

    [START] task=<task_id> env=<benchmark> model=<model_name>
    [STEP] step=<n> action=<compact json|null> reward=<0.00> done=<true|false> error=<msg|null>
    [END] success=<true|false> steps=<n> score=<0.000> rewards=<r1,r2,...>

Each episode's lines are printed together as one block when the episode ends, so concurrent
episodes never interleave: stdout is a sequence of whole ``[START]`` … ``[END]`` blocks. Every
agent turn is one ``[STEP]`` — also a turn whose answer could not be parsed or whose action the
service rejected (reward 0.00, the reason in ``error``), so ``steps`` and the reward list always
match the block's ``[STEP]`` lines. ``[STEP]`` rewards are what the server sent. ``[END]`` is
printed even when the episode fails. ``success`` means the episode is *resolved* — every required
check of its task passed — as the server reports it (the final observation's ``resolved``, else
``GET /grader``'s); a server that reports no verdict is judged by the old rule, its score ≥
``SUCCESS_THRESHOLD``. ``score`` is clamped into [0.001, 0.999]: the hackathon checker rejects a
task score of exactly 0 or 1 (the exact score is ``GET /grader``'s).

With ``ENV_URL`` unset and nothing answering the default URL, a local service is started on a
temporary SQLite database (as ``baseline.py`` does); an ``ENV_URL`` that does not answer is a
usage error (exit 2), never silently replaced. Progress, the per-task summary and the run's
leaderboard link go to stderr. See ``docs/inference-notes.md`` for the variables, flags and the
time-budget arithmetic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import httpx

log = logging.getLogger("inference")

DEFAULT_API_BASE_URL = "https://router.huggingface.co/v1"
DEFAULT_MODEL_NAME = "Qwen/Qwen2.5-72B-Instruct"
DEFAULT_ENV_URL = "http://localhost:7860"
DEFAULT_BENCHMARK = "ecomm-support-env"
# The old meaning of success, kept for servers that report no "resolved" verdict.
SUCCESS_THRESHOLD = 0.5
# The hackathon checker rejects a task score of exactly 0.0 or 1.0: [END] prints inside (0, 1).
SCORE_SHOWN_MIN, SCORE_SHOWN_MAX = 0.001, 0.999
ROOT = Path(__file__).resolve().parent
# Consecutive turns without an accepted action (unparseable answer, action rejected with 422)
# before the runner plays FALLBACK_ACTION for the model. A lookup decides nothing, earns nothing
# and costs nothing, so the fallback never answers the ticket on the model's behalf; it only
# moves the episode towards its step limit, so a broken model cannot loop forever.
MAX_INVALID_TURNS = 3
FALLBACK_ACTION: dict[str, Any] = {"lookup": "policy"}
# 400 dev tickets x ~3.5 LLM turns x ~3 s per call / 16 in flight = ~4.5 minutes (docs/inference-notes.md).
DEFAULT_CONCURRENCY = 16
DEFAULT_DIRECT_LIMIT = 10
DEFAULT_TIME_BUDGET_S = 900.0
EXIT_OK, EXIT_FAILURES, EXIT_USAGE = 0, 1, 2


# ------------------------------------------------------------------------------ configuration

@dataclass(frozen=True)
class Config:
    """Everything read from the environment, once."""

    api_base_url: str
    model_name: str
    api_key: str | None
    env_url: str
    benchmark: str
    env_url_given: bool
    run_token: str | None
    submitter_key: str | None  # SUBMITTER_KEY: test-split runs need one, issued by the service's operator
    llm_timeout_s: float
    llm_max_attempts: int
    llm_backoff_s: float
    state_dir: Path

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Config:
        env = dict(os.environ if environ is None else environ)
        return cls(
            api_base_url=env.get("API_BASE_URL") or DEFAULT_API_BASE_URL,
            model_name=env.get("MODEL_NAME") or DEFAULT_MODEL_NAME,
            api_key=env.get("HF_TOKEN") or env.get("API_KEY") or None,
            env_url=(env.get("ENV_URL") or DEFAULT_ENV_URL).rstrip("/"),
            benchmark=env.get("BENCHMARK") or DEFAULT_BENCHMARK,
            env_url_given=bool(env.get("ENV_URL")),
            run_token=env.get("RUN_TOKEN") or None,
            submitter_key=env.get("SUBMITTER_KEY") or None,
            llm_timeout_s=float(env.get("LLM_TIMEOUT_S") or 15.0),
            llm_max_attempts=max(1, int(env.get("LLM_MAX_ATTEMPTS") or 4)),
            llm_backoff_s=float(env.get("LLM_BACKOFF_S") or 1.0),
            state_dir=Path(env.get("INFERENCE_STATE_DIR") or ".inference_runs"),
        )


# ------------------------------------------------------------------------------------ logging

def one_line(text: Any, limit: int = 300) -> str:
    """A single log-safe line: no CR/LF/tabs, collapsed whitespace, bounded length."""
    s = re.sub(r"\s+", " ", str(text)).strip()
    return s if len(s) <= limit else s[: limit - 3] + "..."


def compact_json(value: Any) -> str:
    # json.dumps escapes newlines inside strings, so the result is always one line.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def _bool(b: bool) -> str:
    return "true" if b else "false"


def start_line(task_id: str, benchmark: str, model: str) -> str:
    return f"[START] task={task_id} env={benchmark} model={model}"


def step_line(n: int, action: dict[str, Any] | None, reward: float, done: bool, error: str | None) -> str:
    action_s = "null" if action is None else compact_json(action)
    error_s = "null" if not error else one_line(error)
    return f"[STEP] step={n} action={action_s} reward={reward:.2f} done={_bool(done)} error={error_s}"


def end_line(success: bool, steps: int, score: float, rewards: list[float]) -> str:
    shown = min(max(score, SCORE_SHOWN_MIN), SCORE_SHOWN_MAX)
    return f"[END] success={_bool(success)} steps={steps} score={shown:.3f} rewards={','.join(f'{r:.2f}' for r in rewards)}"


def emit(line: str) -> None:
    """One complete line per write (play_episode writes an episode's lines back to back)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------- tolerant JSON parsing

class UnparseableReply(ValueError):
    pass


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _balanced_objects(text: str) -> list[str]:
    """Every top-level balanced ``{...}`` substring, in order; braces inside strings are ignored."""
    found, depth, start, in_str, escaped = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def parse_action(text: str | None) -> dict[str, Any]:
    """The JSON action in a model's answer: bare, in a code fence, or amid prose (first balanced
    ``{...}`` that decodes to an object). ``{"action": {...}}`` is unwrapped."""
    if text is None or not text.strip():
        raise UnparseableReply("empty reply")
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    candidates += _balanced_objects(text)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            if set(value) == {"action"} and isinstance(value["action"], dict):
                value = value["action"]
            return value
    raise UnparseableReply(f"no JSON object in reply: {one_line(text, 120)!r}")


# ------------------------------------------------------------------------------------ service

class ServiceError(RuntimeError):
    """A non-2xx answer from the service (problem details are summarised in the message)."""

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.body = status, detail, body


class EnvClient:
    """The service's HTTP API. One instance (one ``httpx.AsyncClient``) per worker."""

    def __init__(self, base_url: str, run_token: str | None = None, timeout: float = 30.0) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self.run_token = run_token

    async def aclose(self) -> None:
        await self.http.aclose()

    def _headers(self, auth: bool) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.run_token}"} if auth and self.run_token else {}

    async def _call(
        self, method: str, path: str, *, auth: bool = True, attempts: int = 3, headers: dict[str, str] | None = None, **kw: Any
    ) -> Any:
        # Transport errors and 502/503/504 are retried; /step carries a request_id, so a retried
        # step is applied once. Other statuses are answers, raised as ServiceError.
        for attempt in range(attempts):
            try:
                resp = await self.http.request(method, path, headers={**self._headers(auth), **(headers or {})}, **kw)
            except httpx.TransportError as exc:
                if attempt + 1 == attempts:
                    raise ServiceError(0, f"{method} {path} failed: {type(exc).__name__}: {exc}") from exc
            else:
                if resp.status_code in (502, 503, 504) and attempt + 1 < attempts:
                    pass
                elif resp.is_success:
                    return resp.json()
                else:
                    try:
                        body = resp.json()
                    except ValueError:
                        body = resp.text
                    detail = body.get("detail") if isinstance(body, dict) else None
                    raise ServiceError(resp.status_code, str(detail or body)[:500], body)
            await asyncio.sleep(0.2 * 2**attempt)
        raise ServiceError(0, f"{method} {path} failed")  # pragma: no cover - loop always returns/raises

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
        try:
            return await self._call("POST", f"/runs/{run_id}/next", attempts=1)
        except ServiceError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            # every entry handed out, or the run already complete: nothing left to start
            if exc.status == 409 and (body.get("code") == "run_exhausted" or body.get("run_status") == "complete"):
                return None
            raise

    async def get_run(self, run_id: str) -> dict[str, Any]:
        """The run with every episode row (run pages are paged: all pages, concatenated)."""
        run = await self._call("GET", f"/runs/{run_id}", params={"page": 1, "per_page": 1000})
        episodes, pages = list(run.get("episodes") or []), int((run.get("page") or {}).get("pages") or 1)
        for number in range(2, pages + 1):
            more = await self._call("GET", f"/runs/{run_id}", params={"page": number, "per_page": 1000})
            episodes += more.get("episodes") or []
        return {**run, "episodes": episodes}

    async def report_usage(self, run_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        await self._call("POST", f"/runs/{run_id}/usage", json={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})


# ------------------------------------------------------------------------------------- agents

@dataclass
class Turn:
    """An agent's move: an action, or None with the reason it has none."""

    action: dict[str, Any] | None
    error: str | None = None


class EpisodeAgent(Protocol):
    async def act(self, obs: dict[str, Any]) -> Turn: ...

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        """The service accepted ``action`` (with the environment's in-band ``note``, if any) or
        rejected it (``note`` says why). Rewards are never passed to an agent."""


class FatalAgentError(RuntimeError):
    """The agent cannot work at all (bad credentials, unknown model): stop the whole evaluation."""


class LLMUnavailable(RuntimeError):
    """The LLM did not answer after every retry: this episode is abandoned (resumable in a run)."""


@dataclass
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMClient:
    """Chat completions through ``openai.AsyncOpenAI`` with a per-call timeout and bounded retries
    (exponential backoff with jitter) on 429, 5xx, timeouts and connection errors."""

    def __init__(self, cfg: Config, usage: TokenUsage) -> None:
        from openai import AsyncOpenAI

        self.cfg, self.usage = cfg, usage
        # max_retries=0: the retry policy below is the only one, so attempts stay bounded and visible.
        self.client = AsyncOpenAI(base_url=cfg.api_base_url, api_key=cfg.api_key, timeout=cfg.llm_timeout_s, max_retries=0)

    async def aclose(self) -> None:
        await self.client.close()

    async def complete(self, messages: list[dict[str, str]]) -> str:
        import openai

        last: Exception | None = None
        for attempt in range(self.cfg.llm_max_attempts):
            try:
                resp = await self.client.chat.completions.create(
                    model=self.cfg.model_name, messages=messages, temperature=0.0, max_tokens=600
                )
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                raise FatalAgentError(f"the LLM endpoint refused the request: {one_line(exc, 200)}") from exc
            except (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError) as exc:
                last = exc
            except openai.APIStatusError as exc:
                if exc.status_code < 500:
                    raise LLMUnavailable(f"LLM call failed: {one_line(exc, 200)}") from exc
                last = exc
            else:
                if resp.usage is not None:
                    self.usage.prompt_tokens += resp.usage.prompt_tokens or 0
                    self.usage.completion_tokens += resp.usage.completion_tokens or 0
                if not resp.choices:
                    return ""
                return resp.choices[0].message.content or ""
            if attempt + 1 < self.cfg.llm_max_attempts:
                delay = self.cfg.llm_backoff_s * 2**attempt * (0.75 + 0.5 * random.random())
                log.debug("LLM attempt %d failed (%s); retrying in %.1fs", attempt + 1, type(last).__name__, delay)
                await asyncio.sleep(delay)
        raise LLMUnavailable(f"LLM failed after {self.cfg.llm_max_attempts} attempts: {type(last).__name__}: {one_line(last, 150)}")


def _schema_summary(schema: dict[str, Any]) -> str:
    """One line per action field: type or allowed values, and its description."""
    lines = []
    for name, prop in schema.get("properties", {}).items():
        options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
        kinds = []
        for o in options:
            if "enum" in o:
                kinds.append(" | ".join(map(str, o["enum"])))
            elif o.get("type"):
                kinds.append(o["type"])
        lines.append(f'- "{name}": {" or ".join(kinds) or "any"} — {prop.get("description", "")}'.rstrip(" —"))
    return "\n".join(lines)


def system_prompt(task: dict[str, Any], action_schema: dict[str, Any]) -> str:
    return (
        f"You are a customer-support agent for an online store, working one ticket.\n"
        f"Task: {task['id']} — {task.get('title', '')} ({task.get('family')}, {task.get('difficulty')}).\n\n"
        f"INSTRUCTIONS\n{task.get('instructions', '')}\n\n"
        f"ACTION FIELDS (all optional; set at least one; several may be combined in one action)\n"
        f"{_schema_summary(action_schema)}\n\n"
        f"ACTION JSON SCHEMA\n{compact_json(action_schema)}\n\n"
        "The store policy, the order record and the customer record are available with the `lookup` "
        "field; the result arrives in the next turn. You have at most the step budget shown.\n"
        "Answer every turn with exactly one JSON object — the action — and nothing else: no prose, "
        "no code fences. Example: {\"lookup\": \"policy\"}"
    )


def _clip(text: Any, limit: int) -> str:
    s = text if isinstance(text, str) else compact_json(text)
    return s if len(s) <= limit else s[:limit] + f" …[{len(s) - limit} more chars]"


@dataclass
class _PastTurn:
    action: dict[str, Any]
    rejected: bool
    note: str | None


@dataclass
class LLMEpisodeAgent:
    """Stateless prompts: every turn renders the whole (trimmed) situation afresh — the ticket,
    the latest conversation, every lookup result so far and the agent's own past actions with the
    service's notes — so the prompt stays bounded however long the episode runs. Rewards are never
    shown: the model is evaluated, not coached by the grader."""

    llm: LLMClient
    system: str
    lookups: dict[str, Any] = field(default_factory=dict)
    past: list[_PastTurn] = field(default_factory=list)

    HISTORY_ENTRIES = 8
    ENTRY_CHARS = 800
    LOOKUP_CHARS = {"policy": 5000}
    OTHER_LOOKUP_CHARS = 2000
    PAST_TURNS = 10

    def render(self, obs: dict[str, Any]) -> str:
        parts = [
            f"TICKET {obs.get('ticket_id')} (task_id: {obs.get('task_id')}) — step_count: {obs.get('step_count')} "
            f"of max_steps: {obs.get('max_steps')}; status: {obs.get('status')}; queue: {obs.get('current_queue')}; "
            f"tags: {', '.join(obs.get('tags') or []) or 'none'}",
            _clip(obs.get("ticket", ""), 3000),
        ]
        history = [e for e in obs.get("history") or [] if e.get("text") != obs.get("customer_message")]
        if history:
            shown = history[-self.HISTORY_ENTRIES :]
            head = f"CONVERSATION (last {len(shown)} of {len(history)} entries after the first message)" if len(shown) < len(history) else "CONVERSATION (after the first message)"
            parts.append(head + "\n" + "\n".join(f"{e.get('role')}: {_clip(e.get('text', ''), self.ENTRY_CHARS)}" for e in shown))
        if self.lookups:
            parts.append("LOOKUP RESULTS\n" + "\n".join(
                f"{k}: {_clip(v, self.LOOKUP_CHARS.get(k, self.OTHER_LOOKUP_CHARS))}" for k, v in self.lookups.items()))
        if self.past:
            shown_past = self.past[-self.PAST_TURNS :]
            lines = []
            for t in shown_past:
                if t.rejected:
                    outcome = f"rejected: {one_line(t.note, 200)}"
                else:
                    outcome = "accepted" + (f"; note: {one_line(t.note, 200)}" if t.note else "")
                lines.append(f"- {compact_json(t.action)} → {outcome}")
            parts.append("YOUR PREVIOUS ACTIONS\n" + "\n".join(lines))
        if obs.get("last_action_error"):
            parts.append(f"LAST ACTION NOTE: {obs['last_action_error']}")
        parts.append("Your next action, as one JSON object:")
        return "\n\n".join(parts)

    async def act(self, obs: dict[str, Any]) -> Turn:
        tool = obs.get("tool_result")
        if tool is not None and self.past and self.past[-1].action.get("lookup"):
            self.lookups[self.past[-1].action["lookup"]] = tool
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": self.render(obs)}]
        reply = await self.llm.complete(messages)
        try:
            return Turn(parse_action(reply))
        except UnparseableReply as first:
            # Re-ask once, showing the model its own answer; a second failure is reported as the turn's error.
            messages += [
                {"role": "assistant", "content": reply[:2000]},
                {"role": "user", "content": f"That answer could not be used ({first}). Reply with exactly one JSON object, the action, and nothing else."},
            ]
            reply = await self.llm.complete(messages)
            try:
                return Turn(parse_action(reply))
            except UnparseableReply as second:
                return Turn(None, f"unparseable model reply after one re-ask: {second}")

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        self.past.append(_PastTurn(action, rejected, note))


class ReferenceEpisodeAgent:
    """Adapter for the service's scripted agents (``service.env.agents``): they read a typed
    ``Observation`` and return an ``Action``."""

    def __init__(self, agent: Any) -> None:
        from service.env import Observation

        self.agent = agent
        self._fields = set(Observation.model_fields)
        self._obs_type = Observation

    async def act(self, obs: dict[str, Any]) -> Turn:
        typed = self._obs_type.model_validate({k: v for k, v in obs.items() if k in self._fields})
        action = self.agent.act(typed)
        return Turn(action.model_dump(mode="json", exclude_defaults=True))

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        pass


AGENTS = ("llm", "heuristic", "random")


def reference_agent(name: str, split: str, seed: int, trial: int) -> ReferenceEpisodeAgent:
    from service.env.agents import HeuristicAgent, RandomAgent

    if name == "heuristic":
        return ReferenceEpisodeAgent(HeuristicAgent(seed))
    # Each (split, ticket seed, trial) gets its own random stream — k trials are k independent
    # draws — and the same stream every time, so random baselines are reproducible.
    return ReferenceEpisodeAgent(RandomAgent(zlib.crc32(f"{split}:{seed}:{trial}".encode())))


# ------------------------------------------------------------------------------------- runner

@dataclass
class Started:
    """An episode handed to a worker: a fresh reset, a run's next entry, or a resumed one."""

    episode_id: str
    task_id: str
    seed: int
    trial: int
    observation: dict[str, Any]
    done: bool
    split: str | None = None

    @classmethod
    def of(cls, body: dict[str, Any], trial: int = 0) -> Started:
        meta = body.get("metadata") or {}
        obs = body["observation"]
        return cls(
            episode_id=str(meta.get("episode_id") or obs.get("episode_id")),
            task_id=str(meta.get("task_id") or obs.get("task_id")),
            seed=int(meta.get("seed") or 0),
            trial=int(meta.get("trial", trial) or 0),
            observation=obs,
            done=bool(body.get("done")),
            split=meta.get("split"),
        )


@dataclass
class Outcome:
    task_id: str
    seed: int
    trial: int
    episode_id: str | None
    score: float
    success: bool
    finished: bool
    error: str | None = None


class Deadline:
    def __init__(self, budget_s: float | None) -> None:
        self.at = time.monotonic() + budget_s if budget_s else math.inf

    def passed(self) -> bool:
        return time.monotonic() >= self.at


class DeadlineReached(RuntimeError):
    pass


async def play_episode(
    env: EnvClient, agent: EpisodeAgent, start: Started, benchmark: str, model: str, deadline: Deadline,
    sink: Callable[[str], None] = emit,
) -> Outcome:
    """Play one episode to its end; its START/STEP/END lines go to ``sink`` together, as one block,
    when it ends — concurrent episodes never interleave. Never raises (except cancellation, after
    printing the block): failures end the episode with success=false."""
    lines = [start_line(start.task_id, benchmark, model)]
    rewards: list[float] = []
    score, success, finished, failure = 0.0, False, start.done, None
    obs = start.observation
    try:
        done, invalid_streak = start.done, 0
        while not done:
            if deadline.passed():
                raise DeadlineReached("time budget exhausted; the episode was left unfinished (resumable)")
            turn = await agent.act(obs)
            action, note = turn.action, turn.error
            if action is None:
                invalid_streak += 1
                if invalid_streak < MAX_INVALID_TURNS:
                    rewards.append(0.0)
                    lines.append(step_line(len(rewards), None, 0.0, False, note))
                    continue
                action = dict(FALLBACK_ACTION)
                note = f"{note}; fallback action after {invalid_streak} turns without a valid action"
            try:
                result = await env.step(start.episode_id, action)
            except ServiceError as exc:
                if exc.status != 422:
                    raise
                # The service rejected the action; the episode did not advance. Let the model try again.
                invalid_streak += 1
                if invalid_streak > 2 * MAX_INVALID_TURNS:
                    raise RuntimeError(f"gave up after {invalid_streak} rejected actions: {exc.detail}") from exc
                rewards.append(0.0)
                lines.append(step_line(len(rewards), action, 0.0, False, f"action rejected: {exc.detail}"))
                agent.observe_result(action, True, exc.detail)
                continue
            invalid_streak = 0
            reward = float(result.get("reward") or 0.0)  # as sent: 0.0 while a test-split run hides rewards
            done = bool(result.get("done"))
            obs = result["observation"]
            rewards.append(reward)
            lines.append(step_line(len(rewards), action, reward, done, obs.get("last_action_error") or note))
            agent.observe_result(action, False, obs.get("last_action_error"))
        finished = True
        score, success = await _verdict(env, start.episode_id, obs, rewards)
    except (FatalAgentError, asyncio.CancelledError):
        failure = "aborted"
        raise
    except Exception as exc:  # noqa: BLE001 - an episode failure must not take the run down
        failure = f"{type(exc).__name__}: {exc}"
        log.warning("episode %s (%s) failed: %s", start.episode_id, start.task_id, one_line(failure, 300))
    finally:
        success = success and finished and failure is None
        lines.append(end_line(success, len(rewards), score, rewards))
        for line in lines:  # no await in between: the block reaches stdout whole
            sink(line)
    return Outcome(start.task_id, start.seed, start.trial, start.episode_id, score, success, finished and failure is None, failure)


async def _verdict(env: EnvClient, episode_id: str, final_obs: dict[str, Any], rewards: list[float]) -> tuple[float, bool]:
    """(score, resolved) of a finished episode, from the best source the server offers: the final
    observation (``final: true`` with ``score`` and ``resolved``), else ``GET /grader``; a server
    that reports no ``resolved`` verdict is judged by the old rule (score ≥ SUCCESS_THRESHOLD), and
    an episode whose score is withheld is never claimed a success (its score: the clipped reward sum)."""
    score: Any = None
    resolved: Any = None
    if final_obs.get("final") is True:
        score, resolved = final_obs.get("score"), final_obs.get("resolved")
    if score is None or resolved is None:
        graded = await env.grade(episode_id) or {}
        score = graded.get("score") if score is None else score
        resolved = graded.get("resolved") if resolved is None else resolved
    if not isinstance(score, (int, float)) or isinstance(score, bool):
        return min(max(sum(rewards), 0.0), 1.0), bool(resolved is True)
    if isinstance(resolved, bool):
        return float(score), resolved
    return float(score), float(score) >= SUCCESS_THRESHOLD


class EpisodeSource(Protocol):
    async def next(self, env: EnvClient) -> Started | None: ...


@dataclass
class DirectSource:
    """Plain episodes, chosen client-side: every task × seeds 0..n-1 × trials."""

    entries: list[tuple[str, int, int]]
    split: str

    async def next(self, env: EnvClient) -> Started | None:
        if not self.entries:
            return None
        task_id, seed, trial = self.entries.pop(0)
        return Started.of(await env.reset(task_id=task_id, seed=seed, split=self.split), trial)


@dataclass
class RunSource:
    """A server-side run: first the started-but-unfinished episodes being resumed, then the
    run's next unstarted manifest entries until the server says it is exhausted."""

    run_id: str
    resume: list[tuple[str, int]] = field(default_factory=list)  # (episode_id, trial)
    exhausted: bool = False

    async def next(self, env: EnvClient) -> Started | None:
        if self.resume:
            episode_id, trial = self.resume.pop(0)
            return Started.of(await env.resume(episode_id), trial)
        if self.exhausted:
            return None
        body = await env.next_episode(self.run_id)
        if body is None:
            self.exhausted = True
            return None
        return Started.of(body)


class Progress:
    """A progress line on stderr (redrawn in place on a terminal, a line per 10% otherwise)."""

    def __init__(self, total: int | None, enabled: bool = True) -> None:
        self.total, self.done, self.scores, self.failed = total, 0, [], 0
        self.tty = sys.stderr.isatty()
        self.enabled = enabled
        self._last_decile = -1

    def update(self, outcome: Outcome) -> None:
        self.done += 1
        self.scores.append(outcome.score)
        self.failed += not outcome.finished
        total = self.total or self.done
        frac = min(self.done / total, 1.0) if total else 1.0
        if not self.enabled:
            return
        bar = "#" * int(frac * 30)
        text = f"[{bar:<30}] {self.done}/{self.total if self.total else '?'} episodes  mean score {sum(self.scores) / len(self.scores):.3f}  failed {self.failed}"
        if self.tty:
            sys.stderr.write("\r" + text)
            sys.stderr.flush()
        elif int(frac * 10) != self._last_decile:
            self._last_decile = int(frac * 10)
            sys.stderr.write(text + "\n")

    def close(self) -> None:
        if self.tty and self.done and self.enabled:
            sys.stderr.write("\n")


AgentFactory = Callable[[Started], EpisodeAgent]


async def run_workers(
    make_env: Callable[[], EnvClient],
    source: EpisodeSource,
    make_agent: Callable[[], Awaitable[tuple[AgentFactory, Callable[[], Awaitable[None]]]]],
    *,
    concurrency: int,
    max_episodes: int | None,
    benchmark: str,
    model: str,
    deadline: Deadline,
    progress: Progress,
    sink: Callable[[str], None] = emit,
) -> tuple[list[Outcome], int]:
    """``concurrency`` workers, each with its own service client and agent resources, pull
    episodes from ``source`` until it is empty, ``max_episodes`` have started, or the deadline."""
    outcomes: list[Outcome] = []
    claimed = 0
    fatal: list[BaseException] = []
    errors: list[ServiceError] = []

    async def worker() -> None:
        nonlocal claimed
        env = make_env()
        factory, close_agent = await make_agent()
        try:
            while not fatal and not deadline.passed():
                if max_episodes is not None and claimed >= max_episodes:
                    return
                claimed += 1
                try:
                    start = await source.next(env)
                except ServiceError as exc:
                    claimed -= 1
                    log.error("could not start an episode (this worker stops): %s", exc)
                    errors.append(exc)
                    return
                if start is None:
                    claimed -= 1
                    return
                outcome = await play_episode(env, factory(start), start, benchmark, model, deadline, sink)
                outcomes.append(outcome)
                progress.update(outcome)
        except FatalAgentError as exc:
            fatal.append(exc)
        finally:
            await close_agent()
            await env.aclose()

    results = await asyncio.gather(*(worker() for _ in range(concurrency)), return_exceptions=True)
    progress.close()
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            fatal.append(r)
    if fatal:
        raise fatal[0]
    if errors and not outcomes:
        raise errors[0]
    return outcomes, len(errors)


# --------------------------------------------------------------------------------- run state

def save_run_state(cfg: Config, run: dict[str, Any], agent: str, model: str) -> Path:
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    path = cfg.state_dir / f"{run['run_id']}.json"
    record = {"run_id": run["run_id"], "run_token": run["run_token"], "env_url": cfg.env_url, "agent": agent, "model": model,
              "split": run.get("split"), "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the token is a credential
    with os.fdopen(fd, "w") as fh:
        json.dump(record, fh, indent=2)
    return path


def load_run_state(cfg: Config, run_id: str) -> dict[str, Any] | None:
    path = cfg.state_dir / f"{run_id}.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


# ---------------------------------------------------------------------------------- reporting

def per_task_summary(outcomes: list[Outcome]) -> str:
    by_task: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_task[o.task_id].append(o)
    lines = [f"{'task':<22} {'n':>4} {'mean':>6} {'success':>8} {'failed':>7}"]
    for task_id in sorted(by_task):
        os_ = by_task[task_id]
        lines.append(f"{task_id:<22} {len(os_):>4} {sum(o.score for o in os_) / len(os_):>6.3f} "
                     f"{sum(o.success for o in os_):>8} {sum(not o.finished for o in os_):>7}")
    if outcomes:
        lines.append(f"{'all':<22} {len(outcomes):>4} {sum(o.score for o in outcomes) / len(outcomes):>6.3f} "
                     f"{sum(o.success for o in outcomes):>8} {sum(not o.finished for o in outcomes):>7}")
    return "\n".join(lines)


def run_report(run: dict[str, Any], env_url: str) -> str:
    lines = [f"run {run.get('run_id')}: status {run.get('status')} ({run.get('agent')} / {run.get('model')}, split {run.get('split')}, trials {run.get('trials')})"]
    summary = run.get("summary")
    if summary:
        lo, hi = (summary.get("ci95") or [None, None])[:2]
        lines.append(f"  mean {summary.get('mean'):.3f}  95% CI [{lo:.3f}, {hi:.3f}]  pass^k {compact_json(summary.get('pass_hat_k'))}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ local service

def service_answers(url: str) -> bool:
    """True when ``url`` is an OpenEnv service: ``GET /health`` says healthy."""
    try:
        return httpx.get(url.rstrip("/") + "/health", timeout=3.0).json().get("status") == "healthy"
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_service(extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """This repository's service on 127.0.0.1 with a temporary SQLite database, stopped (by its PID)
    on exit; its log goes to a file, never to stdout. ``extra_env`` adds settings (e.g. SUBMITTER_KEYS)."""
    with tempfile.TemporaryDirectory(prefix="ecomm-local-") as tmp:
        port = _free_port()
        env = dict(os.environ, DATABASE_URL=f"sqlite+aiosqlite:///{tmp}/local.db", HOST="127.0.0.1", PORT=str(port),
                   LOG_LEVEL="WARNING", WORKERS="1", **(extra_env or {}))
        log_path = Path(tmp) / "service.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen([sys.executable, "-m", "service.app"], cwd=ROOT, env=env, stdout=log_file,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            url = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + 60
                while not service_answers(url):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log_file.flush()
                        raise RuntimeError("the local service did not start:\n" + log_path.read_text()[-2000:])
                    time.sleep(0.2)
                yield url
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(timeout=5)


# --------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Evaluate an agent on ecomm-support-env. stdout: [START]/[STEP]/[END] lines only; everything else on stderr.",
    )
    p.add_argument("--agent", choices=AGENTS, default=None, help="llm (default), heuristic or random")
    p.add_argument("--split", choices=("dev", "test", "train"), default="dev", help="ticket split (default dev)")
    p.add_argument("--tasks", default=None, help="comma-separated task ids (default: every task from GET /tasks)")
    p.add_argument("--trials", type=int, default=1, help="trials per ticket, 1..8 (default 1)")
    p.add_argument("--limit-per-task", type=int, default=None,
                   help="play only the first N tickets of each task (a quick, unranked run; direct mode default 10). "
                        "Default: every ticket of the split, which the leaderboard ranks")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                   help=f"episodes played at once (default {DEFAULT_CONCURRENCY}; see docs/inference-notes.md for the arithmetic)")
    p.add_argument("--max-episodes", type=int, default=None, help="stop starting episodes after this many in this invocation")
    p.add_argument("--time-budget", type=float, default=DEFAULT_TIME_BUDGET_S,
                   help=f"seconds; afterwards no episode starts and unfinished ones stop at their next turn, "
                        f"leaving the run resumable (default {DEFAULT_TIME_BUDGET_S:.0f}; 0 = none)")
    p.add_argument("--resume", metavar="RUN_ID", default=None, help="finish an interrupted run (token from the state file or RUN_TOKEN)")
    p.add_argument("--direct", action="store_true", help="plain /reset + /step episodes, no server-side run (not ranked)")
    p.add_argument("--log-level", default=os.environ.get("INFERENCE_LOG_LEVEL", "INFO"), help="stderr log level (default INFO)")
    return p


@dataclass
class Evaluation:
    outcomes: list[Outcome]
    run_id: str | None
    run: dict[str, Any] | None
    start_errors: int = 0
    run_token: str | None = None


async def evaluate(
    args: argparse.Namespace, cfg: Config, sink: Callable[[str], None] = emit,
    direct_entries: list[tuple[str, int, int]] | None = None,
) -> Evaluation:
    """The whole evaluation: create or resume a run (or plan direct episodes), play, report.

    ``direct_entries`` ((task_id, seed, trial) triples) replaces the direct mode's default plan."""
    agent_name: str = args.agent or "llm"
    model = cfg.model_name if agent_name == "llm" else agent_name
    probe = EnvClient(cfg.env_url)
    try:
        catalogue = await probe.tasks()
    finally:
        await probe.aclose()
    tasks = {t["id"]: t for t in catalogue["tasks"]}
    action_schema = catalogue.get("action_schema") or next(iter(tasks.values()))["action_schema"]
    task_ids = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else list(tasks)
    unknown = [t for t in task_ids if t not in tasks]
    if unknown:
        raise SystemExit(f"error: unknown task id(s) {', '.join(unknown)}; choose from {', '.join(tasks)}")

    run_id, run_token, run = None, None, None
    source: EpisodeSource
    total: int | None
    if args.direct:
        limit = args.limit_per_task or DEFAULT_DIRECT_LIMIT
        entries = direct_entries if direct_entries is not None else [
            (t, seed, trial) for trial in range(args.trials) for seed in range(limit) for t in task_ids]
        source, total = DirectSource(entries, args.split), len(entries)
    elif args.resume:
        run_id = args.resume
        state = load_run_state(cfg, run_id) or {}
        run_token = cfg.run_token or state.get("run_token")
        if not run_token:
            raise SystemExit(f"error: no run token for {run_id}: no {cfg.state_dir / (run_id + '.json')} and RUN_TOKEN is not set")
        if state.get("agent") and args.agent is None:
            agent_name = state["agent"]
            model = cfg.model_name if agent_name == "llm" else agent_name
        run = await _get_run(cfg, run_id, run_token)
        if state.get("model") and state["model"] != model:
            log.warning("run %s was created with model %s; continuing it with %s", run_id, state["model"], model)
        episodes = run.get("episodes") or []
        active = [(e["episode_id"], int(e.get("trial") or 0)) for e in episodes if e.get("status") == "active" and e.get("episode_id")]
        pending = sum(1 for e in episodes if e.get("status") == "pending")
        finished = sum(1 for e in episodes if e.get("status") == "done")
        log.info("resuming run %s: %d finished (left untouched), %d in progress, %d not started", run_id, finished, len(active), pending)
        source, total = RunSource(run_id, active), len(active) + pending
    else:
        # scripted agents have no model: the leaderboard shows their agent name only
        body: dict[str, Any] = {"agent": agent_name, "model": model if agent_name == "llm" else "", "split": args.split, "trials": args.trials}
        if args.tasks:
            body["task_ids"] = task_ids
        if args.limit_per_task:
            body["limit_per_task"] = args.limit_per_task
        creator = EnvClient(cfg.env_url)
        try:
            run = await creator.create_run(submitter_key=cfg.submitter_key if args.split == "test" else None, **body)
        finally:
            await creator.aclose()
        run_id, run_token = run["run_id"], run["run_token"]
        path = save_run_state(cfg, run, agent_name, model)
        total = int(run.get("episodes_total") or len(run.get("manifest") or []))
        log.info("run %s created: %d episodes (%s); token saved in %s; resume with: python inference.py --resume %s",
                 run_id, total, "ranked" if run.get("ranked") else "not ranked: a task subset or a per-task limit",
                 path, run_id)
        source = RunSource(run_id)
    if args.max_episodes is not None and total is not None:
        total = min(total, args.max_episodes)

    # The server stores the reported usage as a whole: a resumed run adds to what was reported before.
    before = (run or {}).get("usage") or {}
    usage = TokenUsage()
    systems = {t: system_prompt(tasks[t], action_schema) for t in tasks}

    async def make_agent() -> tuple[AgentFactory, Callable[[], Awaitable[None]]]:
        if agent_name == "llm":
            llm = LLMClient(cfg, usage)
            return (lambda s: LLMEpisodeAgent(llm, systems[s.task_id])), llm.aclose
        async def nothing() -> None:
            return None
        return (lambda s: reference_agent(agent_name, s.split or args.split, s.seed, s.trial)), nothing

    progress = Progress(total, enabled=sink is emit)  # embedded callers (baseline.py) keep stderr quiet
    outcomes, start_errors = await run_workers(
        lambda: EnvClient(cfg.env_url, run_token),
        source,
        make_agent,
        concurrency=max(1, args.concurrency),
        max_episodes=args.max_episodes,
        benchmark=cfg.benchmark,
        model=model,
        deadline=Deadline(args.time_budget),
        progress=progress,
        sink=sink,
    )
    log.info("per-task summary (this invocation):\n%s", per_task_summary(outcomes))
    if run_id and run_token:
        env = EnvClient(cfg.env_url, run_token)
        try:
            if usage.prompt_tokens or usage.completion_tokens:
                try:
                    await env.report_usage(run_id, usage.prompt_tokens + int(before.get("prompt_tokens") or 0),
                                           usage.completion_tokens + int(before.get("completion_tokens") or 0))
                except ServiceError as exc:
                    log.warning("could not report token usage: %s", exc)
            run = await env.get_run(run_id)
        finally:
            await env.aclose()
        log.info("%s", run_report(run, cfg.env_url))
        if run.get("status") != "complete":
            log.info("the run is not complete; finish it with: python inference.py --resume %s", run_id)
        log.info("run page: %s%s  leaderboard: %s%s", cfg.env_url, run.get("run_url") or f"/runs/{run_id}",
                 cfg.env_url, run.get("leaderboard_url") or f"/leaderboard?split={run.get('split') or args.split}")
    return Evaluation(outcomes, run_id, run, start_errors, run_token)


async def _get_run(cfg: Config, run_id: str, token: str) -> dict[str, Any]:
    env = EnvClient(cfg.env_url, token)
    try:
        return await env.get_run(run_id)
    finally:
        await env.aclose()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Our own messages at the chosen level; libraries (httpx logs every request at INFO) only warn.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    log.setLevel(args.log_level.upper())
    cfg = Config.from_env()
    if args.direct and args.resume:
        print("error: --direct and --resume exclude each other (direct episodes are not a run)", file=sys.stderr)
        return EXIT_USAGE
    if not 1 <= args.trials <= 8:
        print("error: --trials must be between 1 and 8", file=sys.stderr)
        return EXIT_USAGE
    if args.resume and args.agent is None:
        # continue a run with the agent that created it (a local file read; nothing else happens yet)
        args.agent = (load_run_state(cfg, args.resume) or {}).get("agent")
    if (args.agent or "llm") == "llm" and not cfg.api_key:
        print("error: the llm agent needs an API key: set HF_TOKEN (or API_KEY) — or choose --agent heuristic|random",
              file=sys.stderr)
        return EXIT_USAGE
    if service_answers(cfg.env_url):
        return _run(args, cfg)
    if cfg.env_url_given or args.resume:
        what = f"ENV_URL={cfg.env_url}" if cfg.env_url_given else f"{cfg.env_url} (the default; ENV_URL is unset)"
        print(f"error: no OpenEnv service answers GET /health at {what}. Start it (make run), point ENV_URL at it"
              + ("" if args.resume else ", or unset ENV_URL to start a local service on a temporary database")
              + (f"; run {args.resume} can only be resumed on the service that holds it" if args.resume else ""),
              file=sys.stderr)
        return EXIT_USAGE
    log.warning("no service answers at %s and ENV_URL is unset: starting a local service on a temporary SQLite "
                "database (its runs and leaderboard are gone when this exits; set ENV_URL to use a real one)", cfg.env_url)
    try:
        with local_service() as url:
            log.info("local service on %s", url)
            return _run(args, replace(cfg, env_url=url))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURES


def _run(args: argparse.Namespace, cfg: Config) -> int:
    try:
        evaluation = asyncio.run(evaluate(args, cfg))
    except FatalAgentError as exc:
        log.error("%s", exc)
        return EXIT_FAILURES
    except ServiceError as exc:
        log.error("the service at %s answered: %s", cfg.env_url, exc)
        return EXIT_FAILURES
    except httpx.HTTPError as exc:
        log.error("cannot reach the service at %s: %s", cfg.env_url, exc)
        return EXIT_FAILURES
    except KeyboardInterrupt:
        return 130
    failed = [o for o in evaluation.outcomes if not o.finished]
    return EXIT_FAILURES if failed or evaluation.start_errors else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
