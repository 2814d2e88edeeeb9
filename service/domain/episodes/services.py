"""Episode operations shared by HTTP, WebSocket and MCP: the core's pure functions plus persistence.

This module decides nothing about the domain (rewards, what is hidden, when an episode ends):
it loads the stored state, calls ``service.env``, and stores what the core returned.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from service import env as core
from service.db import repository as repo
from service.db.engine import Database
from service.db.errors import DatabaseFault
from service.domain.episodes.schemas import (
    MIN_CLIENT_TOKEN,
    RUN_ID_PREFIX,
    EpisodeResult,
    EpisodeView,
    GraderResponse,
    ResetParams,
    StepView,
    parse_action,
    wire_observation,
)
from service.domain.episodes.task_names import choose_task, default_task_pool
from service.errors import (
    EpisodeAlreadyExists,
    EpisodeAlreadyFinished,
    EpisodeNotFinished,
    EpisodeNotFound,
    EpisodeTokenInvalid,
    EpisodeTokenMissing,
    InvalidRequest,
    MissingEpisodeId,
    RunNotActive,
    RunResultsPending,
    StepRaceLost,
    TestResultsPrivate,
    TestSplitNeedsRun,
)
from service.lib.secrets import hash_secret

log = logging.getLogger("service.episodes")


class RunGate(Protocol):
    """What episodes need from runs (``service.domain.runs.services.RunService`` is one): the runs
    domain builds on episodes, never the other way round, so it is passed in by the composition root."""

    async def status_of(self, run_id: str) -> str: ...

    async def authorized(self, run_id: str, token: str | None) -> Any: ...

    async def live_status(self, run: Any, episode_updated_at: Any) -> str: ...

    async def next_episode(
        self, run_id: str, token: str | None, client_address: str | None = None
    ) -> EpisodeResult: ...

    async def finish_if_complete(self, run_id: str) -> str: ...

    async def detail(self, run_id: str, *, token: str | None = None) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class _NewEpisode:
    episode_id: str
    task_id: str
    seed: int
    split: str
    token: str | None  # a client-chosen id's episode token (None: a server-made id is its own secret)


@dataclass(frozen=True)
class CachedEpisode:
    record: repo.EpisodeRecord
    state: core.EpisodeState
    grade: repo.GradeRecord | None = None  # stored by the step that finished the episode here
    observation: dict[str, Any] | None = None  # its last step's, whole: the next step stores only what changed


class EpisodeCache:
    """The episodes this process touched last, with their parsed state: a step needs no read.

    Never the source of truth: every step write is guarded in SQL by ``step_count`` and by the
    incarnation of the id (its ``created_at`` and owner's token hash), so an entry made stale by another
    process — stepped there, or deleted by retention and its id reset by someone else — is detected at
    write time (see ``EpisodeService.step``), and who owns an id is decided by the stored row whenever
    the entry would refuse. The grade this process stored for a finished episode spares ``/grader`` the
    grade read (the episode row is still read: ownership is checked on it).
    """

    def __init__(self, capacity: int = 2048) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, CachedEpisode] = OrderedDict()

    def get(self, episode_id: str) -> CachedEpisode | None:
        entry = self._entries.get(episode_id)
        if entry is not None:
            self._entries.move_to_end(episode_id)
        return entry

    def put(
        self,
        record: repo.EpisodeRecord,
        state: core.EpisodeState,
        grade: repo.GradeRecord | None = None,
        observation: dict[str, Any] | None = None,
    ) -> None:
        self._entries[record.id] = CachedEpisode(record, state, grade, observation)
        self._entries.move_to_end(record.id)
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def drop(self, episode_id: str) -> None:
        self._entries.pop(episode_id, None)


class _StaleCopy(Exception):
    """The stored row under an episode id is not the episode this request read (another incarnation of the
    id, or its token changed): the request starts again from the stored row."""


class EpisodeService:
    """Reset, resume, step, read and grade persisted episodes."""

    def __init__(
        self,
        db: Database,
        default_split: str = core.DEFAULT_SPLIT,
        runs: RunGate | None = None,
        dataset: core.Dataset = core.PUBLIC,
        default_tasks: tuple[str, ...] = (),
    ) -> None:
        self.db = db
        self.default_split = default_split
        self.default_tasks = default_task_pool(default_tasks)
        self.runs = runs
        self.dataset = dataset  # replaced at start-up by the deployment's (with its test key)
        self.cache = EpisodeCache()
        self.quota: Any = None  # a limits.EpisodeQuota, set by the composition root
        # (episode_id, request_id) of steps being applied by this process: a duplicate delivery
        # waits for the first copy and gets its result instead of racing it.
        self._inflight: dict[tuple[str, str], asyncio.Future[EpisodeResult | None]] = {}

    async def _feedback(self, record: repo.EpisodeRecord, run_status: str | None = None) -> core.Feedback:
        """What this episode may show (the run is read only when its completion matters)."""
        in_run = record.run_id is not None
        early, late = core.feedback(record.split, in_run, False), core.feedback(record.split, in_run, True)
        if early == late or record.run_id is None or self.runs is None:
            return early
        status = run_status if run_status is not None else await self.runs.status_of(record.run_id)
        return late if status == "complete" else early

    async def _run_status(self, record: repo.EpisodeRecord, token: str | None) -> str | None:
        """For an episode of a run: check the token, return the run's status (None for plain episodes).

        A run idle past its TTL is expired here, so no step or resume outlives the TTL even when
        nobody reads the run (see :meth:`RunService.live_status`)."""
        if record.run_id is None or self.runs is None:
            return None
        run = await self.runs.authorized(record.run_id, token)
        return await self.runs.live_status(run, record.updated_at)

    @staticmethod
    def _check_owner(record: repo.EpisodeRecord, episode_token: str | None) -> None:
        """A client-chosen id is acted on only with the token its reset returned. Server-made ids
        (128 random bits) are their own capability; run episodes are guarded by the run token."""
        if record.token_sha256 is None:
            return
        if not episode_token:
            raise EpisodeTokenMissing(record.id)
        if not hmac.compare_digest(hash_secret(episode_token), record.token_sha256):
            raise EpisodeTokenInvalid(record.id)

    @staticmethod
    def _shown(result: EpisodeResult, record: repo.EpisodeRecord, run_status: str | None) -> EpisodeResult:
        """The result as this episode may show it (:func:`service.env.feedback`): in a run, step
        rewards go out as 0.0 until it completes; on the test split, no score ever."""
        fb = core.feedback(record.split, record.run_id is not None, run_status == "complete")
        reward, observation = result.reward, result.observation
        if reward is not None and not fb.step_rewards:
            reward = 0.0
        if not fb.episode_score and (observation.get("score") is not None or observation.get("resolved") is not None):
            observation = {**observation, "score": None, "resolved": None}
        if reward == result.reward and observation is result.observation:
            return result
        return EpisodeResult(result.episode_id, observation, reward, result.done, result.metadata)

    async def _load(self, episode_id: str | None) -> repo.EpisodeRecord:
        if not episode_id:
            raise MissingEpisodeId()
        record = await repo.get_episode(self.db, episode_id)
        if record is None:
            raise EpisodeNotFound(episode_id)
        return record

    async def _same_as_stored(self, record: repo.EpisodeRecord) -> repo.EpisodeRecord:
        """The stored row of ``record``'s id; :class:`_StaleCopy` (and the cached copy dropped) when it is
        another incarnation of the id or has another owner now."""
        try:
            fresh = await self._load(record.id)
        except EpisodeNotFound:
            self.cache.drop(record.id)
            raise
        if not fresh.same_incarnation(record):
            self.cache.drop(record.id)
            raise _StaleCopy(record.id)
        return fresh

    @staticmethod
    def _meta(record: repo.EpisodeRecord, **more: Any) -> dict[str, Any]:
        return {
            "episode_id": record.id,
            "task_id": record.task_id,
            "seed": record.seed,
            "split": record.split,
            "run_id": record.run_id,
            **more,
        }

    async def reset(
        self,
        params: ResetParams,
        run_token: str | None = None,
        episode_token: str | None = None,
        client_address: str | None = None,
    ) -> EpisodeResult:
        """A new plain episode, a run's next one (``run_id``), or a stored one re-attached (``resume``)."""
        token = run_token or params.run_token
        if params.resume:
            if not params.episode_id:
                raise MissingEpisodeId()
            return await self.resume(params.episode_id, token, params.episode_token or episode_token)
        if params.run_id is not None and self.runs is not None:
            return await self.runs.next_episode(params.run_id, token, client_address)
        if client_address is not None and self.quota is not None:  # storage per client address (limits.EpisodeQuota)
            await self.quota.check(client_address)
        plan = self._plan(params)
        try:
            state, observation = core.reset(plan.task_id, plan.seed, plan.split, self.dataset)
        except core.EnvError as exc:
            raise InvalidRequest(
                f"cannot start this episode: {exc}", errors=[{"field": "split", "message": str(exc)}]
            ) from exc
        record = await self._insert(plan, state, client_address)
        self.cache.put(record, state)
        log.debug(
            "episode reset episode_id=%s task_id=%s seed=%s split=%s",
            plan.episode_id,
            plan.task_id,
            plan.seed,
            plan.split,
        )
        meta = self._meta(record, step_count=0)
        if plan.token is not None:
            meta["episode_token"] = plan.token  # shown once; only its hash is stored
        return EpisodeResult(plan.episode_id, wire_observation(plan.episode_id, observation), None, state.done, meta)

    def _plan(self, params: ResetParams) -> _NewEpisode:
        """What a plain reset starts: its id (and the token of a chosen one), task, seed and split."""
        if params.episode_id is not None and params.episode_id[: len(RUN_ID_PREFIX)].lower() == RUN_ID_PREFIX:
            raise InvalidRequest(
                f"episode ids starting with {RUN_ID_PREFIX!r} are reserved for the episodes of runs; choose another "
                "episode_id, or omit it to get a fresh one",
                errors=[
                    {"field": "episode_id", "message": f"the prefix {RUN_ID_PREFIX!r} is reserved", "type": "reserved"}
                ],
            )
        seed = params.seed if params.seed is not None else secrets.randbelow(core.MAX_SEED + 1)
        split = params.split or self.default_split
        if split == core.HIDDEN_SPLIT:
            raise TestSplitNeedsRun(
                'the test split is played only as a server-assigned run: POST /runs {"agent": …, "split": "test"}, '
                "then POST /runs/{run_id}/next with its token"
            )
        task_id = choose_task(params.task_id, params.difficulty, seed, self.default_tasks)
        # A chosen id is guessable, so it comes with a secret (the client's own, so that it can
        # resume even if this response is lost, or ours); a server-made id is the secret.
        token = params.episode_token or (secrets.token_urlsafe(32) if params.episode_id else None)
        if token is not None and len(token) < MIN_CLIENT_TOKEN:
            raise InvalidRequest(
                f"episode_token must be at least {MIN_CLIENT_TOKEN} random characters (or omit it and use the one "
                "returned)",
                errors=[{"field": "episode_token", "message": f"shorter than {MIN_CLIENT_TOKEN}", "type": "too_short"}],
            )
        return _NewEpisode(params.episode_id or uuid.uuid4().hex, task_id, seed, split, token)

    async def _insert(
        self, plan: _NewEpisode, state: core.EpisodeState, client_address: str | None
    ) -> repo.EpisodeRecord:
        try:
            return await repo.insert_episode(
                self.db,
                episode_id=plan.episode_id,
                task_id=plan.task_id,
                split=plan.split,
                seed=plan.seed,
                ticket_id=state.ticket_id,
                run_id=None,
                state=state.as_json(),
                done=state.done,
                token_sha256=hash_secret(plan.token) if plan.token else None,
                client_address=client_address,
            )
        except repo.EpisodeExists as exc:
            # Never point at the stored episode: it may be someone else's, set up as a trap.
            raise EpisodeAlreadyExists(
                f"the episode id {plan.episode_id!r} is taken; omit episode_id to get a fresh one, or choose "
                "another id",
                episode_id=plan.episode_id,
            ) from exc

    async def resume(
        self, episode_id: str, run_token: str | None = None, episode_token: str | None = None
    ) -> EpisodeResult:
        record = await self._load(episode_id)
        self._check_owner(record, episode_token)
        run_status = await self._run_status(record, run_token)
        _refuse_if_test_run_over(record, run_status)
        if run_status == "expired" and record.status != "done":
            raise RunNotActive(
                f"run {record.run_id!r} expired (idle past its TTL); its episodes cannot be resumed — start a new run "
                "with POST /runs",
                run_id=record.run_id,
                run_status=run_status,
                code="run_expired",
            )
        state = core.EpisodeState.model_validate(record.state)
        last = await repo.last_transition(self.db, episode_id)
        # A finished episode resumes on its final observation (score and all); others on a fresh view.
        observation = (
            last.observation
            if last is not None and state.done
            else wire_observation(episode_id, core.observe(state, dataset=self.dataset))
        )
        return self._shown(
            EpisodeResult(
                episode_id,
                observation,
                last.reward if last is not None else None,
                state.done,
                self._meta(record, step_count=record.step_count, resumed=True),
            ),
            record,
            run_status,
        )

    async def step(
        self,
        episode_id: str | None,
        action_payload: Any,
        request_id: str | None = None,
        run_token: str | None = None,
        episode_token: str | None = None,
    ) -> EpisodeResult:
        try:
            return await self._step_once(episode_id, action_payload, request_id, run_token, episode_token)
        except _StaleCopy:  # once: the retry reads the stored row and checks its owner there
            return await self._step_once(episode_id, action_payload, request_id, run_token, episode_token)

    async def _owned(
        self, episode_id: str | None, episode_token: str | None
    ) -> tuple[repo.EpisodeRecord, CachedEpisode | None]:
        """The episode a request acts on, checked against its owner, and this process's cached copy when
        that copy is the stored episode. The copy decides alone only when it lets the caller in (the step's
        write is then guarded by the same incarnation and owner); when it refuses, the stored row decides,
        so a stale copy never locks the id's current owner out."""
        cached = self.cache.get(episode_id) if episode_id else None
        if cached is not None:
            try:
                self._check_owner(cached.record, episode_token)
                return cached.record, cached
            except (EpisodeTokenMissing, EpisodeTokenInvalid):
                pass
        record = await self._load(episode_id)
        if cached is not None and not cached.record.same_incarnation(record):
            self.cache.drop(record.id)
        self._check_owner(record, episode_token)
        return record, None

    async def _step_once(
        self,
        episode_id: str | None,
        action_payload: Any,
        request_id: str | None,
        run_token: str | None,
        episode_token: str | None,
    ) -> EpisodeResult:
        record, cached = await self._owned(episode_id, episode_token)
        state = cached.state if cached is not None else None
        run_status = await self._run_status(record, run_token)
        _refuse_if_test_run_over(record, run_status)
        action = parse_action(action_payload)
        if request_id is None:
            return await self._apply(
                record,
                state,
                action,
                request_id,
                run_status,
                from_cache=cached is not None,
                previous_observation=cached.observation if cached is not None else None,
            )
        key = (record.id, request_id)
        first = self._inflight.get(key)
        if first is not None:
            done = await asyncio.shield(first)
            if done is not None:  # the first copy was applied: answer with its stored transition
                stored = await repo.get_transition_by_request(self.db, record.id, request_id)
                if stored is not None:
                    return self._shown(self._replay(record, stored, action.as_json()), record, run_status)
            return await self._step_once(episode_id, action_payload, request_id, run_token, episode_token)
        future: asyncio.Future[EpisodeResult | None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        result: EpisodeResult | None = None
        try:
            result = await self._apply(
                record,
                state,
                action,
                request_id,
                run_status,
                from_cache=cached is not None,
                previous_observation=cached.observation if cached is not None else None,
            )
            return result
        finally:
            del self._inflight[key]
            future.set_result(result)  # None when the first copy failed: a duplicate then tries itself

    async def _apply(
        self,
        record: repo.EpisodeRecord,
        state: core.EpisodeState | None,
        action: core.Action,
        request_id: str | None,
        run_status: str | None,
        from_cache: bool,
        previous_observation: dict[str, Any] | None = None,
    ) -> EpisodeResult:
        """Apply one step optimistically; the SQL guard on step_count decides who wins.

        A retried request_id is found through the transitions' UNIQUE(episode, request_id) and
        step_count guards: the original already moved the episode on, so the retry conflicts
        and is answered with the stored result, applying nothing twice.
        """
        action_json = action.as_json()
        if record.status == "done" or run_status not in (None, "active"):
            return await self._closed(record, request_id, action_json, run_status)
        result = self._core_step(record, state, action)
        observation = wire_observation(record.id, result.observation)
        grade = _draft(result.grade) if result.done else None
        new_state = result.state.as_json()
        try:
            stored = await repo.record_step(
                self.db,
                episode=record,
                new_state=new_state,
                done=result.done,
                request_id=request_id,
                action=action_json,
                observation=observation,
                reward=result.reward,
                grade=grade,
                run_id=record.run_id,
                previous_observation=previous_observation,
            )
        except repo.StepConflict as exc:
            return await self._conflict(record, action, action_json, request_id, run_status, from_cache, exc)
        self._remember(record, stored, new_state, result.state, grade, observation)
        if stored.done and record.run_id is not None and self.runs is not None:
            try:
                await self.runs.finish_if_complete(record.run_id)  # this step is still shown as during the run
            except DatabaseFault as exc:  # the step is stored: answer it; the run sweep writes the summary
                log.warning("run summary deferred to the sweep run_id=%s: %s", record.run_id, exc.reason)
        meta = self._meta(
            record, step_index=stored.step_index, step_count=stored.step_index, request_id=request_id, replayed=False
        )
        return self._shown(EpisodeResult(record.id, observation, stored.reward, stored.done, meta), record, run_status)

    async def _closed(
        self, record: repo.EpisodeRecord, request_id: str | None, action_json: dict[str, Any], run_status: str | None
    ) -> EpisodeResult:
        """A step on a finished episode (a retry of its last step is answered as stored) or of a run
        that takes no more steps: refused with the domain error that says why."""
        if record.status == "done":
            if request_id is not None:
                await self._same_as_stored(record)  # a cached copy: its id may hold another episode now
                stored = await repo.get_transition_by_request(self.db, record.id, request_id)
                if stored is not None:
                    return self._shown(self._replay(record, stored, action_json), record, run_status)
            raise EpisodeAlreadyFinished(
                f"episode {record.id!r} is finished after {record.step_count} steps; "
                "GET /grader?episode_id=… for its score, or POST /reset for a new episode",
                episode_id=record.id,
            )
        why = " (idle past its TTL)" if run_status == "expired" else ""
        raise RunNotActive(
            f"run {record.run_id!r} is {run_status}{why}; its episodes take no more steps — start a new run with "
            "POST /runs",
            run_id=record.run_id,
            run_status=run_status,
            code=f"run_{run_status}",
        )

    def _core_step(
        self, record: repo.EpisodeRecord, state: core.EpisodeState | None, action: core.Action
    ) -> core.StepResult:
        state = state if state is not None else core.EpisodeState.model_validate(record.state)
        try:
            return core.step(state, action, self.dataset)
        except core.EpisodeFinished as exc:
            raise EpisodeAlreadyFinished(str(exc), episode_id=record.id) from exc
        except core.EnvError as exc:
            raise InvalidRequest(
                f"the action cannot be applied: {exc}", errors=[{"field": "action", "message": str(exc)}]
            ) from exc

    async def _conflict(
        self,
        record: repo.EpisodeRecord,
        action: core.Action,
        action_json: dict[str, Any],
        request_id: str | None,
        run_status: str | None,
        from_cache: bool,
        exc: repo.StepConflict,
    ) -> EpisodeResult:
        """The stored row is not ``record`` any more: another incarnation of the id or another owner (the
        request starts again from the stored row: :class:`_StaleCopy`); a retry (answered as stored); a
        stale copy of ours (applied again to the fresh state, once); or a lost race
        (:class:`~service.errors.StepRaceLost`)."""
        fresh = await self._same_as_stored(record)
        if request_id is not None:
            winner = await repo.get_transition_by_request(self.db, record.id, request_id)
            if winner is not None:
                return self._shown(self._replay(record, winner, action_json), record, run_status)
        current = self.cache.get(record.id)
        if from_cache and (current is None or current.record.version != fresh.version):
            # Our copy was stale: another process stepped this episode. Not a race of this
            # request: apply it to the fresh state (once; a second conflict is a real race).
            self.cache.put(fresh, core.EpisodeState.model_validate(fresh.state))
            return await self._apply(fresh, None, action, request_id, run_status, from_cache=False)
        if fresh.status == "done":
            raise EpisodeAlreadyFinished(
                f"episode {record.id!r} finished in a concurrent step; GET /grader?episode_id=… for its score",
                episode_id=record.id,
            ) from exc
        raise StepRaceLost(
            f"another step on episode {record.id!r} was applied first (it is now at step {fresh.step_count}); "
            "GET /state?episode_id=… and send your next action, or retry with the same request_id",
            episode_id=record.id,
            step_count=fresh.step_count,
        ) from exc

    def _remember(
        self,
        record: repo.EpisodeRecord,
        stored: repo.TransitionRecord,
        new_state: dict[str, Any],
        state: core.EpisodeState,
        grade: repo.GradeDraft | None,
        observation: dict[str, Any],
    ) -> None:
        """What this step left, in the cache: the next step of this episode (or its grade) reads nothing."""
        graded = (
            repo.GradeRecord(
                record.id, grade.score, grade.resolved, grade.breakdown, grade.grader_version, stored.created_at
            )
            if grade
            else None
        )
        moved = repo.EpisodeRecord(  # the row as the step's write left it (dataclasses.replace, spelled out: cheaper)
            id=record.id,
            task_id=record.task_id,
            split=record.split,
            seed=record.seed,
            ticket_id=record.ticket_id,
            run_id=record.run_id,
            status="done" if stored.done else "active",
            step_count=stored.step_index,
            state=new_state,
            version=record.version + 1,
            created_at=record.created_at,
            updated_at=stored.created_at,
            token_sha256=record.token_sha256,
        )
        self.cache.put(moved, state, graded, observation)

    def _replay(
        self, record: repo.EpisodeRecord, stored: repo.TransitionRecord, action_json: dict[str, Any]
    ) -> EpisodeResult:
        if stored.action != action_json:
            raise InvalidRequest(
                f"request_id {stored.request_id!r} was already used for a different action on this episode; "
                "use a new request_id for a new action",
                errors=[
                    {"field": "request_id", "message": "reused with a different action", "type": "idempotency_mismatch"}
                ],
            )
        return EpisodeResult(
            record.id,
            stored.observation,
            stored.reward,
            stored.done,
            self._meta(
                record,
                step_index=stored.step_index,
                step_count=stored.step_index,
                request_id=stored.request_id,
                replayed=True,
            ),
        )

    async def state(
        self, episode_id: str | None, episode_token: str | None = None, run_token: str | None = None
    ) -> dict[str, Any]:
        """``GET /state`` (and the WS state frame and MCP state tool). A run's episode while the run is in
        progress shows only its progress. A test episode shows its progress only to its run's token holder,
        only while the run is active, and nothing to anyone afterwards: which tickets took more steps
        says which needed the customer's answer (issue #21.3)."""
        record = await self._load(episode_id)
        self._check_owner(record, episode_token)
        if record.split == core.HIDDEN_SPLIT and record.run_id is not None and self.runs is not None:
            run = await self.runs.authorized(
                record.run_id, run_token
            )  # RunTokenMissing / RunTokenInvalid without the run's token
            _refuse_if_test_run_over(record, run.status)
        if not (await self._feedback(record)).episode_details:
            return {
                "episode_id": record.id,
                "step_count": record.step_count,
                "episode_status": record.status,
                "done": record.status == "done",
                "task_id": record.task_id,
                "run_id": record.run_id,
            }
        return self._full_state(record)

    @staticmethod
    def _full_state(record: repo.EpisodeRecord) -> dict[str, Any]:
        state = core.EpisodeState.model_validate(record.state)
        return {
            **core.public_state(state),
            "episode_id": record.id,
            "step_count": record.step_count,
            "episode_status": record.status,
            "task_id": record.task_id,
            "split": record.split,
            "seed": record.seed,
            "run_id": record.run_id,
        }

    async def view(self, episode_id: str, episode_token: str | None = None) -> EpisodeView:
        """Everything the episode viewer shows; never a test-split episode, no rewards during a run.
        Run episodes (ids on public run pages) are public; a client-chosen id needs its token."""
        record = await self._load(episode_id)
        self._check_owner(record, episode_token)
        fb = await self._feedback(record)
        if not fb.episode_details:
            raise _private(record)
        state = self._full_state(record)
        first = core.reset(state["task_id"], state["seed"], state["split"], self.dataset)[1]
        steps: list[StepView] = [
            {
                "index": t.step_index,
                "action": t.action,
                "observation": t.observation,
                "reward": t.reward if fb.step_rewards else None,
                "done": t.done,
            }
            for t in await repo.list_transitions(self.db, episode_id)
        ]
        done = state["episode_status"] == "done"
        return {
            "episode_id": episode_id,
            "state": state,
            "ticket_id": state["ticket_id"],
            "ticket_text": first.ticket,
            "instructions": first.instructions,
            "steps": steps,
            "grade": await self.grade(episode_id, episode_token) if done else None,
            "rewards_hidden": not fb.step_rewards,
        }

    async def grade(self, episode_id: str | None, episode_token: str | None = None) -> GraderResponse:
        record = await self._load(episode_id)  # ownership is the stored row's, never a cached copy's
        self._check_owner(record, episode_token)
        if record.split == core.HIDDEN_SPLIT:  # before anything that tells its progress
            raise _private(record)
        cached = self.cache.get(record.id)
        stored = (
            cached.grade  # stored by this process's finishing step: final, a finished episode never changes
            if cached is not None and cached.grade is not None and cached.record.same_incarnation(record)
            else None
        )
        if record.status != "done":
            raise EpisodeNotFinished(
                f"episode {record.id!r} is not finished (step {record.step_count}); keep sending POST /step "
                "until done is true, then ask again",
                episode_id=record.id,
                step_count=record.step_count,
            )
        if not (await self._feedback(record)).episode_score:
            raise _private(record)
        if stored is None:
            stored = await repo.get_grade(self.db, record.id, core.GRADER_VERSION)
        if stored is None:  # graded by an older grader version: grade again and keep both
            draft = _draft(core.grade_episode(core.EpisodeState.model_validate(record.state), self.dataset))
            stored = await repo.save_grade(self.db, record.id, draft)
        breakdown = stored.breakdown
        return GraderResponse(
            episode_id=record.id,
            task_id=record.task_id,
            score=stored.score,
            resolved=stored.resolved,
            grader_version=stored.grader_version,
            components=breakdown.get("components", []),
            clauses=breakdown.get("clauses", []),
            raw=breakdown.get("raw"),
            finished=breakdown.get("finished", True),
            step_count=record.step_count,
            graded_at=stored.created_at.isoformat(),
        )


_PRIVATE_DETAIL = (
    "episode {episode_id!r} is on the test split: no test episode's score, grade, actions or trajectory is ever "
    "served, not even after its run completes — only the run's aggregates (GET /runs/{{run_id}})"
)


def _refuse_if_test_run_over(record: repo.EpisodeRecord, run_status: str | None) -> None:
    """A test episode whose run is no longer active shows nothing to anyone, its own agent included: not
    its state, not a resumed observation, not a replayed step — not even how many steps it took."""
    if record.split != core.HIDDEN_SPLIT or run_status in (None, "active"):
        return
    if run_status == "expired":
        raise RunNotActive(
            f"run {record.run_id!r} expired; its episodes take no more steps and show nothing — start a new run "
            "with POST /runs",
            run_id=record.run_id,
            run_status=run_status,
            code="run_expired",
        )
    raise TestResultsPrivate(
        f"episode {record.id!r} is on the test split and its run {record.run_id!r} is {run_status}: nothing per "
        "episode of a test run is shown once the run is over, step counts included — GET /runs/{run_id} shows "
        "what the run published",
        episode_id=record.id,
        run_id=record.run_id,
    )


def _private(record: repo.EpisodeRecord) -> TestResultsPrivate | RunResultsPending:
    """Why this episode's results are not shown: the test split (never), or its run is in progress."""
    if record.split == core.HIDDEN_SPLIT or record.run_id is None:
        return TestResultsPrivate(_PRIVATE_DETAIL.format(episode_id=record.id), episode_id=record.id)
    return RunResultsPending(
        f"episode {record.id!r} belongs to run {record.run_id!r}, which is still in progress: no episode of a run "
        "shows its score, grade, state or page until the run completes (so a dev run plays like a test run); "
        f"finish the run, then ask again — GET /runs/{record.run_id} shows its progress",
        episode_id=record.id,
        run_id=record.run_id,
        code="run_in_progress",
    )


def _draft(grade: core.Grade) -> repo.GradeDraft:
    return repo.GradeDraft(grade.score, grade.resolved, grade.model_dump(mode="json"), grade.grader_version)
