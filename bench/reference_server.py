"""The peer: openenv 0.10's own server (``create_app``) running this environment's OpenEnv
``Environment`` (``server.environment.SupportEnvironment``), in memory.

No database, no durability, one environment per WebSocket session, stepped in openenv's
per-session thread executor exactly as any synchronous OpenEnv environment is; openenv validates
and serialises the typed ``SupportAction``/``SupportObservation`` itself. ``GET /grader?episode_id=``
(added on the FastAPI app) grades a finished episode from memory, so the peer's workload is the
same reset → steps → grader as ours.

Run: ``python -m bench.reference_server --port 8002``
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException
from openenv.core.env_server.http_server import create_app

from server.environment import FinishedEpisodes, SupportAction, SupportEnvironment, SupportObservation
from service import env as core

MAX_SESSIONS = 1024


def create_reference_app() -> Any:
    finished = FinishedEpisodes()
    app = create_app(
        SupportEnvironment.factory(finished),
        SupportAction,
        SupportObservation,
        env_name="ecomm-support-env-reference",
        max_concurrent_envs=MAX_SESSIONS,
    )

    @app.get("/grader")
    def grader(episode_id: str) -> dict[str, Any]:
        state = finished.get(episode_id)
        if state is None:
            raise HTTPException(404, f"no finished episode {episode_id!r}")
        grade = core.grade_episode(state)
        return {"episode_id": episode_id, "score": grade.score, **grade.model_dump(mode="json")}

    return app


if __name__ == "__main__":
    from bench.serving import serve

    serve(create_reference_app(), "reference OpenEnv server (in memory) over our core")
