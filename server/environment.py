"""This environment as an OpenEnv ``Environment``: ``reset``/``step`` of the pure core, one ticket per
episode, the state in the object (no database, no durability). It is what openenv's own server runs
(``openenv.core.env_server.create_app(SupportEnvironment.factory(...), SupportAction, SupportObservation)``):
the benchmark's in-memory peer (``bench.reference_server``). The persisted service
(``service.app``) is this project's own server over the same core."""

from __future__ import annotations

import secrets
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from openenv.core.env_server.interfaces import Environment

from server.models import SupportAction, SupportObservation, SupportState
from service import env as core

MAX_FINISHED = 10_000  # finished episodes kept for grading (oldest dropped first)


class FinishedEpisodes:
    """The final states of finished episodes, shared by every session of one server (steps run in
    openenv's executor threads, hence the lock), bounded."""

    def __init__(self, capacity: int = MAX_FINISHED) -> None:
        self.capacity = capacity
        self._states: OrderedDict[str, core.EpisodeState] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, episode_id: str, state: core.EpisodeState) -> None:
        with self._lock:
            self._states[episode_id] = state
            while len(self._states) > self.capacity:
                self._states.popitem(last=False)

    def get(self, episode_id: str) -> core.EpisodeState | None:
        with self._lock:
            return self._states.get(episode_id)


class SupportEnvironment(Environment):
    """One support ticket per episode; the state lives in this object only."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, finished: FinishedEpisodes | None = None) -> None:
        super().__init__()
        self.finished = finished if finished is not None else FinishedEpisodes()
        self._episode_id: str | None = None
        self._state: core.EpisodeState | None = None

    @classmethod
    def factory(cls, finished: FinishedEpisodes) -> Callable[[], SupportEnvironment]:
        """What openenv's ``create_app`` calls once per session: environments sharing ``finished``."""
        return lambda: cls(finished)

    def _observation(self, obs: core.Observation, reward: float | None, done: bool) -> Any:
        fields = {name: getattr(obs, name) for name in core.Observation.model_fields if name not in ("reward", "done")}
        meta = {"episode_id": self._episode_id, "step_count": self._state.step_count if self._state else 0}
        # Our core already validated the observation; build openenv's type without validating twice.
        return SupportObservation.model_construct(
            **fields, episode_id=self._episode_id, reward=reward, done=done, metadata=meta
        )

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        seed = seed if seed is not None else secrets.randbelow(core.MAX_SEED + 1)
        task = core.choose_task(kwargs.get("task_id") or None, kwargs.get("difficulty") or None, seed)
        self._episode_id = episode_id or uuid.uuid4().hex
        self._state, obs = core.reset(task.id, seed, kwargs.get("split") or core.DEFAULT_SPLIT)
        return self._observation(obs, None, self._state.done)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if self._state is None:
            raise RuntimeError("no episode in this session: send a reset frame first")
        result = core.step(self._state, core.Action.model_validate(action.model_dump(exclude={"metadata"})))
        self._state = result.state
        if result.done and self._episode_id is not None:
            self.finished.put(self._episode_id, result.state)
        return self._observation(result.observation, result.reward, result.done)

    @property
    def state(self) -> SupportState:
        return SupportState(episode_id=self._episode_id, step_count=self._state.step_count if self._state else 0)


__all__ = ["FinishedEpisodes", "SupportAction", "SupportEnvironment", "SupportObservation"]
