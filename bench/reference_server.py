"""The peer: openenv 0.10's own server (``create_app``) wrapping our core, in memory.

``SupportEnvironment`` is a plain OpenEnv ``Environment`` over ``service.env.reset/step``: no
database, no durability, one instance per WebSocket session, stepped in openenv's per-session
thread executor exactly as any synchronous OpenEnv environment is. Typed ``Action``/``Observation``
classes are our core's fields on openenv's base models, so openenv validates and serializes them
itself. ``GET /grader?episode_id=`` (added on the FastAPI app) grades a finished episode from
memory, so the peer's workload is the same reset → steps → grader as ours.

Run: ``python -m bench.reference_server --port 8002``
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections import OrderedDict
from typing import Any

from fastapi import HTTPException
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action as OpenEnvAction
from openenv.core.env_server.types import Observation as OpenEnvObservation
from openenv.core.env_server.types import State as OpenEnvState
from pydantic import create_model

from service import env as core

MAX_SESSIONS = 1024
MAX_FINISHED = 10_000  # finished episodes kept for /grader (oldest dropped first)


def _fields(model: Any, skip: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    return {name: (f.annotation, f) for name, f in model.model_fields.items() if name not in skip}


SupportAction = create_model("SupportAction", __base__=OpenEnvAction, **_fields(core.Action))
SupportObservation = create_model(
    "SupportObservation",
    __base__=OpenEnvObservation,
    episode_id=(str | None, None),
    **_fields(core.Observation, skip={"reward", "done"}),
)

_finished: OrderedDict[str, core.EpisodeState] = OrderedDict()
_finished_lock = threading.Lock()  # steps run in openenv's executor threads


class SupportEnvironment(Environment):
    """One support ticket per episode; the state lives in this object only."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._episode_id: str | None = None
        self._state: core.EpisodeState | None = None

    def _observation(self, obs: core.Observation, reward: float | None, done: bool) -> Any:
        fields = {name: getattr(obs, name) for name in core.Observation.model_fields if name not in ("reward", "done")}
        meta = {"episode_id": self._episode_id, "step_count": self._state.step_count if self._state else 0}
        # Our core already validated the observation; build openenv's type without validating twice.
        return SupportObservation.model_construct(
            **fields, episode_id=self._episode_id, reward=reward, done=done, metadata=meta
        )

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        seed = seed if seed is not None else secrets.randbelow(2**31)
        task_id = kwargs.get("task_id") or list(core.TASKS)[seed % len(core.TASKS)]
        self._episode_id = episode_id or uuid.uuid4().hex
        self._state, obs = core.reset(task_id, seed, kwargs.get("split") or "train")
        return self._observation(obs, None, self._state.done)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if self._state is None:
            raise RuntimeError("no episode in this session: send a reset frame first")
        result = core.step(self._state, core.Action.model_validate(action.model_dump(exclude={"metadata"})))
        self._state = result.state
        if result.done and self._episode_id is not None:
            with _finished_lock:
                _finished[self._episode_id] = result.state
                while len(_finished) > MAX_FINISHED:
                    _finished.popitem(last=False)
        return self._observation(result.observation, result.reward, result.done)

    @property
    def state(self) -> OpenEnvState:
        return OpenEnvState(episode_id=self._episode_id, step_count=self._state.step_count if self._state else 0)


def create_reference_app() -> Any:
    app = create_app(
        SupportEnvironment,
        SupportAction,
        SupportObservation,
        env_name="ecomm-support-env-reference",
        max_concurrent_envs=MAX_SESSIONS,
    )

    @app.get("/grader")
    def grader(episode_id: str) -> dict[str, Any]:
        with _finished_lock:
            state = _finished.get(episode_id)
        if state is None:
            raise HTTPException(404, f"no finished episode {episode_id!r}")
        grade = core.grade_episode(state)
        return {"episode_id": episode_id, "score": grade.score, **grade.model_dump(mode="json")}

    return app


if __name__ == "__main__":
    from bench.serving import serve

    serve(create_reference_app(), "reference OpenEnv server (in memory) over our core")
