"""Runs: server-assigned episodes, server-side scoring, a leaderboard with honest statistics.

A run is an agent/model evaluated on a split's task list with k trials. The server fixes the
manifest (every ticket of every chosen task, k times), hands entries out one at a time
(``POST /runs/{id}/next``), grades every episode itself from stored transitions, and ranks
finished runs. The run token (shown once, stored hashed) guards every episode of the run.
On the test split, rewards and scores stay hidden until the run completes, and gold labels,
clause ids and grader rationales are never served.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from service import env as core
from service.api.episodes import EpisodeResult, wire_observation
from service.api.problems import InvalidInput, ResultsHidden, RunNotActive, RunNotFound, RunTokenInvalid, RunTokenMissing
from service.db import repository as repo
from service.db import run_store
from service.db.engine import Database
from service.db.models import utcnow
from service.stats import RESOLVED_THRESHOLD, rank_bands, summarize_manifest

log = logging.getLogger("service.runs")

class CreateRun(BaseModel):
    """Body of ``POST /runs``."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=128, description="Agent name shown on the leaderboard.")
    model: str = Field(default="", max_length=200, description="Model name (empty for scripted agents).")
    split: str = Field(default="dev", pattern="^(train|dev|test)$")
    trials: int = Field(default=1, ge=1, le=core.MAX_TRIALS, description="k: episodes per ticket (pass^k).")
    task_ids: list[str] | None = Field(default=None, min_length=1, max_length=len(core.TASKS), description="A subset of tasks (not ranked).")
    limit_per_task: int | None = Field(default=None, ge=1, description="Play only the first N tickets of each task (not ranked).")


class Usage(BaseModel):
    """Self-reported token usage (shown as such; never verified)."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cost_usd: float | None = Field(default=None, ge=0)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def episode_id_for(run_id: str, index: int) -> str:
    return f"{run_id}-{index:05d}"


def index_of(episode_id: str) -> int:
    """The manifest index of a run episode (inverse of :func:`episode_id_for`)."""
    return int(episode_id.rsplit("-", 1)[1])


class RunService:
    def __init__(self, db: Database, ttl_s: float) -> None:
        self.db = db
        self.ttl = timedelta(seconds=ttl_s)

    # ------------------------------------------------------------------------------ access

    async def expire_idle(self) -> None:
        expired = await run_store.expire_idle(self.db, utcnow() - self.ttl)
        if expired:
            log.info("runs expired count=%d", expired)

    async def load(self, run_id: str) -> run_store.RunRecord:
        run = await run_store.get_run(self.db, run_id)
        if run is None:
            raise RunNotFound(f"no run with id {run_id!r}; POST /runs creates one and returns run_id and run_token", run_id=run_id)
        return run

    @staticmethod
    def authorize(run: run_store.RunRecord, token: str | None) -> None:
        if not token:
            raise RunTokenMissing(
                f"episodes of run {run.id!r} need its token: send `Authorization: Bearer <run_token>` (or `run_token` in the body)",
                run_id=run.id,
            )
        if not hmac.compare_digest(_hash(token), run.token_sha256):
            raise RunTokenInvalid(f"that is not the token of run {run.id!r}; use the run_token POST /runs returned", run_id=run.id)

    async def authorized(self, run_id: str, token: str | None, *, active: bool = False) -> run_store.RunRecord:
        if active:
            await self.expire_idle()
        run = await self.load(run_id)
        self.authorize(run, token)
        if active and run.status != "active":
            raise RunNotActive(
                f"run {run_id!r} is {run.status}; start a new run with POST /runs",
                run_id=run_id, run_status=run.status, code="run_exhausted" if run.status == "complete" else f"run_{run.status}",
            )
        return run

    # ---------------------------------------------------------------------------- lifecycle

    async def create(self, body: CreateRun) -> dict[str, Any]:
        try:
            manifest = core.run_manifest(body.split, body.task_ids, body.trials, body.limit_per_task)
        except ValueError as exc:
            raise InvalidInput(f"cannot build this run: {exc}", errors=[{"field": "body", "message": str(exc)}]) from exc
        run_id = "run_" + secrets.token_hex(8)
        token = secrets.token_urlsafe(32)
        full = body.task_ids is None or set(body.task_ids) == set(core.TASKS)
        run = await run_store.insert_run(
            self.db,
            id=run_id,
            token_sha256=_hash(token),
            agent=body.agent,
            model=body.model,
            split=body.split,
            trials=body.trials,
            task_ids=body.task_ids or list(core.TASKS),
            full_split=full and body.limit_per_task is None,
            manifest=[e.model_dump() for e in manifest],
            episodes_total=len(manifest),
            dataset_version=core.DATASET_VERSION,
            grader_version=core.GRADER_VERSION,
        )
        log.info("run created run_id=%s agent=%s split=%s episodes=%d", run_id, body.agent, body.split, len(manifest))
        return {**self.view(run), "run_token": token, "manifest": run.manifest}

    async def next_episode(self, run_id: str, token: str | None) -> EpisodeResult:
        run = await self.authorized(run_id, token, active=True)
        started: dict[str, Any] = {}

        def make_episode(index: int) -> dict[str, Any]:
            entry = run.manifest[index]
            state, observation = core.reset(entry["task_id"], entry["seed"], run.split)
            started.update(state=state, observation=observation, entry=entry)
            return dict(
                id=episode_id_for(run.id, index), task_id=entry["task_id"], split=run.split, seed=entry["seed"],
                ticket_id=state.ticket_id, run_id=run.id, status="active", step_count=0,
                state=state.model_dump(mode="json"), version=1,
            )

        index = await run_store.claim_next(self.db, run.id, make_episode)
        if index is None:
            raise RunNotActive(
                f"every episode of run {run_id!r} has been handed out; finish the started ones "
                f"(GET /runs/{run_id} lists them) — resume one with POST /reset {{\"episode_id\": …, \"resume\": true}}",
                run_id=run_id, code="run_exhausted",
            )
        episode_id = episode_id_for(run.id, index)
        entry = started["entry"]
        return EpisodeResult(
            episode_id,
            wire_observation(episode_id, started["observation"]),
            None,
            False,
            {"episode_id": episode_id, "task_id": entry["task_id"], "seed": entry["seed"], "split": run.split,
             "run_id": run.id, "index": index, "trial": entry["trial"], "step_count": 0},
        )

    async def finish_if_complete(self, run_id: str) -> str:
        """After a run episode finished: if that completed the run, compute and store its summary
        (off the event loop). Returns the run's status."""
        run = await self.load(run_id)
        if run.status != "complete" or run.summary is not None:
            return run.status
        episodes = await run_store.run_episodes(self.db, run.id, run.grader_version)
        summary = await anyio.to_thread.run_sync(lambda: summarize_run(run, episodes))
        await run_store.set_summary(self.db, run.id, summary)
        log.info("run complete run_id=%s mean=%s", run.id, summary["mean"])
        return run.status

    async def set_usage(self, run_id: str, token: str | None, usage: Usage) -> dict[str, Any]:
        run = await self.authorized(run_id, token)
        await run_store.set_usage(self.db, run.id, {**usage.model_dump(), "self_reported": True})
        return self.view(await self.load(run_id))

    # -------------------------------------------------------------------------------- reads

    @staticmethod
    def view(run: run_store.RunRecord) -> dict[str, Any]:
        return {
            "run_id": run.id,
            "status": run.status,
            "agent": run.agent,
            "model": run.model,
            "split": run.split,
            "trials": run.trials,
            "task_ids": run.task_ids,
            "ranked": run.full_split,
            "episodes_total": run.episodes_total,
            "episodes_started": run.next_index,
            "episodes_done": run.episodes_done,
            "dataset_version": run.dataset_version,
            "grader_version": run.grader_version,
            "usage": run.usage,
            "created_at": run.created_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "run_url": f"/runs/{run.id}",
            "leaderboard_url": f"/leaderboard?split={run.split}",
        }

    async def detail(self, run_id: str) -> dict[str, Any]:
        await self.expire_idle()
        run = await self.load(run_id)
        if run.status == "complete" and run.summary is None:
            await self.finish_if_complete(run.id)
            run = await self.load(run_id)
        hide = core.results_hidden(run.split, run.status == "complete")
        started = {e.episode_id: e for e in await run_store.run_episodes(self.db, run.id, run.grader_version)}
        rows = []
        for entry in run.manifest:
            ep = started.get(episode_id_for(run.id, entry["index"]))
            rows.append({
                **entry,
                "episode_id": ep.episode_id if ep else None,
                "status": "pending" if ep is None else ep.status,
                "step_count": ep.step_count if ep else 0,
                "score": None if ep is None or hide else ep.score,
            })
        return {**self.view(run), "episodes": rows, "summary": None if hide else run.summary,
                "results_hidden": hide}

    async def leaderboard(self, split: str) -> dict[str, Any]:
        await self.expire_idle()
        complete = await run_store.list_runs(self.db, split=split, status="complete")
        for run in complete:
            if run.summary is None:  # completed by a process that stopped before summarising
                await self.finish_if_complete(run.id)
        complete = await run_store.list_runs(self.db, split=split, status="complete")
        ranked = [r for r in complete if r.full_split and r.summary]
        ranks = rank_bands({r.id: (r.summary["mean"], *r.summary["ci95"]) for r in ranked})  # type: ignore[index]
        rows = sorted((self._row(r, ranks[r.id]) for r in ranked), key=lambda row: (-row["mean"], row["finished_at"]))
        unranked = [self._row(r, None) for r in complete if not r.full_split and r.summary]
        return {
            "split": split,
            "dataset_version": core.DATASET_VERSION,
            "grader_version": core.GRADER_VERSION,
            "resolved_threshold": RESOLVED_THRESHOLD,
            "method": "mean of per-ticket mean scores; 95% CI: percentile bootstrap over tickets (trials resampled together); "
                      "rank = 1 + number of runs whose CI lies entirely above this run's CI",
            "rows": rows,
            "unranked": unranked,
        }

    def _row(self, run: run_store.RunRecord, rank: int | None) -> dict[str, Any]:
        s = run.summary or {}
        return {
            "rank": rank,
            "run_id": run.id,
            "agent": run.agent,
            "model": run.model,
            "trials": run.trials,
            "mean": s.get("mean"),
            "ci95": s.get("ci95"),
            "pass_hat_k": s.get("pass_hat_k"),
            "per_family": s.get("per_family"),
            "per_difficulty": s.get("per_difficulty"),
            "episodes": s.get("episodes"),
            "errors": s.get("errors"),
            "dataset_version": run.dataset_version,
            "grader_version": run.grader_version,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "usage": run.usage,
            "run_url": f"/runs/{run.id}",
        }

    async def trajectories(self, run_id: str, token: str | None) -> AsyncIterator[str]:
        """One JSON line per finished episode: observations, actions, rewards, score."""
        run = await self.load(run_id)
        if run.status != "complete":
            self.authorize(run, token)
        if core.results_hidden(run.split, run.status == "complete"):
            raise ResultsHidden(f"run {run_id!r} is on the test split and not complete; export it once every episode is done", run_id=run_id)
        for ep in await run_store.run_episodes(self.db, run.id, run.grader_version):
            if ep.status != "done":
                continue
            entry = run.manifest[index_of(ep.episode_id)]
            _, first = core.reset(ep.task_id, ep.seed, run.split)
            steps = await repo.list_transitions(self.db, ep.episode_id)
            yield json.dumps({
                "episode_id": ep.episode_id,
                "run_id": run.id,
                "task_id": ep.task_id,
                "seed": ep.seed,
                "trial": entry["trial"],
                "split": run.split,
                "observations": [wire_observation(ep.episode_id, first)] + [t.observation for t in steps],
                "actions": [t.action for t in steps],
                "rewards": [t.reward for t in steps],
                "score": ep.score,
                "grader_version": run.grader_version,
            }, ensure_ascii=False) + "\n"


def summarize_run(run: run_store.RunRecord, episodes: list[run_store.RunEpisode]) -> dict[str, Any]:
    """Statistics of a complete run from its graded episodes (pure; runs in a worker thread)."""
    scores = {index_of(e.episode_id): e.score for e in episodes}
    return summarize_manifest(run.manifest, run.trials, scores, errors=sum(1 for e in episodes if e.truncated))
