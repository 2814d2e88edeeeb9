"""Runs: server-assigned episodes, server-side scoring, a leaderboard with honest statistics.

A run is an agent/model evaluated on a split's task list with k trials. The server fixes the
manifest (every ticket of every chosen task, k times), hands entries out one at a time
(``POST /runs/{id}/next``), grades every episode itself from stored transitions, and ranks
finished runs on their resolved rate. The run token (shown once, stored hashed) guards every
episode of the run; step rewards are withheld until the run completes.

The test split is secret: a test run needs a submitter key issued by the operator, covers the
whole split, is pinned to the test key it started under, counts against the key's quota, and
publishes one number — its resolved rate plus a keyed Gaussian draw, rounded to the Ladder's margin —
and only when the Ladder releases it (it beats the submitter's best); a key has ``TEST_RUN_BUDGET`` test
runs under one test key, ever, so that nothing it is shown reads any one ticket (service.stats). Nothing
per episode is ever served, step counts included, except its progress to the run token's holder while it
is active.

Boards: the test split's is the benchmark; train and dev boards are practice (their labels are
public, so replaying known answers tops them). Rows are ordered by resolved rate and adjacent rows
compared — by a paired test on the same tickets on practice boards, from the released values alone on
the test board — to make tie groups. A row is self-reported unless an operator verified its run
(``python -m service.verify``).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import math
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, cast

import anyio

from service import env as core
from service.db import clock, run_store
from service.db import repository as repo
from service.db.engine import Database
from service.db.models import utcnow
from service.domain.episodes.schemas import EpisodeResult, wire_observation
from service.domain.runs.schemas import (
    MANIFEST_PAGE_MAX,
    RUN_PAGE_DEFAULT,
    UNRANKED_SHOWN,
    Comparison,
    CreateRun,
    Leaderboard,
    LeaderboardRow,
    ManifestEntryView,
    ManifestPage,
    RunCreated,
    RunPage,
    RunView,
    Usage,
    UsageView,
    VerificationView,
)
from service.errors import (
    AgentNameTaken,
    InvalidRequest,
    QuotaExceeded,
    RunEpisodeIdTaken,
    RunNotActive,
    RunNotFound,
    RunResultsPending,
    RunTokenInvalid,
    RunTokenMissing,
    SubmitterKeyInvalid,
    SubmitterKeyMissing,
    TestResultsPrivate,
    TestRunBudgetSpent,
)
from service.lib.secrets import hash_secret
from service.stats import (
    LADDER_MARGIN,
    LADDER_PRIVACY_MU,
    PUBLISHED_DECIMALS,
    TEST_RUN_BUDGET,
    Trial,
    item_outcomes,
    ladder,
    ladder_noise,
    ladder_noise_sd,
    paired_comparison,
    published_release,
    rounded,
    summarize,
    ticket_guess_bound,
    tie_ranks,
    unpaired_separated,
)

log = logging.getLogger("service.runs")

MANIFESTS_CACHED = 16  # runs whose manifest this process keeps (a 3,200-entry one is ~1 MB; derived ones are shared)


@functools.lru_cache(maxsize=64)
def _derived_manifest(
    split: str, task_ids: tuple[str, ...], trials: int, limit_per_task: int | None
) -> tuple[dict[str, Any], ...]:
    return tuple(e.model_dump() for e in core.run_manifest(split, list(task_ids), trials, limit_per_task))


def _manifest_or_invalid(body: CreateRun) -> tuple[dict[str, Any], ...]:
    """The manifest a new run's parameters derive, or the client's error when they derive none."""
    try:
        return _derived_manifest(body.split, tuple(body.task_ids or core.TASKS), body.trials, body.limit_per_task)
    except ValueError as exc:
        raise InvalidRequest(f"cannot build this run: {exc}", errors=[{"field": "body", "message": str(exc)}]) from exc


def manifest_of(run: run_store.RunRecord) -> Sequence[dict[str, Any]]:
    """Every entry of the run's manifest, in play order (shared, read-only: copy before changing).

    Runs store their parameters, not the expanded manifest: :func:`service.env.run_manifest` is a
    pure function of (split, task_ids, trials, limit_per_task) under the run's dataset version,
    so the same entries come back for as long as this deployment serves that version (runs of
    another version are never ranked). Runs created before migration 0005 kept theirs."""
    if run.manifest is not None:
        return run.manifest
    return _derived_manifest(run.split, tuple(run.task_ids), run.trials, run.limit_per_task)


def _rank_order(row: LeaderboardRow) -> tuple[float, float, str]:
    """Best first. A ranked row is a complete run's: its resolved rate and finish time are set (a test
    row publishes no mean)."""
    return -cast(float, row["resolved"]), -(row["mean"] or 0.0), cast(str, row["finished_at"])


def _checked(verified_by: str | None) -> str:
    return "verified" if verified_by is not None else "self-reported"


def _verified(by: str | None, at: datetime | None, note: str | None) -> VerificationView | None:
    if by is None or at is None:
        return None
    return {"by": by, "at": at.isoformat(), "note": note}


def hidden_split_items() -> int:
    """The tickets a test run covers (the whole test split): one ticket moves its score by 1/this."""
    return len(_derived_manifest(core.HIDDEN_SPLIT, tuple(core.TASKS), 1, None))


LEGACY_NOISE_SD = 0.01 * math.sqrt(2)  # a run released before its draw's sd was kept: Laplace of scale 0.01


def _noise_sd(run: run_store.BoardRun | run_store.RunRecord) -> float:
    """The sd of the draw a test run's release got (kept in its summary)."""
    return cast(float, (run.summary or {}).get("noise_sd", LEGACY_NOISE_SD))


def _compare(
    upper: run_store.BoardRun,
    lower: run_store.BoardRun,
    upper_row: LeaderboardRow,
    lower_row: LeaderboardRow,
) -> Comparison:
    """Is the upper of two adjacent rows ahead of the lower at 95%? On the same tickets (practice boards):
    a paired test of their per-ticket outcomes. On the test board, from the released values alone — a
    paired test would publish one more function of each ticket's outcome (docs/methodology.md: it can
    only tell apart rows ~0.1 apart)."""
    a, b = cast(float, upper_row["resolved"]), cast(float, lower_row["resolved"])
    if upper.split == core.HIDDEN_SPLIT:
        n_a, n_b = (cast(int, (r.summary or {}).get("items", 1)) for r in (upper, lower))
        noise = max(_noise_sd(upper), _noise_sd(lower))
        separated = unpaired_separated(a, b, n_a, n_b, extra_var=noise**2)
        return {
            "method": "released values",
            "difference": rounded(a - b, PUBLISHED_DECIMALS),
            "z": None,
            "separated": separated,
        }
    if upper.outcomes and lower.outcomes and len(upper.outcomes) == len(lower.outcomes):
        paired = paired_comparison(upper.outcomes, lower.outcomes)
        z = rounded(paired.z, 2) if math.isfinite(paired.z) else None
        return {"method": "paired", "difference": rounded(paired.difference, 4), "z": z, "separated": paired.separated}
    # a run summarised before its outcomes were kept (revision 0009): its interval only
    lo_a = cast(list[float], upper_row["resolved_ci95"])[0]
    hi_b = cast(list[float], lower_row["resolved_ci95"])[1]
    return {"method": "intervals", "difference": rounded(a - b, 4), "z": None, "separated": lo_a > hi_b}


def test_release_note(budget: int, noise_sd: float) -> str:
    """What a test release is, in words (the run page's and the test board's note)."""
    return " ".join(
        [
            "a test run publishes one number: its resolved rate over the whole split plus a Gaussian draw",
            f"(sd {rounded(noise_sd, 4)}) fixed by the deployment's key and the run id, rounded half up to",
            f"{LADDER_MARGIN}, and only when that beats its submitter's best release by {LADDER_MARGIN} (the Ladder);",
            "its interval follows from that number and the split's size; no per-task, per-family or per-difficulty",
            "rate, mean score or pass^k, and nothing per episode, ever. A submitter key completes at most",
            f"{budget} test runs under one test key, ever: all it can be shown is {LADDER_PRIVACY_MU}-Gaussian",
            "differentially private in every ticket — no guess of any one ticket's answer is right more than",
            f"{rounded(ticket_guess_bound(), 3)} of the time at even odds. Adjacent rows are compared from the",
            "released values alone, which tells close agents apart rarely (a true gap of 0.10 in about half of",
            "simulated pairs): read rows less than ~0.1 apart as tied",
        ]
    )


TEST_BOARD_NOTE = "the benchmark: each submitter's best released test run under this deployment's test key. "
BOARD_METHOD = (
    "ranked on the resolved rate (an episode is resolved when every required check of its task passes): mean over "
    "tickets of each ticket's resolved share. Adjacent rows are compared (vs_next): on practice boards by a paired "
    "test of the two runs' outcomes on the same tickets, on the test board from the released values and the noise "
    "alone; a row not ahead of the row above at 95% shares its rank (a tie group). 95% CI: percentile bootstrap over "
    "tickets (test: from the released value). One row per entrant (submitter or anonymous, agent name, model): its "
    "best run (entrant_runs counts its runs). Agent names first run with a submitter key belong to that submitter; "
    "every row is self-reported — its agent and model names are what the submitter declared — unless an operator "
    "verified the run (checked: verified, with who and when; ?verified=true shows only those)."
)


# Why a run that expired for something other than idling refuses every request.
_ENDED = {
    "test_key_changed": "was started under another test key than this deployment's (TEST_SPLIT_KEY changed), so "
    "its remaining episodes would come from another split",
    "submitter_revoked": "was created with a submitter key the operator has revoked",
}
PRACTICE_NOTE = (
    "practice board: the {split} split's tickets and labels are public, so a run that replays known answers "
    "tops it — it is ranked apart from the benchmark, the test board (GET /leaderboard?split=test), and its "
    "numbers are not the benchmark's"
)


def episode_id_for(run_id: str, index: int) -> str:
    return f"{run_id}-{index:05d}"


def index_of(episode_id: str) -> int:
    """The manifest index of a run episode (inverse of :func:`episode_id_for`)."""
    return int(episode_id.rsplit("-", 1)[1])


class RunService:
    def __init__(
        self,
        db: Database,
        ttl_s: float,
        quota: int = 3,
        quota_period_s: float = 24 * 3600.0,
        dataset: core.Dataset = core.PUBLIC,
        budget: int = TEST_RUN_BUDGET,
    ) -> None:
        self.db = db
        self.budget = budget  # test runs a submitter key may ever complete under one test key
        self.noise_sd = ladder_noise_sd(budget, hidden_split_items())  # each test release's draw (service.stats)
        self.ttl = timedelta(seconds=ttl_s)
        self.quota = quota
        self.quota_period = timedelta(seconds=quota_period_s)
        self.dataset = dataset  # replaced at start-up by the deployment's (with its test key)
        self.episode_quota: Any = None  # a limits.EpisodeQuota, set by the composition root (shared with episodes)
        # A run's manifest never changes: decoded once per process, not on every /next.
        self._manifests: OrderedDict[str, Sequence[dict[str, Any]]] = OrderedDict()
        # Per (split, verified only): (version, board). The version (complete runs, sum of their revisions) is
        # read on every request — one index-only query — so a run completed by any process shows on the next one.
        self._boards: dict[tuple[str, bool], tuple[tuple[int, int], Leaderboard]] = {}
        self._board_lock = asyncio.Lock()

    # -------------------------------------------------------------------------- maintenance

    async def expire_idle(self) -> int:
        expired = await run_store.expire_idle(self.db, clock.cutoff_now() - self.ttl)  # the slowest process's now
        if expired:
            log.info("runs expired count=%d", expired)
        return expired

    async def expire_other_key(self) -> int:
        """Expire active test runs pinned to another test key than this deployment's (a restart with a
        new ``TEST_SPLIT_KEY``): they would go on with another split's tickets."""
        expired = await run_store.expire_test_runs_of_another_key(self.db, self.dataset.test_fingerprint)
        if expired:
            log.warning("test runs of another test key expired count=%d", expired)
        return expired

    async def sweep(self) -> None:
        """The timer's work (never a read's): expire idle runs and test runs of another test key; summarise
        complete runs whose process stopped between their last episode and their summary."""
        await self.expire_idle()
        await self.expire_other_key()
        for run_id in await run_store.complete_unsummarised(self.db):
            await self.finish_if_complete(run_id)

    async def maintain(self, interval_s: float) -> None:
        """Run :meth:`sweep` every ``interval_s`` seconds until cancelled (a background task of the app)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.sweep()
            except Exception as exc:  # noqa: BLE001 - the next sweep retries; one line, no traceback
                log.warning("run sweep failed (%s: %s); next try in %.0f s", type(exc).__name__, exc, interval_s)

    # ------------------------------------------------------------------------------ access

    async def live_status(self, run: run_store.RunAccess, episode_updated_at: datetime) -> str:
        """The status of ``run`` for a step or resume of one of its episodes (last moved at
        ``episode_updated_at``): a run idle past its TTL is expired now, whoever asks, so the TTL
        holds without anyone reading the run. Costs nothing while the run or the episode is fresh."""
        if run.status != "active":
            return run.status
        cutoff = clock.cutoff_now() - self.ttl
        if run.updated_at >= cutoff or episode_updated_at >= cutoff:
            return "active"
        if await run_store.expire_run(self.db, run.id, cutoff):
            log.info("run expired on use run_id=%s", run.id)
            return "expired"
        return await self.status_of(run.id)  # another episode of the run moved recently

    async def load(self, run_id: str) -> run_store.RunRecord:
        run = await run_store.get_run(self.db, run_id)
        if run is None:
            raise RunNotFound(
                f"no run with id {run_id!r}; POST /runs creates one and returns run_id and run_token", run_id=run_id
            )
        return run

    @staticmethod
    def authorize(run: run_store.RunRecord | run_store.RunAccess, token: str | None) -> None:
        if not token:
            raise RunTokenMissing(
                f"episodes of run {run.id!r} need its token: send `Authorization: Bearer <run_token>` (or "
                "`run_token` in the body)",
                run_id=run.id,
            )
        if not hmac.compare_digest(hash_secret(token), run.token_sha256):
            raise RunTokenInvalid(
                f"that is not the token of run {run.id!r}; use the run_token POST /runs returned", run_id=run.id
            )

    async def access(self, run_id: str) -> run_store.RunAccess:
        """The run's token hash and status (what a step needs), without its manifest."""
        run = await run_store.get_run_access(self.db, run_id)
        if run is None:
            raise RunNotFound(
                f"no run with id {run_id!r}; POST /runs creates one and returns run_id and run_token", run_id=run_id
            )
        return run

    async def authorized(self, run_id: str, token: str | None, *, active: bool = False) -> run_store.RunAccess:
        """The run, once ``token`` is its token. A test run pinned to another test key than this
        deployment's is expired here, and one that expired for its key or its submitter's revocation
        refuses every request (:class:`~service.errors.RunNotActive`): it is never resumed, stepped or released."""
        run = await self.access(run_id)
        self.authorize(run, token)
        if run.status == "active" and not self._pinned(run):
            if await run_store.expire_test_runs_of_another_key(self.db, self.dataset.test_fingerprint, run.id):
                log.warning("test run expired: the test key changed run_id=%s", run.id)
            run = replace(run, status="expired", status_reason="test_key_changed")
        if run.status == "expired" and run.status_reason in _ENDED:
            raise RunNotActive(
                f"run {run_id!r} {_ENDED[run.status_reason]}; it takes no more requests and is never released — "
                "start a new run with POST /runs",
                run_id=run_id,
                run_status=run.status,
                status_reason=run.status_reason,
                code="run_expired",
            )
        # Idle past its TTL and the sweep has not come by yet: expire it before handing out more.
        if (
            active
            and run.status == "active"
            and run.updated_at < clock.cutoff_now() - self.ttl
            and await run_store.expire_run(self.db, run.id, clock.cutoff_now() - self.ttl)
        ):
            run = replace(run, status="expired")
        if active and run.status != "active":
            raise RunNotActive(
                f"run {run_id!r} is {run.status}; start a new run with POST /runs",
                run_id=run_id,
                run_status=run.status,
                code="run_exhausted" if run.status == "complete" else f"run_{run.status}",
            )
        return run

    def _pinned(self, run: run_store.RunAccess | run_store.RunRecord) -> bool:
        """A test run is played only under the test key it started under."""
        return run.split != core.HIDDEN_SPLIT or run.key_fingerprint == self.dataset.test_fingerprint

    @staticmethod
    def holder(run: run_store.RunRecord, token: str | None) -> bool:
        """Whether ``token`` is the run's own (a wrong token is simply not the holder's: reads stay public)."""
        return bool(token) and hmac.compare_digest(hash_secret(token or ""), run.token_sha256)

    # ---------------------------------------------------------------------------- lifecycle

    async def create(self, body: CreateRun, submitter_key: str | None = None) -> RunCreated:
        manifest = _manifest_or_invalid(body)
        full = body.task_ids is None or set(body.task_ids) == set(core.TASKS)
        full_split = full and body.limit_per_task is None
        test, quota = await self._binding(body, submitter_key, full=full, full_split=full_split)
        run_id = "run_" + secrets.token_hex(8)
        token = secrets.token_urlsafe(32)
        run = await self._insert(
            quota,
            test,
            id=run_id,
            token_sha256=hash_secret(token),
            agent=body.agent,
            model=body.model,
            split=body.split,
            trials=body.trials,
            task_ids=body.task_ids or list(core.TASKS),
            full_split=full_split,
            limit_per_task=body.limit_per_task,
            manifest=None,  # derived from the parameters above (manifest_of)
            episodes_total=len(manifest),
            dataset_version=core.DATASET_VERSION,
            grader_version=core.GRADER_VERSION,
        )
        log.info("run created run_id=%s agent=%s split=%s episodes=%d", run_id, body.agent, body.split, len(manifest))
        return {
            **self.view(run),
            "run_token": token,
            "limit_per_task": body.limit_per_task,
            "manifest_url": f"/runs/{run.id}/manifest?offset=0&limit={MANIFEST_PAGE_MAX}",
        }

    async def _binding(
        self, body: CreateRun, submitter_key: str | None, *, full: bool, full_split: bool
    ) -> tuple[dict[str, Any], tuple[int, datetime] | None]:
        """The submitter columns of a new run, and on the test split the quota its insert checks."""
        if body.split != core.HIDDEN_SPLIT:
            if submitter_key:  # optional on public splits: it binds the agent name to the submitter
                return {"submitter": (await self._submitter(submitter_key)).name}, None
            return {}, None
        if not full_split:
            raise InvalidRequest(
                "a test run covers the whole test split: drop task_ids and limit_per_task (only aggregates of the "
                "whole split are published; subsets would turn them back into per-ticket answers)",
                errors=[
                    {
                        "field": "task_ids" if not full else "limit_per_task",
                        "message": "not allowed on the test split",
                    }
                ],
            )
        submitter = await self._submitter(submitter_key)
        test = {"submitter": submitter.name, "key_fingerprint": self.dataset.test_fingerprint}
        limit = submitter.quota if submitter.quota is not None else self.quota
        return test, (limit, utcnow() - self.quota_period)

    async def _insert(
        self, quota: tuple[int, datetime] | None, test: dict[str, Any], **columns: Any
    ) -> run_store.RunRecord:
        """Insert the run, turning a taken agent name or a used-up quota into the client's domain error."""
        try:
            budget = self.budget if quota is not None else None  # test runs only
            return await run_store.insert_run(self.db, quota=quota, budget=budget, **columns, **test)
        except run_store.AgentNameTaken as exc:
            raise AgentNameTaken(
                f"the agent name {exc.name!r} belongs to submitter {exc.owner!r} (names are bound to the submitter key "
                "that first ran them, case and spacing ignored); choose another name, or send that submitter's key as "
                "`Authorization: Bearer <submitter key>`",
                agent=exc.name,
                owner=exc.owner,
            ) from exc
        except run_store.BudgetSpent as exc:
            raise TestRunBudgetSpent(
                f"submitter {test['submitter']!r} has used its {self.budget} test run(s) under this deployment's test "
                f"key (key {self.dataset.test_fingerprint}), for good: the release noise is sized for that many and no "
                "more, so that no number of runs reads any one ticket's answer; a run that expired unfinished is not "
                "counted. Practise on dev (GET /leaderboard?split=dev); the budget starts again under a new test key",
                used=exc.used,
                budget=self.budget,
            ) from exc
        except run_store.QuotaExceeded as exc:
            assert quota is not None
            retry = max(1, int((exc.retry_at + self.quota_period - utcnow()).total_seconds()) + 1)
            raise QuotaExceeded(
                f"submitter {test['submitter']!r} has used its {quota[0]} test run(s) per "
                f"{self.quota_period.total_seconds():g} s; try again in {retry} s",
                retry_after_s=retry,
            ) from exc

    async def _submitter(self, key: str | None) -> run_store.SubmitterRecord:
        if not key:
            raise SubmitterKeyMissing(
                "test runs need a submitter key issued by this deployment's operator: send `Authorization: Bearer "
                "<submitter key>` with POST /runs (the operator creates one with `python -m service.submitters "
                "create NAME`)"
            )
        submitter = await run_store.submitter_by_key(self.db, hash_secret(key))
        if submitter is None or submitter.revoked_at is not None:
            raise SubmitterKeyInvalid(
                "that submitter key is not valid here (unknown or revoked); ask the operator for one"
            )
        return submitter

    async def _manifest(self, run_id: str) -> Sequence[dict[str, Any]]:
        """The run's manifest (:func:`manifest_of`), worked out once per process: never per /next."""
        manifest = self._manifests.get(run_id)
        if manifest is None:
            manifest = manifest_of(await self.load(run_id))
            self._manifests[run_id] = manifest
            if len(self._manifests) > MANIFESTS_CACHED:
                self._manifests.popitem(last=False)
        self._manifests.move_to_end(run_id)
        return manifest

    async def next_episode(self, run_id: str, token: str | None, client_address: str | None = None) -> EpisodeResult:
        """Hand out the run's next episode; it counts against ``client_address``'s storage caps (None: an
        exempt client) as a plain episode does."""
        run = await self.authorized(run_id, token, active=True)
        if client_address is not None and self.episode_quota is not None:  # storage per address (limits.EpisodeQuota)
            await self.episode_quota.check(client_address)
        manifest = await self._manifest(run.id)
        started: dict[str, Any] = {}

        def make_episode(index: int) -> dict[str, Any]:
            entry = manifest[index]
            state, observation = core.reset(entry["task_id"], entry["seed"], run.split, self.dataset)
            started.update(state=state, observation=observation, entry=entry)
            return dict(
                id=episode_id_for(run.id, index),
                task_id=entry["task_id"],
                split=run.split,
                seed=entry["seed"],
                ticket_id=state.ticket_id,
                run_id=run.id,
                status="active",
                step_count=0,
                state=state.as_json(),
                version=1,
                client_address=client_address,
            )

        try:
            index = await run_store.claim_next(self.db, run.id, make_episode)
        except run_store.EpisodeIdTaken as exc:  # only an episode stored before run ids were reserved
            raise RunEpisodeIdTaken(
                f"the id {exc.episode_id!r} of run {run_id!r}'s next episode is taken by an episode outside the run; "
                "nothing was handed out — start a new run with POST /runs (its ids cannot be taken)",
                run_id=run_id,
                episode_id=exc.episode_id,
                code="run_episode_id_taken",
            ) from exc
        if index is None:
            raise RunNotActive(
                f"every episode of run {run_id!r} has been handed out; finish the started ones "
                f'(GET /runs/{run_id} lists them) — resume one with POST /reset {{"episode_id": …, "resume": true}}',
                run_id=run_id,
                code="run_exhausted",
            )
        episode_id = episode_id_for(run.id, index)
        entry = started["entry"]
        return EpisodeResult(
            episode_id,
            wire_observation(episode_id, started["observation"]),
            None,
            False,
            {
                "episode_id": episode_id,
                "task_id": entry["task_id"],
                "seed": entry["seed"],
                "split": run.split,
                "run_id": run.id,
                "index": index,
                "trial": entry["trial"],
                "step_count": 0,
            },
        )

    async def finish_if_complete(self, run_id: str) -> str:
        """After a run episode finished: if that completed the run, compute and store its summary
        (off the event loop). Returns the run's status."""
        status = (await self.access(run_id)).status  # the whole run is read only once it is complete
        if status != "complete":
            return status
        run = await self.load(run_id)
        if run.status != "complete" or run.summary is not None:
            return run.status
        if run.split == core.HIDDEN_SPLIT:
            # The Ladder compares a run with those its submitter completed before it: summarise those
            # first, in completion order, whichever process gets here (a crash in between changes nothing).
            for earlier in await run_store.unsummarised_before(self.db, run):
                await self._summarise(await self.load(earlier))
        await self._summarise(run)
        return run.status

    async def _summarise(self, run: run_store.RunRecord) -> None:
        if run.summary is not None:
            return
        episodes = await run_store.run_episodes(self.db, run.id, run.grader_version)
        summary, outcomes = await anyio.to_thread.run_sync(lambda: summarize_run(run, episodes))
        if run.split == core.HIDDEN_SPLIT:
            summary["noise_sd"] = self.noise_sd  # what the release's interval and comparisons widen by
        if run.split != core.HIDDEN_SPLIT:
            await run_store.set_summary(self.db, run.id, summary, outcomes)
            log.info("run complete run_id=%s resolved=%s mean=%s", run.id, summary["resolved"], summary["mean"])
            return
        release = self._release_rule(run)
        try:
            released = await run_store.set_summary_released(self.db, run, summary, outcomes, release)
        except run_store.EarlierRunsUnsummarised as exc:  # completed meanwhile, by another process
            for earlier in exc.run_ids:
                await self._summarise(await self.load(earlier))
            released = await run_store.set_summary_released(self.db, run, summary, outcomes, release)
        log.info("test run complete run_id=%s submitter=%s released=%s", run.id, run.submitter, released)

    def _release_rule(self, run: run_store.RunRecord) -> Callable[[float, float | None], float | None]:
        """The Ladder for this run: its noisy score against its submitter's best, nothing for a run pinned
        to another test key (it is never released under this deployment's)."""
        key = self.dataset.test_key
        if key is None or not self._pinned(run):
            return lambda score, best: None
        noise = ladder_noise(key, run.id, self.noise_sd)
        return lambda score, best: ladder(score, best, noise)

    async def set_usage(self, run_id: str, token: str | None, usage: Usage) -> RunView:
        run = await self.authorized(run_id, token)
        await run_store.set_usage(self.db, run.id, {**usage.model_dump(), "self_reported": True})
        return self.view(await self.load(run_id))

    # -------------------------------------------------------------------------------- reads

    @staticmethod
    def view(run: run_store.RunRecord, holder: bool = True) -> RunView:
        """The run as every run endpoint shows it. An active test run's progress (how many episodes are
        started and done) is its holder's only: watched by anyone, its counters tick once per episode
        and would time each ticket's steps."""
        test = run.split == core.HIDDEN_SPLIT
        progress = holder or not test or run.status != "active"
        return {
            "run_id": run.id,
            "status": run.status,
            "status_reason": run.status_reason,
            "agent": run.agent,
            "model": run.model,
            "split": run.split,
            "board": "benchmark" if test else "practice",
            "trials": run.trials,
            "task_ids": run.task_ids,
            "ranked": run.full_split,
            "episodes_total": run.episodes_total,
            "episodes_started": run.next_index if progress else None,
            "episodes_done": run.episodes_done if progress else None,
            "dataset_version": run.dataset_version,
            "grader_version": run.grader_version,
            "submitter": run.submitter,  # set when a submitter key created the run (its agent name is theirs)
            "test_key_fingerprint": run.key_fingerprint if test else None,
            "usage": cast("UsageView | None", run.usage),  # stored as the UsageView it was given
            "checked": _checked(run.verified_by),
            "verified": _verified(run.verified_by, run.verified_at, run.verification_note),
            "created_at": run.created_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "run_url": f"/runs/{run.id}",
            "leaderboard_url": f"/leaderboard?split={run.split}",
        }

    async def status_of(self, run_id: str) -> str:
        return (await self.access(run_id)).status

    async def page_version(self, run_id: str, page: int, per_page: int, token: str | None = None) -> str:
        """A short string that changes whenever the run page (``page``, ``per_page``) would, for this
        reader: checked against ``If-None-Match`` and the rendered-page cache before the page is built.
        A test run's page also shows its submitter's best release, so the split's leaderboard version is
        part of it; and it changes for anyone but the run's holder only when the run's status or what it
        publishes does (a version that moved with every step would time each ticket's steps)."""
        start = (page - 1) * per_page
        version = await run_store.page_version(
            self.db, run_id, episode_id_for(run_id, start), episode_id_for(run_id, start + per_page - 1)
        )
        if version is None:
            raise RunNotFound(
                f"no run with id {run_id!r}; POST /runs creates one and returns run_id and run_token", run_id=run_id
            )
        status, _next, _done, revision, _updated, split, *_page = version
        if split == core.HIDDEN_SPLIT:
            holder = status == "active" and token is not None and self.holder(await self.load(run_id), token)
            if not holder:
                version = (status, revision)
            version = (*version, holder, *await run_store.leaderboard_version(self.db, core.HIDDEN_SPLIT))
        return repr((run_id, page, per_page, core.DATASET_VERSION, core.GRADER_VERSION, *version))

    async def detail(
        self, run_id: str, page: int = 1, per_page: int = RUN_PAGE_DEFAULT, token: str | None = None
    ) -> RunPage:
        """The run and one page of its episodes (``per_page`` manifest entries, 1-based ``page``). Never
        writes: idle runs are expired by the sweep (or when one of their episodes is used).

        A test run lists its episodes (status and step count, never a result) only to the run token's
        holder while the run is active — to resume its own — and to nobody afterwards: which tickets took
        more steps says which needed the customer's answer."""
        run = await self.load(run_id)
        if run.status == "complete" and run.summary is None:
            await self.finish_if_complete(run.id)
            run = await self.load(run_id)
        test = run.split == core.HIDDEN_SPLIT
        holder = self.holder(run, token)
        listed = not test or (run.status == "active" and holder)
        shown = core.feedback(run.split, True, run.status == "complete")  # nothing per episode while in progress
        start = (page - 1) * per_page
        entries = manifest_of(run)[start : start + per_page] if listed else []
        rows = await self._episode_rows(run, entries, shown.episode_score)
        pages = max(1, -(-run.episodes_total // per_page))

        def url(n: int) -> str | None:
            return f"/runs/{run.id}?page={n}&per_page={per_page}" if 1 <= n <= pages and listed else None

        body: dict[str, Any] = {
            **self.view(run, holder),
            "episodes": rows,
            "episodes_listed": listed,
            "summary": run.summary,
            "per_episode_results": shown.episode_score,
            "page": {
                "number": page,
                "per_page": per_page,
                "pages": pages,
                "first_index": start,
                "prev_url": url(page - 1),
                "next_url": url(page + 1),
            },
        }
        if test:
            body.update(await self._test_result(run))
        return cast(RunPage, body)  # the view, its episode rows and page, and a test run's published result

    async def _episode_rows(
        self, run: run_store.RunRecord, entries: Sequence[dict[str, Any]], with_results: bool
    ) -> list[dict[str, Any]]:
        handed_out = [episode_id_for(run.id, e["index"]) for e in entries if e["index"] < run.next_index]
        started = {
            e.episode_id: e
            for e in (
                await run_store.run_episodes(self.db, run.id, run.grader_version, ids=handed_out) if handed_out else []
            )
        }
        rows = []
        for entry in entries:
            ep = started.get(episode_id_for(run.id, entry["index"]))
            row = {
                **entry,
                "episode_id": ep.episode_id if ep else None,
                "status": "pending" if ep is None else ep.status,
                "step_count": ep.step_count if ep else 0,
            }
            if with_results:
                row.update(score=ep.score if ep else None, resolved=ep.resolved if ep else None)
            rows.append(row)
        return rows

    async def manifest_page(self, run_id: str, offset: int, limit: int) -> ManifestPage:
        """A slice of the run's manifest: which ticket each episode index plays, in order."""
        run = await self.load(run_id)
        entries = list(manifest_of(run)[offset : offset + limit])
        after = offset + len(entries)
        return {
            "run_id": run.id,
            "episodes_total": run.episodes_total,
            "offset": offset,
            "limit": limit,
            "entries": cast(list[ManifestEntryView], entries),  # ManifestEntry dumps
            "next_url": f"/runs/{run.id}/manifest?offset={after}&limit={limit}" if after < run.episodes_total else None,
        }

    async def _test_result(self, run: run_store.RunRecord) -> dict[str, Any]:
        """What a test run publishes: one released number (and what follows from it), only when the
        Ladder released it."""
        best = await run_store.best_released(self.db, run) if run.summary is not None else None
        summary = run.summary or {}
        noise_sd = _noise_sd(run) if run.summary is not None else self.noise_sd
        released = (
            published_release(run.released, summary["items"], summary["episodes"], summary["errors"], noise_sd)
            if run.released is not None
            else None
        )
        return {
            "summary": released,
            "ladder": {
                "released": run.released,
                "submitter_best": best,
                "margin": LADDER_MARGIN,
                "noise_scale": noise_sd,
                "test_run_budget": self.budget,
                "note": test_release_note(self.budget, noise_sd),
            },
        }

    async def leaderboard(self, split: str, verified_only: bool = False) -> Leaderboard:
        """The split's leaderboard, cached until a run completes or what it shows of one changes (the
        version is read first, so rows read after it can only be newer: a stale board is never kept).
        The returned dict is shared: never modify it. Never writes (runs whose summary is missing are
        summarised by the sweep). ``verified_only``: the rows an operator verified, ranked among themselves."""
        version = await run_store.leaderboard_version(self.db, split)
        key = (split, verified_only)
        cached = self._boards.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        async with self._board_lock:
            cached = self._boards.get(key)
            if cached is not None and cached[0] == version:
                return cached[1]
            shown, unranked_total = await run_store.leaderboard_runs(self.db, split, UNRANKED_SHOWN)
            if verified_only:
                shown = [r for r in shown if r.verified_by is not None]
                unranked_total = sum(1 for r in shown if not r.full_split)
            board = self._board(split, shown, unranked_total, verified_only)
            self._boards[key] = (version, board)
        return board

    async def board_version(self, split: str, page: int, per_page: int, verified_only: bool = False) -> str:
        """What a leaderboard page shows can change only if this does (ETag and page cache key, read first)."""
        version = await run_store.leaderboard_version(self.db, split)
        return repr(("leaderboard", split, page, per_page, verified_only, core.DATASET_VERSION, core.GRADER_VERSION,
                     *version, self.dataset.test_fingerprint))  # fmt: skip

    async def leaderboard_page(self, split: str, page: int, per_page: int, verified_only: bool = False) -> Leaderboard:
        """One page of the split's leaderboard (``per_page`` ranked rows, 1-based ``page``; ranks are the
        whole board's): a board of thousands of rows is never sent, nor rendered, whole."""
        board = await self.leaderboard(split, verified_only=verified_only)
        rows = board["rows"]
        pages = max(1, -(-len(rows) // per_page))
        start = (page - 1) * per_page

        def url(n: int) -> str | None:
            only = "&verified=true" if verified_only else ""
            return f"/leaderboard?split={split}{only}&page={n}&per_page={per_page}" if 1 <= n <= pages else None

        return {
            **board,
            "rows": rows[start : start + per_page],
            "page": {
                "number": page,
                "per_page": per_page,
                "pages": pages,
                "rows_total": len(rows),
                "prev_url": url(page - 1),
                "next_url": url(page + 1),
            },
        }

    def _board(
        self, split: str, complete: list[run_store.BoardRun], unranked_total: int = 0, verified_only: bool = False
    ) -> Leaderboard:
        test = split == core.HIDDEN_SPLIT
        current = [
            r
            for r in complete
            if r.summary and r.dataset_version == core.DATASET_VERSION and r.grader_version == core.GRADER_VERSION
        ]
        if test:
            current = _best_release_per_submitter(
                [r for r in current if r.released is not None and r.key_fingerprint == self.dataset.test_fingerprint]
            )
        ranked, entries = _best_per_entrant([r for r in current if r.full_split])
        rows = sorted((self._row(r, None) for r in ranked), key=_rank_order)
        by_id = {r.id: r for r in ranked}
        comparisons = [_compare(by_id[a["run_id"]], by_id[b["run_id"]], a, b) for a, b in pairwise(rows)]
        ranks = tie_ranks([c["separated"] for c in comparisons])[: len(rows)]
        for row, rank, comparison in zip(rows, ranks, [*comparisons, None][: len(rows)], strict=True):
            row["rank"], row["entrant_runs"], row["vs_next"] = rank, entries[row["run_id"]], comparison
        unranked = [self._row(r, None) for r in current if not r.full_split]
        return {
            "split": split,
            "board": "benchmark" if test else "practice",
            "note": TEST_BOARD_NOTE + test_release_note(self.budget, self.noise_sd)
            if test
            else PRACTICE_NOTE.format(split=split),
            "verified_only": verified_only,
            "dataset_version": core.DATASET_VERSION,
            "grader_version": core.GRADER_VERSION,
            "test_key_fingerprint": self.dataset.test_fingerprint if test else None,
            "method": BOARD_METHOD,
            "rows": rows,
            # subset runs (practice): only the most recent, and only while retention keeps them
            "unranked": unranked,
            "unranked_total": unranked_total,
            "unranked_shown": UNRANKED_SHOWN,
        }

    def _row(self, run: run_store.BoardRun, rank: int | None) -> LeaderboardRow:
        test = run.split == core.HIDDEN_SPLIT
        s = run.summary or {}
        if test:  # the one released number and what follows from it
            s = published_release(
                run.released or 0.0, s.get("items", 0), s.get("episodes", 0), s.get("errors", 0), _noise_sd(run)
            )
        return {
            "rank": rank,
            "run_id": run.id,
            "agent": run.agent,
            "model": run.model,
            "submitter": run.submitter,
            "checked": _checked(run.verified_by),
            "verified": _verified(run.verified_by, run.verified_at, run.verification_note),
            "trials": run.trials,
            "resolved": s.get("resolved"),
            "resolved_ci95": s.get("resolved_ci95"),
            "mean": s.get("mean"),
            "ci95": s.get("ci95"),
            "pass_hat_k": s.get("pass_hat_k"),
            "per_family": s.get("per_family"),
            "per_difficulty": s.get("per_difficulty"),
            "per_task": s.get("per_task"),
            "episodes": s.get("episodes"),
            "errors": s.get("errors"),
            "dataset_version": run.dataset_version,
            "grader_version": run.grader_version,
            "test_key_fingerprint": run.key_fingerprint,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "usage": cast("UsageView | None", run.usage),  # stored as the UsageView it was given
            "run_url": f"/runs/{run.id}",
        }

    async def trajectories(self, run_id: str, token: str | None) -> AsyncIterator[str]:
        """One JSON line per finished episode: observations, actions, rewards, score. Never on test."""
        run = await self.load(run_id)
        if run.split == core.HIDDEN_SPLIT:
            raise TestResultsPrivate(
                f"run {run_id!r} is on the test split: its trajectories are never served (they would reveal the "
                "hidden labels); GET /runs/{run_id} shows its released aggregates",
                run_id=run_id,
            )
        if run.status != "complete":
            self.authorize(run, token)
            raise RunResultsPending(
                f"run {run_id!r} is {run.status}: its trajectories (scores, rewards, actions) are served once it "
                "completes, so no agent learns a verdict while the run is in progress",
                run_id=run_id,
                code="run_in_progress",
            )
        for ep in await run_store.run_episodes(self.db, run.id, run.grader_version):
            if ep.status != "done":
                continue
            entry = manifest_of(run)[index_of(ep.episode_id)]
            _, first = core.reset(ep.task_id, ep.seed, run.split, self.dataset)
            steps = await repo.list_transitions(self.db, ep.episode_id)
            shown = core.feedback(run.split, True, run.status == "complete")
            yield (
                json.dumps(
                    {
                        "episode_id": ep.episode_id,
                        "run_id": run.id,
                        "task_id": ep.task_id,
                        "seed": ep.seed,
                        "trial": entry["trial"],
                        "split": run.split,
                        "observations": [wire_observation(ep.episode_id, first)] + [t.observation for t in steps],
                        "actions": [t.action for t in steps],
                        "rewards": [t.reward if shown.step_rewards else None for t in steps],
                        "score": ep.score,
                        "resolved": ep.resolved,
                        "grader_version": run.grader_version,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )


def _best_per_entrant(runs: list[run_store.BoardRun]) -> tuple[list[run_store.BoardRun], dict[str, int]]:
    """One ranked row per entrant — submitter (or anonymous), agent name (case and spacing ignored)
    and model — its best run: repeating a run never puts one agent on the board twice. Returns the
    kept runs and, per kept run, how many runs its entrant finished."""
    groups: dict[tuple[str | None, str, str], list[run_store.BoardRun]] = {}
    for run in runs:
        groups.setdefault((run.submitter, run_store.agent_name_key(run.agent), run.model), []).append(run)
    best = [
        min(
            group,
            key=lambda r: (
                -(r.summary or {}).get("resolved", 0.0),
                -(r.summary or {}).get("mean", 0.0),
                r.finished_at or r.created_at,
            ),
        )
        for group in groups.values()
    ]
    return best, {b.id: len(g) for b, g in zip(best, groups.values(), strict=True)}


def _best_release_per_submitter(runs: list[run_store.BoardRun]) -> list[run_store.BoardRun]:
    best: dict[str, run_store.BoardRun] = {}
    for run in runs:
        key = run.submitter or run.id
        if key not in best or (run.released or 0.0) > (best[key].released or 0.0):
            best[key] = run
    return list(best.values())


def summarize_run(run: run_store.RunRecord, episodes: list[run_store.RunEpisode]) -> tuple[dict[str, Any], list[float]]:
    """Statistics of a complete run from its graded episodes (pure; runs in a worker thread), and each
    ticket's resolved share in manifest order (kept privately for paired comparisons).

    Items are the run's (task, seed) tickets; an episode without a grade counts as unresolved, 0.
    """
    graded = {index_of(e.episode_id): e for e in episodes}
    items: dict[tuple[str, int], list[Trial]] = {}
    for entry in manifest_of(run):
        ep = graded.get(entry["index"])
        trial = Trial(ep.score or 0.0, bool(ep.resolved)) if ep is not None else Trial(0.0, False)
        items.setdefault((entry["task_id"], entry["seed"]), []).append(trial)
    summary = summarize(
        items,
        run.trials,
        groups={
            "per_task": lambda key: key[0],
            "per_family": lambda key: core.TASKS[key[0]].family,
            "per_difficulty": lambda key: core.TASKS[key[0]].difficulty,
        },
    )
    summary["errors"] = sum(1 for e in episodes if e.truncated)
    return summary, [rounded(x, 6) for x in item_outcomes(items)]
