"""The ceiling: Litestar routes that do no work, served like the service.

``POST /reset``, ``POST /step`` and ``GET /grader`` parse the request as the real routes do
(JSON body / query) and answer with one canned, representative observation (bytes prepared at
start-up); ``WS /ws`` answers every text frame with the same canned observation frame. Whatever
throughput this reaches is the most uvicorn + Litestar + the load generator allow on this machine.

Run: ``python -m bench.noop_app --port 8001``
"""

from __future__ import annotations

import json
from typing import Any

from litestar import Litestar, MediaType, Response, WebSocket, get, post, websocket
from litestar.params import JSONBody

from service import env as core


def _canned_result() -> dict[str, Any]:
    """A real first observation of a real task, in the wire shape of a step result."""
    task_id = next(iter(core.TASKS))
    _, observation = core.reset(task_id, 0, "train")
    body = observation.model_dump(mode="json", exclude={"reward", "done"})
    body["episode_id"] = "0" * 32
    return {"observation": body, "reward": 0.0, "done": False, "metadata": {"episode_id": "0" * 32, "step_count": 1}}


CANNED = _canned_result()
CANNED_HTTP = json.dumps(CANNED).encode()
CANNED_WS = json.dumps({"type": "observation", "data": CANNED})
CANNED_GRADE = json.dumps({"episode_id": "0" * 32, "score": 1.0, "components": [], "clauses": []}).encode()


@get("/health")
async def health() -> dict[str, str]:
    return {"status": "healthy"}


@post("/reset", status_code=200)
async def reset(data: JSONBody[dict[str, Any]]) -> Response[bytes]:
    return Response(CANNED_HTTP, media_type=MediaType.JSON)


@post("/step", status_code=200)
async def step(data: JSONBody[dict[str, Any]]) -> Response[bytes]:
    return Response(CANNED_HTTP, media_type=MediaType.JSON)


@get("/grader")
async def grader(episode_id: str | None = None) -> Response[bytes]:
    return Response(CANNED_GRADE, media_type=MediaType.JSON)


@websocket("/ws")
async def ws(socket: WebSocket[Any, Any, Any]) -> None:
    await socket.accept()
    while True:
        event = await socket.receive()
        if event["type"] == "websocket.disconnect":
            return
        text = event.get("text")
        if isinstance(text, str) and '"close"' in text and json.loads(text).get("type") == "close":
            await socket.close()
            return
        await socket.send_text(CANNED_WS)


def create_noop_app() -> Litestar:
    return Litestar(route_handlers=[health, reset, step, grader, ws], openapi_config=None)


if __name__ == "__main__":
    from bench.serving import serve

    serve(create_noop_app(), "no-op ceiling server")
