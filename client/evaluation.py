"""``evaluate(plan)``: the whole evaluation as one typed call — create or resume a run (or plan
direct episodes), play it with the chosen agent, report.

By default the evaluation is a server-side *run* (``POST /runs``): the server picks the episodes,
grades them itself and ranks the finished run on its leaderboard. ``Plan(direct=True)`` plays plain
``/reset`` + ``/step`` episodes instead (no run, nothing ranked).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from client.agents import (
    ACTION_FORMATS,
    AGENTS,
    EpisodeAgent,
    LLMEpisodeAgent,
    ToolCallingEpisodeAgent,
    reference_agent,
)
from client.config import Config
from client.llm import LLMClient, LLMHealth, TokenUsage
from client.logformat import compact_json, emit
from client.prompt import function_tools, system_prompt, tool_instructions
from client.runner import (
    AgentFactory,
    Deadline,
    DirectSource,
    EpisodeSource,
    Outcome,
    Progress,
    RunSource,
    Sink,
    Started,
    Workers,
    settle,
)
from client.runstate import load_run_state, save_run_state
from client.wire import EnvClient, Pacing, ServiceError

log = logging.getLogger("inference")

# 400 dev tickets x ~3.5 LLM turns x ~3 s per call / 16 in flight = ~4.5 minutes (docs/inference-notes.md).
DEFAULT_CONCURRENCY = 16
DEFAULT_DIRECT_LIMIT = 10
DEFAULT_TIME_BUDGET_S = 900.0
MAX_TRIALS = 8


class PlanError(ValueError):
    """The plan cannot be carried out as asked (unknown task, no token to resume with, ...)."""


@dataclass(frozen=True)
class Plan:
    """What to evaluate. ``agent=None`` means the LLM agent, or the agent that created a resumed run."""

    agent: str | None = None
    split: str = "dev"
    tasks: Sequence[str] | None = None  # None: every task of GET /tasks (a subset makes an unranked run)
    trials: int = 1
    limit_per_task: int | None = None  # first N tickets per task (unranked); direct mode default 10
    concurrency: int = DEFAULT_CONCURRENCY
    max_episodes: int | None = None
    time_budget_s: float | None = DEFAULT_TIME_BUDGET_S  # None or 0: no budget
    resume: str | None = None  # a run id
    direct: bool = False
    direct_entries: Sequence[tuple[str, int, int]] | None = None  # (task_id, seed, trial): replaces direct's plan
    action_format: str = "tools"  # the llm agent: native tool calls, or "json" (a JSON action in its text)

    def check(self) -> None:
        if self.direct and self.resume:
            raise PlanError("--direct and --resume exclude each other (direct episodes are not a run)")
        if not 1 <= self.trials <= MAX_TRIALS:
            raise PlanError(f"--trials must be between 1 and {MAX_TRIALS}")
        if self.agent is not None and self.agent not in AGENTS:
            raise PlanError(f"unknown agent {self.agent!r}; choose one of {', '.join(AGENTS)}")
        if self.action_format not in ACTION_FORMATS:
            raise PlanError(f"unknown action format {self.action_format!r}; choose one of {', '.join(ACTION_FORMATS)}")


@dataclass
class Evaluation:
    outcomes: list[Outcome]
    run_id: str | None
    run: dict[str, Any] | None
    start_errors: int = 0
    run_token: str | None = None


@dataclass
class _Opened:
    """Where the episodes come from, and the run behind them (if any)."""

    source: EpisodeSource
    total: int | None
    agent: str
    model: str
    run_id: str | None = None
    run_token: str | None = None
    run: dict[str, Any] | None = None


def _model_of(agent: str, cfg: Config) -> str:
    return cfg.model_name if agent == "llm" else agent


async def _catalogue(cfg: Config) -> tuple[dict[str, dict[str, Any]], dict[str, Any], Pacing]:
    """The tasks, the action schema, and how fast this evaluation's clients may call (GET /limits)."""
    probe = EnvClient(cfg.env_url)
    try:
        catalogue = await probe.tasks()
        pacing = Pacing.from_limits(await probe.limits())
    finally:
        await probe.aclose()
    tasks = {t["id"]: t for t in catalogue["tasks"]}
    return tasks, catalogue.get("action_schema") or next(iter(tasks.values()))["action_schema"], pacing


def _direct(plan: Plan, cfg: Config, task_ids: list[str]) -> _Opened:
    agent = plan.agent or "llm"
    limit = plan.limit_per_task or DEFAULT_DIRECT_LIMIT
    entries = (
        list(plan.direct_entries)
        if plan.direct_entries is not None
        else [(t, seed, trial) for trial in range(plan.trials) for seed in range(limit) for t in task_ids]
    )
    return _Opened(DirectSource(entries, plan.split), len(entries), agent, _model_of(agent, cfg))


async def _resume(plan: Plan, cfg: Config) -> _Opened:
    run_id = str(plan.resume)
    state = load_run_state(cfg.state_dir, run_id) or {}
    run_token = cfg.run_token or state.get("run_token")
    if not run_token:
        raise PlanError(f"no run token for {run_id}: no {cfg.state_dir / (run_id + '.json')} and RUN_TOKEN is not set")
    agent = plan.agent or state.get("agent") or "llm"
    model = _model_of(agent, cfg)
    run = await _get_run(cfg, run_id, run_token)
    if state.get("model") and state["model"] != model:
        log.warning("run %s was created with model %s; continuing it with %s", run_id, state["model"], model)
    episodes = run.get("episodes") or []
    active = [
        (e["episode_id"], int(e.get("trial") or 0))
        for e in episodes
        if e.get("status") == "active" and e.get("episode_id")
    ]
    pending = sum(1 for e in episodes if e.get("status") == "pending")
    finished = sum(1 for e in episodes if e.get("status") == "done")
    log.info(
        "resuming run %s: %d finished (left untouched), %d in progress, %d not started",
        run_id,
        finished,
        len(active),
        pending,
    )
    return _Opened(RunSource(run_id, active), len(active) + pending, agent, model, run_id, run_token, run)


async def _create(plan: Plan, cfg: Config, task_ids: list[str]) -> _Opened:
    agent = plan.agent or "llm"
    model = _model_of(agent, cfg)
    # scripted agents have no model: the leaderboard shows their agent name only
    body: dict[str, Any] = {
        "agent": agent,
        "model": model if agent == "llm" else "",
        "split": plan.split,
        "trials": plan.trials,
    }
    if plan.tasks:
        body["task_ids"] = task_ids
    if plan.limit_per_task:
        body["limit_per_task"] = plan.limit_per_task
    creator = EnvClient(cfg.env_url)
    try:
        run = await creator.create_run(submitter_key=cfg.submitter_key if plan.split == "test" else None, **body)
    except ServiceError as exc:
        if exc.status in (400, 422):  # the plan itself (an unknown split, a subset test run...): the server says why
            raise PlanError(f"the service refused the run: {exc.detail}") from exc
        raise
    finally:
        await creator.aclose()
    path = save_run_state(cfg.state_dir, run, cfg.env_url, agent, model)
    total = int(run.get("episodes_total") or len(run.get("manifest") or []))
    log.info(
        "run %s created: %d episodes (%s); token saved in %s; resume with: python inference.py --resume %s",
        run["run_id"],
        total,
        "ranked" if run.get("ranked") else "not ranked: a task subset or a per-task limit",
        path,
        run["run_id"],
    )
    return _Opened(RunSource(run["run_id"]), total, agent, model, run["run_id"], run["run_token"], run)


def _llm_agent(llm: LLMClient, task: dict[str, Any], action_schema: dict[str, Any], action_format: str) -> EpisodeAgent:
    """The llm agent of one episode: tool calls when the task lists tools (every task of a current server),
    else — or with ``--action-format json`` — a JSON action in its text."""
    if action_format == "tools" and task.get("tools"):
        return ToolCallingEpisodeAgent(llm, tool_instructions(task), function_tools(task["tools"]))
    return LLMEpisodeAgent(llm, system_prompt(task, action_schema))


def _agents(
    agent: str,
    cfg: Config,
    usage: TokenUsage,
    tasks: dict[str, dict[str, Any]],
    action_schema: dict[str, Any],
    plan: Plan,
) -> Callable[[], Awaitable[tuple[AgentFactory, Callable[[], Awaitable[None]]]]]:
    """Per worker: a factory of per-episode agents and what closes the worker's agent resources."""

    health = LLMHealth()  # one count of failed calls in a row over every worker

    async def make() -> tuple[AgentFactory, Callable[[], Awaitable[None]]]:
        if agent == "llm":
            llm = LLMClient(cfg, usage, health)
            return (lambda s: _llm_agent(llm, tasks[s.task_id], action_schema, plan.action_format)), llm.aclose

        async def nothing() -> None:
            return None

        def scripted(s: Started) -> EpisodeAgent:
            family = str(tasks[s.task_id].get("family") or "")
            return reference_agent(agent, family, s.split or plan.split, s.seed, s.trial)

        return scripted, nothing

    return make


async def evaluate(plan: Plan, cfg: Config, sink: Sink = emit) -> Evaluation:
    """Play ``plan`` against the service at ``cfg.env_url``; each episode's log block goes to ``sink``."""
    plan.check()
    tasks, action_schema, pacing = await _catalogue(cfg)
    task_ids = [t.strip() for t in plan.tasks if t.strip()] if plan.tasks else list(tasks)
    unknown = [t for t in task_ids if t not in tasks]
    if unknown:
        raise PlanError(f"unknown task id(s) {', '.join(unknown)}; choose from {', '.join(tasks)}")
    if plan.direct:
        opened = _direct(plan, cfg, task_ids)
    elif plan.resume:
        opened = await _resume(plan, cfg)
    else:
        opened = await _create(plan, cfg, task_ids)
    total = (
        min(opened.total, plan.max_episodes)
        if plan.max_episodes is not None and opened.total is not None
        else opened.total
    )
    usage = TokenUsage()
    if opened.agent == "llm":
        log.info("the llm agent acts with %s", "tool calls" if plan.action_format == "tools" else "JSON in its text")
    workers = Workers(
        make_env=lambda: EnvClient(cfg.env_url, opened.run_token, pacing=pacing),
        make_agent=_agents(opened.agent, cfg, usage, tasks, action_schema, plan),
        concurrency=max(1, plan.concurrency),
        max_episodes=plan.max_episodes,
        benchmark=cfg.benchmark,
        model=opened.model,
        deadline=Deadline(plan.time_budget_s),
        progress=Progress(total, enabled=sink is emit),  # embedded callers (baseline.py) keep stderr quiet
        sink=sink,
        defer=opened.run_id is not None,
        families={t: str(task.get("family") or "") for t, task in tasks.items()},
    )
    run = opened.run
    try:
        outcomes, start_errors = await workers.play(opened.source)
        if opened.run_id and opened.run_token:
            run = await _close_run(cfg, opened, usage, plan.split)
    finally:
        _settle(workers.outcomes, run or {}, sink)  # held blocks are printed whatever happened
        workers.progress.settled(workers.outcomes)
    log.info("per-task summary (this invocation):\n%s", per_task_summary(outcomes))
    if workers.rate_limited:
        log.info("the service answered %d calls with 429 (each retried after its Retry-After)", workers.rate_limited)
    return Evaluation(outcomes, opened.run_id, run, start_errors, opened.run_token)


def _settle(outcomes: list[Outcome], run: dict[str, Any], sink: Sink) -> None:
    """Print the run's held blocks with the verdicts it published (every one once a dev run completes)."""
    verdicts = {
        e["episode_id"]: (float(e["score"]), bool(e["resolved"]))
        for e in run.get("episodes") or []
        if e.get("episode_id") and isinstance(e.get("score"), (int, float)) and isinstance(e.get("resolved"), bool)
    }
    withheld = settle(outcomes, verdicts, sink)
    if withheld:
        why = (
            "the test split publishes aggregates only"
            if run.get("split") == "test"
            else f"the run is {run.get('status')}: verdicts are published when it completes"
        )
        log.warning("%d episodes end success=false with their score unknown (score=0.001): %s", withheld, why)


async def _close_run(cfg: Config, opened: _Opened, usage: TokenUsage, split: str) -> dict[str, Any]:
    """Report token usage (the server stores it as a whole: a resumed run adds to what was reported
    before), fetch the run and log where to see it."""
    run_id = str(opened.run_id)
    before = (opened.run or {}).get("usage") or {}
    env = EnvClient(cfg.env_url, opened.run_token)
    try:
        if usage.prompt_tokens or usage.completion_tokens:
            try:
                await env.report_usage(
                    run_id,
                    usage.prompt_tokens + int(before.get("prompt_tokens") or 0),
                    usage.completion_tokens + int(before.get("completion_tokens") or 0),
                )
            except ServiceError as exc:
                log.warning("could not report token usage: %s", exc)
        run = await env.get_run(run_id)
    finally:
        await env.aclose()
    log.info("%s", run_report(run))
    if run.get("status") != "complete":
        log.info("the run is not complete; finish it with: python inference.py --resume %s", run_id)
    log.info(
        "run page: %s%s  leaderboard: %s%s",
        cfg.env_url,
        run.get("run_url") or f"/runs/{run_id}",
        cfg.env_url,
        run.get("leaderboard_url") or f"/leaderboard?split={run.get('split') or split}",
    )
    return run


async def _get_run(cfg: Config, run_id: str, token: str) -> dict[str, Any]:
    env = EnvClient(cfg.env_url, token)
    try:
        return await env.get_run(run_id)
    finally:
        await env.aclose()


def per_task_summary(outcomes: list[Outcome]) -> str:
    by_task: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_task[o.task_id].append(o)
    rows = [(task_id, by_task[task_id]) for task_id in sorted(by_task)] + ([("all", outcomes)] if outcomes else [])
    lines = [f"{'task':<22} {'n':>4} {'mean':>6} {'success':>8} {'failed':>7}"]
    for label, group in rows:
        lines.append(
            f"{label:<22} {len(group):>4} {sum(o.score for o in group) / len(group):>6.3f} "
            f"{sum(o.success for o in group):>8} {sum(not o.finished for o in group):>7}"
        )
    return "\n".join(lines)


def run_report(run: dict[str, Any]) -> str:
    lines = [
        f"run {run.get('run_id')}: status {run.get('status')} ({run.get('agent')} / {run.get('model')}, "
        f"split {run.get('split')}, trials {run.get('trials')})"
    ]
    summary = run.get("summary")
    if summary and summary.get("mean") is not None:
        lo, hi = (summary.get("ci95") or [None, None])[:2]
        lines.append(
            f"  mean {summary.get('mean'):.3f}  95% CI [{lo:.3f}, {hi:.3f}]  "
            f"pass^k {compact_json(summary.get('pass_hat_k'))}"
        )
    elif summary:  # a test release: one number and its interval (the server publishes nothing else)
        lo, hi = (summary.get("resolved_ci95") or [None, None])[:2]
        lines.append(f"  released resolved {summary.get('resolved'):.2f}  95% CI [{lo:.2f}, {hi:.2f}]")
    return "\n".join(lines)
