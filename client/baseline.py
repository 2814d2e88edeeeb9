"""Reference scores: the random and heuristic agents (and the LLM agent when ``HF_TOKEN``/``API_KEY``
is set), k trials per ticket, on the dev split (and the test split with ``--splits dev,test``).

Every evaluation is a server-side run played by :func:`client.evaluation.evaluate`, so the server
assigns the (fixed) tickets and grades them. Runs are ranked on the **resolved rate** (every
required check of the task passed); the mean partial score is reported beside it. The overall
numbers, CIs and pass^k come from ``GET /runs/{id}``'s summary; on dev, the per-family and per-task
rows (with CIs) are computed from the run's per-episode results with the server's own
``service.stats`` functions. The test split publishes one released number (its resolved rate plus
the run's keyed noise, two decimals) and its interval, nothing per episode: its row comes from that,
under the deployment's test-key fingerprint.

With ``ENV_URL`` unset or unreachable a local service is started on a temporary SQLite file (with
its own random test key and a submitter key for itself); against ``ENV_URL``, test runs need
``SUBMITTER_KEY``. Deterministic on dev: the scripted agents are seeded from the manifest (ticket
seed, trial) and the bootstrap CI uses a fixed seed, so two runs print identical tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from client.agents import AGENTS
from client.config import Config
from client.evaluation import Plan, evaluate
from client.local import local_service
from client.wire import EnvClient, service_answers
from service import stats
from service.env import TASKS, run_manifest

log = logging.getLogger("baseline")


@contextmanager
def service_url(env_url: str | None) -> Iterator[tuple[str, str | None]]:
    """(url, submitter key): ``env_url`` (with ``SUBMITTER_KEY``) when it answers /health; otherwise a
    service started here on a temporary SQLite database with a submitter key of its own for its
    test split, stopped on exit."""
    if env_url and service_answers(env_url):
        yield env_url.rstrip("/"), os.environ.get("SUBMITTER_KEY") or None
        return
    if env_url:
        log.warning("ENV_URL %s does not answer /health; starting a local service instead", env_url)
    key = "sk_baseline_" + secrets.token_urlsafe(24)
    with local_service({"SUBMITTER_KEYS": f"baseline:{key}", "TEST_RUN_QUOTA": "1000"}) as url:
        log.info("local service on %s (temporary SQLite)", url)
        yield url, key


def _row(scope: str, values: list[list[stats.Trial]], trials: int) -> dict[str, Any]:
    resolved = [[float(t.resolved) for t in v] for v in values]
    scores = [[t.score for t in v] for v in values]
    return {
        "scope": scope,
        "tickets": len(values),
        "resolved": stats.rounded(stats.mean_of_items(resolved), 4),  # the service's one rounding rule
        "resolved_ci95": [stats.rounded(x, 4) for x in stats.bootstrap_ci(resolved)],
        "mean": stats.rounded(stats.mean_of_items(scores), 4),
        "ci95": [stats.rounded(x, 4) for x in stats.bootstrap_ci(scores)],
        "pass_hat_k": {
            str(k): stats.rounded(stats.pass_hat_k([[t.resolved for t in v] for v in values], k), 4)
            for k in range(1, trials + 1)
        },
    }


def group_rows(episodes: Sequence[dict[str, Any]], trials: int) -> list[dict[str, Any]]:
    """Resolved rate and mean score with 95% CIs, and pass^1..k, for the whole run, each family and
    each task, from the run's per-episode results (an ungraded episode counts as unresolved, 0)."""
    items: dict[tuple[str, int], list[stats.Trial]] = {}
    for e in sorted(episodes, key=lambda e: e["index"]):
        items.setdefault((e["task_id"], e["seed"]), []).append(
            stats.Trial(float(e["score"] or 0.0), bool(e.get("resolved")))
        )
    scopes: list[tuple[str, list[list[stats.Trial]]]] = [("all", list(items.values()))]
    for family in sorted({t.family for t in TASKS.values()}):
        scopes.append((f"family {family}", [v for (task, _), v in items.items() if TASKS[task].family == family]))
    for task in TASKS:
        scopes.append((f"task {task}", [v for (t, _), v in items.items() if t == task]))
    return [_row(scope, values, trials) for scope, values in scopes if values]


def summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows from a published (test) summary: CIs for the whole run only."""
    rows = [
        {
            "scope": "all",
            "tickets": summary["items"],
            "resolved": summary["resolved"],
            "resolved_ci95": summary["resolved_ci95"],
            "mean": summary.get("mean"),  # a test release publishes its resolved rate only
            "ci95": summary.get("ci95"),
            "pass_hat_k": summary.get("pass_hat_k"),
        }
    ]
    for group, prefix in (("per_family", "family"), ("per_task", "task")):
        for label, agg in summary.get(group, {}).items():
            rows.append(
                {
                    "scope": f"{prefix} {label}",
                    "tickets": agg["n"],
                    "resolved": agg["resolved"],
                    "resolved_ci95": None,
                    "mean": agg["mean"],
                    "ci95": None,
                    "pass_hat_k": None,
                }
            )
    return rows


def _quiet_sink(line: str) -> None:
    """The per-step log lines of the baseline's episodes are not part of its output."""


def has_runs_api(url: str) -> bool:
    return "/runs" in httpx.get(url + "/openapi.json", timeout=10).json().get("paths", {})


@dataclass(frozen=True)
class BaselineJob:
    """One agent on one split."""

    url: str
    agent: str
    split: str
    trials: int
    limit: int | None
    concurrency: int
    state_dir: Path
    direct: bool = False
    submitter_key: str | None = None


def _direct_result(job: BaselineJob, model: str, outcomes: list[Any]) -> dict[str, Any]:
    ordered = sorted(outcomes, key=lambda o: (o.task_id, o.seed, o.trial))
    episodes = [
        {"index": i, "task_id": o.task_id, "seed": o.seed, "score": o.score, "resolved": o.success}
        for i, o in enumerate(ordered)
    ]
    return {
        "agent": job.agent,
        "model": model,
        "split": job.split,
        "trials": job.trials,
        "ranked": False,
        "episodes": len(episodes),
        "rows": group_rows(episodes, job.trials),
        "mode": "direct",
    }


async def _run_result(job: BaselineJob, run_id: str | None, run_token: str | None) -> dict[str, Any]:
    env = EnvClient(job.url, run_token)
    try:
        run = await env.get_run(run_id) if run_id else None
    finally:
        await env.aclose()
    if not run or run.get("status") != "complete" or not run.get("summary"):
        raise RuntimeError(
            f"{job.agent} on {job.split}: run {run_id} did not complete or released nothing: "
            f"{run and run.get('status')}"
        )
    summary = run["summary"]
    if run.get("per_episode_results"):
        rows = group_rows(run["episodes"], job.trials)
        if abs(rows[0]["resolved"] - summary["resolved"]) > 1e-3:  # the client-side rows must agree with the server
            raise RuntimeError(
                f"{job.agent} on {job.split}: client resolved {rows[0]['resolved']} != server {summary['resolved']}"
            )
        rows[0].update({k: summary[k] for k in ("resolved", "resolved_ci95", "mean", "ci95", "pass_hat_k")})
    else:
        rows = summary_rows(summary)
    return {
        "agent": job.agent,
        "model": run.get("model"),
        "split": job.split,
        "trials": job.trials,
        "ranked": bool(run.get("ranked")),
        "episodes": len(run["episodes"]) if run.get("episodes_listed", True) else run.get("episodes_done"),
        "rows": rows,
        "mode": "run",
        "test_key_fingerprint": run.get("test_key_fingerprint"),
    }


async def evaluate_one(job: BaselineJob) -> dict[str, Any]:
    """Play ``job`` to completion and return its result rows."""
    cfg = replace(Config.from_env(), env_url=job.url, state_dir=job.state_dir, submitter_key=job.submitter_key)
    # Direct mode plays exactly the manifest the server would fix for the same run.
    entries = (
        [(e.task_id, e.seed, e.trial) for e in run_manifest(job.split, None, job.trials, job.limit)]
        if job.direct
        else None
    )
    plan = Plan(
        agent=job.agent,
        split=job.split,
        trials=job.trials,
        limit_per_task=job.limit,
        concurrency=job.concurrency,
        time_budget_s=None,
        direct=job.direct,
        direct_entries=entries,
    )
    result = await evaluate(plan, cfg, sink=_quiet_sink)
    unfinished = [o for o in result.outcomes if not o.finished]
    if unfinished or result.start_errors:
        raise RuntimeError(f"{job.agent} on {job.split}: {len(unfinished)} episodes did not finish; see the log above")
    if job.direct:
        return _direct_result(job, job.agent if job.agent != "llm" else cfg.model_name, result.outcomes)
    return await _run_result(job, result.run_id, result.run_token)


def markdown(results: list[dict[str, Any]], trials: int) -> str:
    ks = [str(k) for k in range(1, trials + 1)]
    head = (
        "| agent | split | scope | tickets | resolved | 95% CI | mean score | "
        + " | ".join(f"pass^{k}" for k in ks)
        + " |"
    )
    lines = [head, "|" + "---|" * (7 + len(ks))]

    def interval(ci: list[float] | None) -> str:
        return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—"

    for r in results:
        for row in r["rows"]:
            passes = " | ".join(f"{row['pass_hat_k'][k]:.3f}" if row["pass_hat_k"] else "—" for k in ks)
            lines.append(
                f"| {r['agent']} | {r['split']} | {row['scope']} | {row['tickets']} | {row['resolved']:.3f} | "
                f"{interval(row['resolved_ci95'])} | {'—' if row['mean'] is None else format(row['mean'], '.3f')} | "
                f"{passes} |"
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Reference scores of the random and heuristic agents (and the LLM agent with credentials)."
    )
    p.add_argument("--trials", type=int, default=2, help="k trials per ticket, 1..8 (default 2)")
    p.add_argument(
        "--splits",
        default="dev",
        help="comma-separated splits (default dev; test needs SUBMITTER_KEY "
        "against ENV_URL, and its results are aggregates under that deployment's test key)",
    )
    p.add_argument(
        "--agents",
        default=None,
        help="comma-separated agents (default random,heuristic, plus llm when HF_TOKEN/API_KEY is set)",
    )
    p.add_argument(
        "--limit-per-task", type=int, default=None, help="first N tickets per task only (default: the whole split)"
    )
    p.add_argument("--concurrency", type=int, default=8, help="episodes at once (default 8)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the Markdown table")
    p.add_argument(
        "--direct",
        action="store_true",
        help="plain episodes graded via /grader, statistics computed here (automatic when the service has no runs API)",
    )
    return p


def _results(args: argparse.Namespace, agents: list[str]) -> list[dict[str, Any]]:
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    results = []
    with (
        service_url(os.environ.get("ENV_URL")) as (url, submitter_key),
        tempfile.TemporaryDirectory(prefix="baseline-runs-") as state_dir,
    ):
        direct = args.direct or not has_runs_api(url)
        if direct and not args.direct:
            log.warning("the service at %s has no runs API; playing direct episodes and computing statistics here", url)
        for split in splits:
            if split == "test" and not submitter_key:
                log.warning("skipping the test split: runs on it need a submitter key (set SUBMITTER_KEY)")
                continue
            for agent in agents:
                t0 = time.monotonic()
                job = BaselineJob(
                    url,
                    agent,
                    split,
                    args.trials,
                    args.limit_per_task,
                    args.concurrency,
                    Path(state_dir),
                    direct,
                    submitter_key,
                )
                results.append(asyncio.run(evaluate_one(job)))
                log.info("%s on %s: %d episodes in %.1fs", agent, split, results[-1]["episodes"], time.monotonic() - t0)
    return results


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    logging.getLogger("inference").setLevel(logging.WARNING)
    cfg = Config.from_env()
    agents = (
        [a.strip() for a in args.agents.split(",")]
        if args.agents
        else ["random", "heuristic"] + (["llm"] if cfg.api_key else [])
    )
    bad = [a for a in agents if a not in AGENTS]
    if bad:
        print(f"error: unknown agent(s) {', '.join(bad)}; choose from {', '.join(AGENTS)}", file=sys.stderr)
        return 2
    if "llm" in agents and not cfg.api_key:
        print("error: the llm agent needs HF_TOKEN (or API_KEY)", file=sys.stderr)
        return 2
    results = _results(args, agents)
    if args.json:
        print(
            json.dumps(
                {"trials": args.trials, "limit_per_task": args.limit_per_task, "results": results},
                indent=2,
                sort_keys=True,
            )
        )
        return 0
    scope = f"first {args.limit_per_task} tickets per task" if args.limit_per_task else "every ticket of the split"
    keys = sorted({r["test_key_fingerprint"] for r in results if r.get("test_key_fingerprint")})
    print(
        f"Baseline: {args.trials} trial(s) per ticket, {scope}; resolved = every required check of the task passed "
        f"(mean over tickets of each ticket's resolved share, 95% bootstrap CI over tickets, pass^k on resolved); "
        f"mean score = the partial credit."
        + (f" Test split under key fingerprint {', '.join(keys)}." if keys else "")
        + "\n"
    )
    print(markdown(results, args.trials))
    return 0
