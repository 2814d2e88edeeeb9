"""WebSocket ``/ws``: one session per connection, OpenEnv frames, every step persisted.

Frames (client → server): ``reset`` (``data`` = reset kwargs; ``{"episode_id": E, "resume": true}``
re-attaches to a stored episode), ``step`` (``data`` = the action), ``state``, ``close``, ``mcp``.
Errors: INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR, EXECUTION_ERROR keep the connection open;
CAPACITY_REACHED (also a handshake over the address's budget, with ``status: 429``), FACTORY_ERROR,
SESSION_ERROR (also sent when an idle session is reaped) close it. Only a reset or step that succeeded
keeps a session alive. With ``?session_id=`` the socket shares an HTTP MCP session (stored in the
database): it is read before and written after each frame, so HTTP tool calls and the socket agree.
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

from service.db.errors import DatabaseFault
from service.domain.episodes.mcp import (
    McpSession,
    McpSessions,
    handle_jsonrpc,
    mcp_style_activity,
    mcp_style_step,
)
from service.domain.episodes.schemas import ResetParams
from service.domain.episodes.services import EpisodeService
from service.lib.decoding import BodyNotJson, UnstorableText, decode_json, validation_errors
from service.lib.limits import Client, ClientAddresses, FrameRate
from service.lib.problems import Problem
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
    def __init__(self, active: int, maximum: int, per_client: bool = False, reserved: int = 0) -> None:
        if per_client:
            message = (
                f"this client already holds {active}/{maximum} sessions (WS_MAX_SESSIONS_PER_CLIENT); "
                "close one, or play several episodes one after another on one connection"
            )
        elif reserved:
            message = (
                f"server nearly at capacity: {active}/{maximum} sessions, the last {reserved} kept for clients "
                "that hold none yet (WS_RESERVED_SESSIONS); close one of yours or retry later"
            )
        else:
            message = f"server at capacity: {active}/{maximum} sessions; retry later"
        super().__init__(message)
        self.active, self.maximum = active, maximum


class FactoryFailed(Exception):
    pass


class WsSessions:
    """Counts live sessions against ``MAX_CONCURRENT_ENVS`` and ``WS_MAX_SESSIONS_PER_CLIENT`` (one per
    app, event-loop confined), keeps the last ``reserved`` slots for clients holding none, and holds
    the per-address budget of handshakes and frames. Exempt clients (loopback) have no per-client cap."""

    def __init__(
        self, max_sessions: int, episodes: EpisodeService, per_client: int = 0, frames_per_s: int = 0, reserved: int = 0
    ) -> None:
        self.max_sessions = max_sessions
        self.per_client = per_client
        # never more than an eighth of the slots: a small server still serves several sessions per client
        self.reserved = min(reserved, max_sessions // 8)
        self.active = 0
        self.by_client: dict[str, int] = {}
        self.frame_rate = FrameRate(frames_per_s)
        self.episodes = episodes

    def acquire(self, client: Client) -> None:
        if self.active >= self.max_sessions:
            raise SessionCapacity(self.active, self.max_sessions)
        held = self.by_client.get(client.address, 0)
        if not client.exempt:
            if self.per_client and held >= self.per_client:
                raise SessionCapacity(held, self.per_client, per_client=True)
            if held and self.active >= self.max_sessions - self.reserved:
                raise SessionCapacity(self.active, self.max_sessions, reserved=self.reserved)
        self.active += 1
        self.by_client[client.address] = held + 1

    def release(self, client: Client) -> None:
        self.active -= 1
        left = self.by_client.get(client.address, 1) - 1
        if left > 0:
            self.by_client[client.address] = left
        else:
            self.by_client.pop(client.address, None)  # its frame budget stays until its window passes

    async def open_session(self) -> McpSession:
        """Make sure the session can work: its episodes live in the database, so reach it once."""
        try:
            await self.episodes.db.reachable()
        except Exception as exc:
            raise FactoryFailed("cannot open a session: the episode store is unavailable; retry later") from exc
        return McpSession()


_encode = msgspec.json.Encoder().encode


def _frame(kind: str, data: Any) -> str:
    return _encode({"type": kind, "data": data}).decode()


def _error(message: str, code: str, **extra: Any) -> str:
    return _frame("error", {"message": message, "code": code, **extra})


async def _receive_text(socket: WebSocket[Any, Any, Any], deadline: float) -> str | None:
    """The next text frame, or None when the client went away. Raises TimeoutError past ``deadline``
    (loop time)."""
    while True:
        async with asyncio.timeout_at(deadline):
            event = await socket.receive()
        if event["type"] == "websocket.disconnect":
            return None
        if event.get("text") is not None:
            return event["text"]
        if event.get("bytes") is not None:
            return event["bytes"].decode("utf-8", errors="replace")


async def _handle(
    frame: dict[str, Any], session: McpSession, episodes: EpisodeService, client_address: str | None = None
) -> tuple[str | None, bool]:
    """Answer one decoded frame: the reply text (None for ``close``), and whether it was activity — a
    reset or step that succeeded, the only thing that keeps a session alive (state, mcp, invalid or
    refused frames do not)."""
    kind = frame.get("type")
    model = FRAMES.get(kind) if isinstance(kind, str) else None
    if model is None:
        return _error(f"Unknown message type: {kind}; use reset, step, state, close or mcp", "UNKNOWN_TYPE"), False
    try:
        msg = model.model_validate(frame)
    except ValidationError as exc:
        return _error("Invalid message", "VALIDATION_ERROR", errors=validation_errors(exc)), False
    try:
        if isinstance(msg, CloseFrame):
            return None, False
        if isinstance(msg, ResetFrame):
            try:
                params = ResetParams(**msg.data)
            except ValidationError as exc:
                return _error(
                    "Invalid reset parameters", "VALIDATION_ERROR", errors=validation_errors(exc, "data")
                ), False
            params = session.with_secrets(params)
            result = await episodes.reset(params, client_address=client_address)
            session.own(result, params)
            return _frame("observation", result.wire()), True
        if isinstance(msg, StepFrame):
            answered = await mcp_style_step(
                msg.data, episodes, session, client_address
            )  # openenv-core 0.3.0's MCPToolClient
            if answered is not None:
                return _frame("observation", answered), mcp_style_activity(answered)
            if session.episode_id is None:
                return _error("no episode in this session: send a reset frame first", "EXECUTION_ERROR"), False
            result = await episodes.step(
                session.episode_id, msg.data, run_token=session.run_token, episode_token=session.episode_token
            )
            return _frame("observation", result.wire()), True
        if isinstance(msg, StateFrame):
            if session.episode_id is None:
                data: dict[str, Any] = {"episode_id": None, "step_count": 0}
            else:
                data = await episodes.state(session.episode_id, session.episode_token)
            return _frame("state", data), False
        assert isinstance(msg, McpFrame)
        client = None if client_address is None else Client(client_address, exempt=False)
        return _frame("mcp", await handle_jsonrpc(msg.data, episodes, session, client=client)), False
    except Problem as exc:
        if exc.status == 422:
            return _error(exc.detail, "VALIDATION_ERROR", errors=exc.extra.get("errors", [])), False
        return _error(exc.detail, "EXECUTION_ERROR", status=exc.status), False


@websocket("/ws")
async def ws_endpoint(socket: WebSocket[Any, Any, Any], state: State, settings: NamedDependency[Settings]) -> None:
    sessions: WsSessions = state.ws_sessions
    episodes: EpisodeService = state.episodes
    clients: ClientAddresses = state.clients
    client = clients.of(socket)
    loop = asyncio.get_running_loop()
    await socket.accept()
    acquired = False
    try:
        retry_after = sessions.frame_rate.spend(client)  # a handshake counts against the address's budget
        if retry_after is not None:
            await socket.send_text(
                _error(
                    f"more than {sessions.frame_rate.per_s} WebSocket handshakes and frames per second from this client "
                    f"(RATE_LIMIT_PER_S); wait {retry_after}s and reconnect",
                    "CAPACITY_REACHED",
                    status=429,
                    retry_after_s=retry_after,
                )
            )
            return
        sessions.acquire(client)
        acquired = True
        session = await sessions.open_session()
        mcp_sessions: McpSessions = state.mcp_sessions
        requested = socket.query_params.get("session_id")
        if requested:  # MCPToolClient: this WebSocket shares an HTTP MCP session (openenv/session/create)
            shared = await mcp_sessions.get(requested)
            if shared is None:
                await socket.send_text(
                    _error("Unknown session_id; create one with POST /mcp openenv/session/create", "SESSION_ERROR")
                )
                return
            session = shared
        address = None if client.exempt else client.address
        idle_deadline = loop.time() + settings.ws_idle_timeout_s
        while True:
            try:
                raw = await _receive_text(socket, idle_deadline)
            except TimeoutError:
                log.info(
                    "ws session reaped after %.0fs idle episode_id=%s", settings.ws_idle_timeout_s, session.episode_id
                )
                await socket.send_text(
                    _error(
                        f"session idle for {settings.ws_idle_timeout_s:g}s (no reset or step) and closed; reconnect "
                        'and send a reset frame with {"episode_id": ..., "resume": true} to continue',
                        "SESSION_ERROR",
                    )
                )
                break
            if raw is None:
                return
            if len(raw) > settings.max_body_bytes:
                await socket.send_text(
                    _error(
                        f"frame of {len(raw)} bytes is over the {settings.max_body_bytes}-byte limit; send less",
                        "VALIDATION_ERROR",
                        errors=[{"field": "frame", "message": "too large"}],
                    )
                )
                continue
            retry_after = sessions.frame_rate.spend(client)
            if retry_after is not None:
                await socket.send_text(
                    _error(
                        f"more than {sessions.frame_rate.per_s} frames per second from this client (RATE_LIMIT_PER_S); "
                        f"wait {retry_after}s",
                        "EXECUTION_ERROR",
                        status=429,
                        retry_after_s=retry_after,
                    )
                )
                continue
            try:
                frame = decode_json(raw)
            except (BodyNotJson, RecursionError):
                await socket.send_text(_error("Invalid JSON: send one JSON object per text frame", "INVALID_JSON"))
                continue
            except UnstorableText as exc:
                await socket.send_text(_error(exc.detail, "VALIDATION_ERROR", errors=exc.extra["errors"]))
                continue
            if not isinstance(frame, dict):
                await socket.send_text(
                    _error("a frame must be a JSON object with a `type` key", "VALIDATION_ERROR", errors=[])
                )
                continue
            active = False
            try:
                if requested:  # the shared session as any worker last left it (HTTP tools may have moved it)
                    shared = await mcp_sessions.get(requested)
                    if shared is None:
                        await socket.send_text(
                            _error("this MCP session was closed or expired; create a new one", "SESSION_ERROR")
                        )
                        break
                    session = shared
                reply, active = await _handle(frame, session, episodes, address)
                if requested:
                    await mcp_sessions.save(session)
            except DatabaseFault as exc:  # an outage: one log line per frame, a clear answer, the session stays
                episodes.db.faults.failure(log, f"ws frame episode_id={session.episode_id}", exc)
                reply = _error(exc.detail, "EXECUTION_ERROR", status=exc.status, retry_after_s=exc.retry_after_s)
            except Exception:
                log.exception("ws frame failed episode_id=%s", session.episode_id)
                reply = _error(
                    "internal error while handling the frame (logged on the server); retry", "EXECUTION_ERROR"
                )
            if reply is None:
                break
            if active:
                idle_deadline = loop.time() + settings.ws_idle_timeout_s
            await socket.send_text(reply)
    except SessionCapacity as exc:
        await socket.send_text(
            _error(str(exc), "CAPACITY_REACHED", active_sessions=exc.active, max_sessions=exc.maximum)
        )
    except FactoryFailed as exc:
        await socket.send_text(_error(str(exc), "FACTORY_ERROR", factory_name="episode_store"))
    except Exception as exc:
        if type(exc).__name__ == "WebSocketDisconnect":
            return
        log.exception("ws session failed")
        try:
            await socket.send_text(_error("session failed (logged on the server); reconnect", "SESSION_ERROR"))
        except Exception:  # noqa: BLE001 - the socket may already be gone
            pass
    finally:
        if acquired:
            sessions.release(client)
        try:
            await socket.close()
        except Exception:  # noqa: BLE001 - already closed by the peer
            pass
