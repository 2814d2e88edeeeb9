"""WebSocket ``/ws``: one session per connection, OpenEnv frames, every step persisted.

Frames (client → server): ``reset`` (``data`` = reset kwargs; ``{"episode_id": E, "resume": true}``
re-attaches to a stored episode), ``step`` (``data`` = the action), ``state``, ``close``, ``mcp``.
Errors: INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR, EXECUTION_ERROR keep the connection open;
CAPACITY_REACHED, FACTORY_ERROR, SESSION_ERROR (also sent when an idle session is reaped) close it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

import msgspec
from litestar import WebSocket, websocket
from litestar.datastructures import State
from litestar.di import NamedDependency
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import text

from service.api.episodes import EpisodeService, ResetParams, validation_errors
from service.api.mcp import McpSession, McpSessions, handle_jsonrpc, mcp_style_step
from service.api.problems import Problem
from service.db.errors import DatabaseFault
from service.settings import Settings

log = logging.getLogger("service.ws")


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetFrame(_Frame):
    type: Literal["reset"]
    data: dict[str, Any] = Field(default_factory=dict)


class StepFrame(_Frame):
    type: Literal["step"]
    data: dict[str, Any]


class StateFrame(_Frame):
    type: Literal["state"]


class CloseFrame(_Frame):
    type: Literal["close"]


class McpFrame(_Frame):
    type: Literal["mcp"]
    data: dict[str, Any]


FRAMES: dict[str, type[_Frame]] = {
    "reset": ResetFrame,
    "step": StepFrame,
    "state": StateFrame,
    "close": CloseFrame,
    "mcp": McpFrame,
}


class SessionCapacity(Exception):
    def __init__(self, active: int, maximum: int) -> None:
        super().__init__(f"server at capacity: {active}/{maximum} sessions; retry later")
        self.active, self.maximum = active, maximum


class FactoryFailed(Exception):
    pass


class WsSessions:
    """Counts live sessions against ``MAX_CONCURRENT_ENVS`` (one per app, event-loop confined)."""

    def __init__(self, max_sessions: int, episodes: EpisodeService) -> None:
        self.max_sessions = max_sessions
        self.active = 0
        self.episodes = episodes

    def acquire(self) -> None:
        if self.active >= self.max_sessions:
            raise SessionCapacity(self.active, self.max_sessions)
        self.active += 1

    def release(self) -> None:
        self.active -= 1

    async def open_session(self) -> McpSession:
        """Make sure the session can work: its episodes live in the database, so reach it once."""
        try:
            await self.episodes.db.read(lambda conn: conn.execute(text("SELECT 1")))
        except Exception as exc:  # noqa: BLE001 - any failure here means no session can be served
            raise FactoryFailed(f"cannot open a session: the episode store is unavailable ({type(exc).__name__})") from exc
        return McpSession()


_encode = msgspec.json.Encoder().encode


def _frame(kind: str, data: Any) -> str:
    return _encode({"type": kind, "data": data}).decode()


def _error(message: str, code: str, **extra: Any) -> str:
    return _frame("error", {"message": message, "code": code, **extra})


async def _receive_text(socket: WebSocket[Any, Any, Any], timeout: float) -> str | None:
    """The next text frame, or None when the client went away. Raises TimeoutError when idle."""
    while True:
        async with asyncio.timeout(timeout):
            event = await socket.receive()
        if event["type"] == "websocket.disconnect":
            return None
        if event.get("text") is not None:
            return event["text"]
        if event.get("bytes") is not None:
            return event["bytes"].decode("utf-8", errors="replace")


async def _handle(frame: dict[str, Any], session: McpSession, episodes: EpisodeService) -> str | None:
    """Answer one decoded frame; returns the reply text, or None for ``close``."""
    kind = frame.get("type")
    model = FRAMES.get(kind) if isinstance(kind, str) else None
    if model is None:
        return _error(f"Unknown message type: {kind}; use reset, step, state, close or mcp", "UNKNOWN_TYPE")
    try:
        msg = model.model_validate(frame)
    except ValidationError as exc:
        return _error("Invalid message", "VALIDATION_ERROR", errors=validation_errors(exc))
    try:
        if isinstance(msg, CloseFrame):
            return None
        if isinstance(msg, ResetFrame):
            try:
                params = ResetParams(**msg.data)
            except ValidationError as exc:
                return _error("Invalid reset parameters", "VALIDATION_ERROR", errors=validation_errors(exc, "data"))
            params = session.with_secrets(params)
            result = await episodes.reset(params)
            session.own(result, params)
            return _frame("observation", result.wire())
        if isinstance(msg, StepFrame):
            answered = await mcp_style_step(msg.data, episodes, session)  # openenv-core 0.3.0's MCPToolClient
            if answered is not None:
                return _frame("observation", answered)
            if session.episode_id is None:
                return _error("no episode in this session: send a reset frame first", "EXECUTION_ERROR")
            result = await episodes.step(
                session.episode_id, msg.data, run_token=session.run_token, episode_token=session.episode_token
            )
            return _frame("observation", result.wire())
        if isinstance(msg, StateFrame):
            if session.episode_id is None:
                data: dict[str, Any] = {"episode_id": None, "step_count": 0}
            else:
                data = await episodes.state(session.episode_id, session.episode_token)
            return _frame("state", data)
        assert isinstance(msg, McpFrame)
        return _frame("mcp", await handle_jsonrpc(msg.data, episodes, session))
    except Problem as exc:
        if exc.status == 422:
            return _error(exc.detail, "VALIDATION_ERROR", errors=exc.extra.get("errors", []))
        return _error(exc.detail, "EXECUTION_ERROR", status=exc.status)


@websocket("/ws")
async def ws_endpoint(socket: WebSocket[Any, Any, Any], state: State, settings: NamedDependency[Settings]) -> None:
    sessions: WsSessions = state.ws_sessions
    episodes: EpisodeService = state.episodes
    await socket.accept()
    acquired = False
    try:
        sessions.acquire()
        acquired = True
        session = await sessions.open_session()
        requested = socket.query_params.get("session_id")
        if requested:  # MCPToolClient: this WebSocket shares an HTTP MCP session (openenv/session/create)
            mcp_sessions: McpSessions = state.mcp_sessions
            shared = mcp_sessions.get(requested)
            if shared is None:
                await socket.send_text(_error(f"Unknown session_id: {requested}; create one with POST /mcp "
                                              "openenv/session/create", "SESSION_ERROR"))
                return
            session = shared
        while True:
            try:
                raw = await _receive_text(socket, settings.ws_idle_timeout_s)
            except TimeoutError:
                log.info("ws session reaped after %.0fs idle episode_id=%s", settings.ws_idle_timeout_s, session.episode_id)
                await socket.send_text(
                    _error(
                        f"session idle for {settings.ws_idle_timeout_s:g}s and closed; reconnect and send "
                        'a reset frame with {"episode_id": ..., "resume": true} to continue',
                        "SESSION_ERROR",
                    )
                )
                break
            if raw is None:
                return
            if len(raw) > settings.max_body_bytes:
                await socket.send_text(
                    _error(f"frame of {len(raw)} bytes is over the {settings.max_body_bytes}-byte limit; send less",
                           "VALIDATION_ERROR", errors=[{"field": "frame", "message": "too large"}])
                )
                continue
            try:
                frame = msgspec.json.decode(raw)
            except (msgspec.DecodeError, RecursionError) as exc:
                await socket.send_text(_error(f"Invalid JSON: {exc}", "INVALID_JSON"))
                continue
            if not isinstance(frame, dict):
                await socket.send_text(_error("a frame must be a JSON object with a `type` key", "VALIDATION_ERROR", errors=[]))
                continue
            try:
                reply = await _handle(frame, session, episodes)
            except DatabaseFault as exc:  # an outage: one log line per frame, a clear answer, the session stays
                episodes.db.faults.failure(log, f"ws frame episode_id={session.episode_id}", exc)
                reply = _error(exc.detail, "EXECUTION_ERROR", status=exc.status, retry_after_s=exc.retry_after_s)
            except Exception as exc:  # noqa: BLE001 - one bad frame must not kill the session
                log.exception("ws frame failed episode_id=%s", session.episode_id)
                reply = _error(f"internal error while handling the frame ({type(exc).__name__}); retry", "EXECUTION_ERROR")
            if reply is None:
                break
            await socket.send_text(reply)
    except SessionCapacity as exc:
        await socket.send_text(
            _error(str(exc), "CAPACITY_REACHED", active_sessions=exc.active, max_sessions=exc.maximum)
        )
    except FactoryFailed as exc:
        await socket.send_text(_error(str(exc), "FACTORY_ERROR", factory_name="episode_store"))
    except Exception as exc:  # noqa: BLE001
        if type(exc).__name__ == "WebSocketDisconnect":
            return
        log.exception("ws session failed")
        try:
            await socket.send_text(_error(f"session failed: {type(exc).__name__}", "SESSION_ERROR"))
        except Exception:  # noqa: BLE001 - the socket may already be gone
            pass
    finally:
        if acquired:
            sessions.release()
        try:
            await socket.close()
        except Exception:  # noqa: BLE001 - already closed by the peer
            pass
