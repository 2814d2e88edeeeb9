"""Episodes played to their end, concurrently, each printed as one contiguous log block.

Every agent turn is one ``[STEP]`` — also a turn whose answer could not be parsed or whose action
the service rejected (reward 0.00, the reason in ``error``), so ``steps`` and the reward list
always match the block's ``[STEP]`` lines. ``success`` means the episode is *resolved* — every
required check of its task passed — as the server reports it (the final observation's
``resolved``, else ``GET /grader``'s); a server that reports no verdict is judged by the old rule,
its score ≥ ``SUCCESS_THRESHOLD``.

While a server-side run is in progress the server reveals no episode's verdict (an agent could
carry one trial's verdict into the next). A run's blocks are therefore held until the run
completes and printed then with the verdicts the run publishes (:func:`settle`); an episode whose
verdict stays withheld (the test split, or a run left unfinished) ends ``success=false`` with its
score unknown, and stderr says so.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from client.agents import EpisodeAgent, Turn
from client.llm import FatalAgentError
from client.logformat import emit, end_line, one_line, start_line, step_line
from client.wire import EnvClient, ServiceError

log = logging.getLogger("inference")

# The old meaning of success, kept for servers that report no "resolved" verdict.
SUCCESS_THRESHOLD = 0.5
# Consecutive turns without an accepted action (unparseable answer, action rejected with 422)
# before the runner plays the task family's fallback action for the model. A lookup (on the store
# desk, a policy search) decides nothing, earns nothing and costs nothing, so the fallback never
# answers the ticket on the model's behalf; it only moves the episode towards its step limit, so a
# broken model cannot loop forever.
MAX_INVALID_TURNS = 3
FALLBACK_ACTION: dict[str, Any] = {"lookup": "policy"}
FALLBACK_ACTIONS: dict[str, dict[str, Any]] = {
    "store": {"tool": "search_policy", "arguments": {"query": "store policy"}},  # takes tool calls only
}


def fallback_action(family: str | None) -> dict[str, Any]:
    """The fallback action of a task family (``GET /tasks``' ``family``)."""
    return dict(FALLBACK_ACTIONS.get(family or "", FALLBACK_ACTION))


Sink = Callable[[str], None]


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
    # A finished episode whose verdict the server still withholds: its START/STEP lines and rewards,
    # printed by settle() once the verdict is known (or known to stay withheld).
    pending: list[str] | None = None
    rewards: list[float] = field(default_factory=list)


class Deadline:
    def __init__(self, budget_s: float | None) -> None:
        self.at = time.monotonic() + budget_s if budget_s else math.inf

    def passed(self) -> bool:
        return time.monotonic() >= self.at


class DeadlineReached(RuntimeError):
    pass


@dataclass
class _Episode:
    """What play_episode accumulates: the block's lines, the rewards, the latest observation."""

    lines: list[str]
    obs: dict[str, Any]
    rewards: list[float] = field(default_factory=list)
    invalid_streak: int = 0

    def log_step(self, action: dict[str, Any] | None, reward: float, done: bool, error: str | None) -> None:
        self.rewards.append(reward)
        self.lines.append(step_line(len(self.rewards), action, reward, done, error))


async def _turn(
    env: EnvClient, agent: EpisodeAgent, start: Started, ep: _Episode, fallback: dict[str, Any] | None = None
) -> bool:
    """One agent turn (at most one step); True when the episode is done."""
    turn: Turn = await agent.act(ep.obs)
    action, note = turn.action, turn.error
    if action is None:
        ep.invalid_streak += 1
        if ep.invalid_streak < MAX_INVALID_TURNS:
            ep.log_step(None, 0.0, False, note)
            return False
        action = dict(fallback or FALLBACK_ACTION)
        note = f"{note}; fallback action after {ep.invalid_streak} turns without a valid action"
    try:
        result = await env.step(start.episode_id, action)
    except ServiceError as exc:
        if exc.status != 422:
            raise
        # The service rejected the action; the episode did not advance. Let the model try again.
        ep.invalid_streak += 1
        if ep.invalid_streak > 2 * MAX_INVALID_TURNS:
            raise RuntimeError(f"gave up after {ep.invalid_streak} rejected actions: {exc.detail}") from exc
        ep.log_step(action, 0.0, False, f"action rejected: {exc.detail}")
        agent.observe_result(action, True, exc.detail)
        return False
    ep.invalid_streak = 0
    done = bool(result.get("done"))
    ep.obs = result["observation"]
    # as sent: 0.0 while a ranked run withholds rewards
    ep.log_step(action, float(result.get("reward") or 0.0), done, ep.obs.get("last_action_error") or note)
    agent.observe_result(action, False, ep.obs.get("last_action_error"))
    return done


async def play_episode(
    env: EnvClient,
    agent: EpisodeAgent,
    start: Started,
    benchmark: str,
    model: str,
    deadline: Deadline,
    sink: Sink = emit,
    defer: bool = False,
    *,
    fallback: dict[str, Any] | None = None,
) -> Outcome:
    """Play one episode to its end; its START/STEP/END lines go to ``sink`` together, as one block,
    when it ends — concurrent episodes never interleave. With ``defer``, a finished episode whose
    verdict the server withholds is not printed: its outcome is ``pending`` (see :func:`settle`).
    Never raises (except cancellation, after printing the block): failures end the episode with
    success=false. ``fallback``: the action played for a model that produced none for a while (the task
    family's, :func:`fallback_action`)."""
    ep = _Episode([start_line(start.task_id, benchmark, model)], start.observation)
    verdict: tuple[float, bool] | None = None
    finished, failure = start.done, None
    try:
        done = start.done
        while not done:
            if deadline.passed():
                raise DeadlineReached("time budget exhausted; the episode was left unfinished (resumable)")
            done = await _turn(env, agent, start, ep, fallback)
        finished = True
        verdict = await _verdict(env, start.episode_id, ep.obs)
    except (FatalAgentError, asyncio.CancelledError):
        failure = "aborted"
        raise
    except Exception as exc:  # noqa: BLE001 - an episode failure must not take the run down
        failure = f"{type(exc).__name__}: {exc}"
        log.warning("episode %s (%s) failed: %s", start.episode_id, start.task_id, one_line(failure, 300))
    finally:
        ok = finished and failure is None
        outcome = Outcome(
            start.task_id, start.seed, start.trial, start.episode_id, 0.0, False, ok, failure, rewards=ep.rewards
        )
        if ok and verdict is None and defer:
            outcome.pending = ep.lines
        else:
            # withheld and not deferred: never a success, the score is the clipped reward sum
            score, success = verdict if verdict is not None else (min(max(sum(ep.rewards), 0.0), 1.0), False)
            _print(outcome, ep.lines, score, success and ok, sink)
    return outcome


def _print(outcome: Outcome, lines: list[str], score: float, success: bool, sink: Sink) -> None:
    outcome.score, outcome.success = score, success
    lines.append(end_line(success, len(outcome.rewards), score, outcome.rewards))
    for line in lines:  # no await in between: the block reaches stdout whole
        sink(line)


def settle(outcomes: list[Outcome], verdicts: dict[str, tuple[float, bool]], sink: Sink = emit) -> int:
    """Print every pending block with its verdict from ``verdicts`` (episode id → (score, resolved),
    what a completed run publishes); blocks without one end ``success=false``, score unknown (0).
    Returns how many stayed withheld."""
    withheld = 0
    for outcome in outcomes:
        if outcome.pending is None:
            continue
        known = verdicts.get(outcome.episode_id or "")
        withheld += known is None
        score, success = known if known is not None else (0.0, False)
        _print(outcome, outcome.pending, score, success, sink)
        outcome.pending = None
    return withheld


async def _verdict(env: EnvClient, episode_id: str, final_obs: dict[str, Any]) -> tuple[float, bool] | None:
    """(score, resolved) of a finished episode, from the best source the server offers: the final
    observation (``final: true`` with ``score`` and ``resolved``), else ``GET /grader``; a server
    that reports no ``resolved`` verdict is judged by the old rule (score ≥ SUCCESS_THRESHOLD).
    None: the server withholds the score."""
    score: Any = None
    resolved: Any = None
    if final_obs.get("final") is True:
        score, resolved = final_obs.get("score"), final_obs.get("resolved")
    if score is None or resolved is None:
        graded = await env.grade(episode_id) or {}
        score = graded.get("score") if score is None else score
        resolved = graded.get("resolved") if resolved is None else resolved
    if not isinstance(score, (int, float)) or isinstance(score, bool):
        return None
    if isinstance(resolved, bool):
        return float(score), resolved
    return float(score), float(score) >= SUCCESS_THRESHOLD


class EpisodeSource(Protocol):
    async def next(self, env: EnvClient) -> Started | None: ...


@dataclass
class DirectSource:
    """Plain episodes, chosen client-side: (task_id, seed, trial) entries played in order."""

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
    """A progress line on stderr (redrawn in place on a terminal, a line per 10% otherwise). The mean
    is over the episodes whose score is known: in a run none is until it completes, and the line says
    so; :meth:`settled` then shows the run's real mean."""

    def __init__(self, total: int | None, enabled: bool = True) -> None:
        self.total, self.done, self.failed = total, 0, 0
        self.scores: list[float] = []
        self.tty = sys.stderr.isatty()
        self.enabled = enabled
        self._last_decile = -1

    def _text(self) -> str:
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        mean = (
            f"mean score {sum(self.scores) / len(self.scores):.3f}"
            if self.scores
            else "scores withheld until the run completes"
        )
        return (
            f"[{'#' * int(frac * 30):<30}] {self.done}/{self.total if self.total else '?'} episodes  "
            f"{mean}  failed {self.failed}"
        )

    def update(self, outcome: Outcome) -> None:
        self.done += 1
        if outcome.pending is None:  # a held block's score is not known yet
            self.scores.append(outcome.score)
        self.failed += not outcome.finished
        total = self.total or self.done
        frac = min(self.done / total, 1.0) if total else 1.0
        if not self.enabled:
            return
        if self.tty:
            sys.stderr.write("\r" + self._text())
            sys.stderr.flush()
        elif int(frac * 10) != self._last_decile:
            self._last_decile = int(frac * 10)
            sys.stderr.write(self._text() + "\n")

    def settled(self, outcomes: list[Outcome]) -> None:
        """The final line once the run's verdicts are printed: the mean of every score shown."""
        held = len(self.scores) < len(outcomes)
        self.scores = [o.score for o in outcomes]
        if self.enabled and held and outcomes:
            sys.stderr.write(self._text() + "  (the run's verdicts)\n")

    def close(self) -> None:
        if self.tty and self.done and self.enabled:
            sys.stderr.write("\n")


AgentFactory = Callable[[Started], EpisodeAgent]
AgentResources = Callable[[], Awaitable[tuple[AgentFactory, Callable[[], Awaitable[None]]]]]


@dataclass
class Workers:
    """How the episodes of a source are played: ``concurrency`` workers, each with its own service
    client and agent resources, until the source is empty, ``max_episodes`` have started, or the
    deadline passes."""

    make_env: Callable[[], EnvClient]
    make_agent: AgentResources
    concurrency: int
    max_episodes: int | None
    benchmark: str
    model: str
    deadline: Deadline
    progress: Progress
    sink: Sink = emit
    defer: bool = False  # a run's episodes: verdicts come when the run completes (play_episode)
    families: dict[str, str] = field(default_factory=dict)  # task id -> family (GET /tasks): the fallback action
    outcomes: list[Outcome] = field(default_factory=list)
    errors: list[ServiceError] = field(default_factory=list)
    fatal: list[BaseException] = field(default_factory=list)
    claimed: int = 0
    rate_limited: int = 0  # calls the service answered 429 (each retried after its Retry-After)

    async def _claim(self, source: EpisodeSource, env: EnvClient) -> Started | None:
        if self.max_episodes is not None and self.claimed >= self.max_episodes:
            return None
        self.claimed += 1
        try:
            start = await source.next(env)
        except ServiceError as exc:
            log.error("could not start an episode (this worker stops): %s", exc)
            self.errors.append(exc)
            start = None
        if start is None:
            self.claimed -= 1
        return start

    async def _worker(self, source: EpisodeSource) -> None:
        env = self.make_env()
        factory, close_agent = await self.make_agent()
        try:
            while not self.fatal and not self.deadline.passed():
                start = await self._claim(source, env)
                if start is None:
                    return
                outcome = await play_episode(
                    env,
                    factory(start),
                    start,
                    self.benchmark,
                    self.model,
                    self.deadline,
                    self.sink,
                    self.defer,
                    fallback=fallback_action(self.families.get(start.task_id)),
                )
                self.outcomes.append(outcome)
                self.progress.update(outcome)
        except FatalAgentError as exc:
            self.fatal.append(exc)
        finally:
            self.rate_limited += env.rate_limited
            await close_agent()
            await env.aclose()

    async def play(self, source: EpisodeSource) -> tuple[list[Outcome], int]:
        """Every episode's outcome, and how many episodes could not be started."""
        results = await asyncio.gather(*(self._worker(source) for _ in range(self.concurrency)), return_exceptions=True)
        self.progress.close()
        self.fatal += [r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
        if self.fatal:
            raise self.fatal[0]
        if self.errors and not self.outcomes:
            raise self.errors[0]
        return self.outcomes, len(self.errors)
