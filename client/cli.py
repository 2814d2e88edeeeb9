"""``python inference.py``: parse the command line into a :class:`~client.evaluation.Plan`, find (or
start) the service, evaluate, and exit with what happened.

With ``ENV_URL`` unset and nothing answering the default URL, a local service is started on a
temporary SQLite database (as ``baseline.py`` does); an ``ENV_URL`` that does not answer is a
usage error (exit 2), never silently replaced. stdout carries the [START]/[STEP]/[END] blocks only;
progress, the per-task summary and the run's leaderboard link go to stderr. See
``docs/inference-notes.md`` for the variables, flags and the time-budget arithmetic.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from dataclasses import replace

import httpx

from client.agents import ACTION_FORMATS, AGENTS
from client.config import Config
from client.evaluation import DEFAULT_CONCURRENCY, DEFAULT_TIME_BUDGET_S, MAX_TRIALS, Plan, PlanError, evaluate
from client.llm import FatalAgentError
from client.local import local_service
from client.runstate import load_run_state
from client.wire import ServiceError, service_answers

log = logging.getLogger("inference")

EXIT_OK, EXIT_FAILURES, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=(
            "Evaluate an agent on ecomm-support-env. "
            "stdout: [START]/[STEP]/[END] lines only; everything else on stderr."
        ),
    )
    p.add_argument("--agent", choices=AGENTS, default=None, help="llm (default), heuristic or random")
    # the service validates the split (GET /tasks lists them): one source for the list
    p.add_argument(
        "--split",
        default="dev",
        help="ticket split: dev (default: the practice board — dev labels are public, so its board is not the "
        "benchmark), train (practice too) or test (the benchmark's board; needs SUBMITTER_KEY)",
    )
    p.add_argument("--tasks", default=None, help="comma-separated task ids (default: every task from GET /tasks)")
    p.add_argument("--trials", type=int, default=1, help=f"trials per ticket, 1..{MAX_TRIALS} (default 1)")
    p.add_argument(
        "--limit-per-task",
        type=int,
        default=None,
        help="play only the first N tickets of each task (a quick, unranked run; direct mode default 10). "
        "Default: every ticket of the split, which the leaderboard ranks",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"episodes played at once (default {DEFAULT_CONCURRENCY}; see docs/inference-notes.md for the arithmetic)",
    )
    p.add_argument(
        "--max-episodes", type=int, default=None, help="stop starting episodes after this many in this invocation"
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=DEFAULT_TIME_BUDGET_S,
        help=f"seconds; afterwards no episode starts and unfinished ones stop at their next turn, "
        f"leaving the run resumable (default {DEFAULT_TIME_BUDGET_S:.0f}; 0 = none)",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_ID",
        default=None,
        help="finish an interrupted run (token from the state file or RUN_TOKEN)",
    )
    p.add_argument(
        "--direct", action="store_true", help="plain /reset + /step episodes, no server-side run (not ranked)"
    )
    p.add_argument(
        "--action-format",
        choices=ACTION_FORMATS,
        default=None,
        help="how the llm agent acts: tools (default: native tool calls, tools=[...] from GET /tasks) or json "
        "(one JSON action in its text, for models without tool calling); also ACTION_FORMAT",
    )
    p.add_argument(
        "--log-level", default=os.environ.get("INFERENCE_LOG_LEVEL", "INFO"), help="stderr log level (default INFO)"
    )
    return p


def plan_from(args: argparse.Namespace, cfg: Config | None = None) -> Plan:
    return Plan(
        action_format=args.action_format or (cfg.action_format if cfg is not None else "tools"),
        agent=args.agent,
        split=args.split,
        tasks=[t for t in args.tasks.split(",") if t.strip()] if args.tasks else None,
        trials=args.trials,
        limit_per_task=args.limit_per_task,
        concurrency=args.concurrency,
        max_episodes=args.max_episodes,
        time_budget_s=args.time_budget,
        resume=args.resume,
        direct=args.direct,
    )


def board_label(split: str) -> str:
    """Which leaderboard a run on ``split`` plays for (stderr, before anything is played)."""
    if split == "test":
        return "playing the test split: the benchmark's board (/leaderboard?split=test)"
    return (
        f"playing the {split} split: the practice board (/leaderboard?split={split}) — its labels are public, so it "
        "is not the benchmark; the benchmark is the test split (--split test, with SUBMITTER_KEY)"
    )


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Our own messages at the chosen level; libraries (httpx logs every request at INFO) only warn.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    log.setLevel(args.log_level.upper())
    cfg = Config.from_env()
    plan = plan_from(args, cfg)
    log.warning("%s", board_label(plan.split))
    try:
        plan.check()
    except PlanError as exc:
        return _usage(str(exc))
    if plan.resume and plan.agent is None:
        # continue a run with the agent that created it (a local file read; nothing else happens yet)
        plan = replace(plan, agent=(load_run_state(cfg.state_dir, plan.resume) or {}).get("agent"))
    if (plan.agent or "llm") == "llm" and not cfg.api_key:
        return _usage("the llm agent needs an API key: set HF_TOKEN (or API_KEY) — or choose --agent heuristic|random")
    if service_answers(cfg.env_url):
        return run(plan, cfg)
    if cfg.env_url_given or plan.resume:
        what = f"ENV_URL={cfg.env_url}" if cfg.env_url_given else f"{cfg.env_url} (the default; ENV_URL is unset)"
        return _usage(
            f"no OpenEnv service answers GET /health at {what}. Start it (make run), point ENV_URL at it"
            + ("" if plan.resume else ", or unset ENV_URL to start a local service on a temporary database")
            + (f"; run {plan.resume} can only be resumed on the service that holds it" if plan.resume else "")
        )
    log.warning(
        "no service answers at %s and ENV_URL is unset: starting a local service on a temporary SQLite "
        "database (its runs and leaderboard are gone when this exits; set ENV_URL to use a real one)",
        cfg.env_url,
    )
    try:
        with local_service() as url:
            log.info("local service on %s", url)
            return run(plan, replace(cfg, env_url=url))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURES


def run(plan: Plan, cfg: Config) -> int:
    """Evaluate and map what happened to the exit code."""
    try:
        evaluation = asyncio.run(evaluate(plan, cfg))
    except PlanError as exc:
        return _usage(str(exc))
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
