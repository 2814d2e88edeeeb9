"""WebSocket ``/ws``: one session per connection, OpenEnv frames, every step persisted.

Frames (client → server): ``reset`` (``data`` = reset kwargs; ``{"episode_id": E, "resume": true}``
re-attaches to a stored episode), ``step`` (``data`` = the action), ``state``, ``close``, ``mcp``.
Errors: INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR, EXECUTION_ERROR keep the connection open;
CAPACITY_REACHED (also a handshake over the address's budget, with ``status: 429``), FACTORY_ERROR,
SESSION_ERROR (also sent when an idle session is reaped) close it. Only episode work that succeeded — a
reset that starts an episode, a step, an MCP call of reset, step or an action tool — keeps a session alive
(a resume, a state frame, other MCP calls do not).
With ``?session_id=`` the socket shares an HTTP MCP session (stored in the
database): it is read before and written after each frame, so HTTP tool calls and the socket agree.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Literal, cast

import msgspec
from litestar import WebSocket, websocket
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.types import WebSocketReceiveEvent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.db.errors import DatabaseFault, DatabaseOutcomeUnknown
from service.domain.episodes.mcp import (
    McpSession,
    McpSessions,
    handle_jsonrpc,
    jsonrpc_activity,
    mcp_style_activity,
    mcp_style_step,
)
from service.domain.episodes.schemas import ResetParams
from service.domain.episodes.services import EpisodeService
from service.errors import DomainError, clip
from service.lib.decoding import BodyNotJson, UnstorableText, decode_json, validation_errors
from service.lib.limits import Client, Refusal, RequestBudgets
from service.lib.problems import fault_body, ws_error_data
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
        self,
        max_sessions: int,
        episodes: EpisodeService,
        per_client: int = 0,
        budgets: RequestBudgets | None = None,
        reserved: int = 0,
    ) -> None:
        self.max_sessions = max_sessions
        self.per_client = per_client
        # never more than an eighth of the slots: a small server still serves several sessions per client
        self.reserved = min(reserved, max_sessions // 8)
        self.active = 0
        self.by_client: dict[str, int] = {}
        self.budgets = budgets
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
            self.by_client.pop(client.address, None)  # its address's budget stays until it refills

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


def _fault_frame(exc: DatabaseFault) -> str:
    """A database fault as an error frame: ``OUTCOME_UNKNOWN`` when the write may be applied (check with a
    state frame before sending it again), ``EXECUTION_ERROR`` otherwise; ``type`` is the problem type."""
    body = fault_body(exc)
    code = "OUTCOME_UNKNOWN" if isinstance(exc, DatabaseOutcomeUnknown) else "EXECUTION_ERROR"
    return _error(exc.detail, code, status=body["status"], retry_after_s=exc.retry_after_s, problem_type=body["type"])


async def _receive_text(socket: WebSocket[Any, Any, Any], deadline: float) -> str | None:
    """The next text frame, or None when the client went away. Raises TimeoutError past ``deadline``
    (loop time)."""
    while True:
        async with asyncio.timeout_at(deadline):
            event = await socket.receive()
        if event["type"] == "websocket.disconnect":
            return None
        # a websocket.receive event (the ASGI union types every event the socket may get)
        frame = cast(WebSocketReceiveEvent, event)
        if frame.get("text") is not None:
            return frame["text"]
        data = frame.get("bytes")
        if data is not None:
            return data.decode("utf-8", errors="replace")


async def _handle(
    frame: dict[str, Any], session: McpSession, episodes: EpisodeService, client_address: str | None = None
) -> tuple[str | None, bool]:
    """Answer one decoded frame: the reply text (None for ``close``), and whether it was activity — a
    reset that started an episode or a step (a frame, or an MCP call of reset, step or an action tool), that
    succeeded: the only things that keep a session alive (a resume, state, other MCP calls, invalid or refused
    frames do not)."""
    kind = frame.get("type")
    model = FRAMES.get(kind) if isinstance(kind, str) else None
    if model is None:
        return _error(
            f"Unknown message type: {clip(str(kind))}; use reset, step, state, close or mcp", "UNKNOWN_TYPE"
        ), False
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
            # a resume re-attaches and does no episode work: it never keeps a slot (39 addresses held all 256)
            return _frame("observation", result.wire()), not params.resume
        if isinstance(msg, StepFrame):
            answered = await mcp_style_step(
                msg.data, episodes, session, client_address
            )  # openenv-core 0.3.0's MCPToolClient
            if answered is not None:
                return _frame("observation", answered), mcp_style_activity(msg.data, answered)
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
                data = await episodes.state(session.episode_id, session.episode_token, session.run_token)
            return _frame("state", data), False
        assert isinstance(msg, McpFrame)
        client = None if client_address is None else Client(client_address, exempt=False)
        answer = await handle_jsonrpc(msg.data, episodes, session, client=client)
        return _frame("mcp", answer), jsonrpc_activity(msg.data, answer)
    except DomainError as exc:
        return _frame("error", ws_error_data(exc)), False


class _SessionGone(Exception):
    """The HTTP MCP session this socket shares was closed or expired: the socket closes too."""


class _Connection:
    """One WebSocket session: the frames of one socket, answered in order (see the module docstring)."""

    def __init__(self, socket: WebSocket[Any, Any, Any], state: State, settings: Settings) -> None:
        self.socket, self.settings = socket, settings
        self.sessions: WsSessions = state.ws_sessions
        self.episodes: EpisodeService = state.episodes
        self.mcp_sessions: McpSessions = state.mcp_sessions
        self.client = state.clients.of(socket)
        self.address = None if self.client.exempt else self.client.address
        self.requested = socket.query_params.get("session_id")  # MCPToolClient: share an HTTP MCP session
        self.loop = asyncio.get_running_loop()
        self.acquired = False
        self.session = McpSession()
        self.budget_key = f"ws:{uuid.uuid4().hex}"  # this connection's own frame budget

    def _spend(self, key: str | None) -> Refusal | None:
        budgets = self.sessions.budgets
        return None if budgets is None else budgets.spend(self.client, key)

    async def send_error(self, message: str, code: str, **extra: Any) -> None:
        await self.socket.send_text(_error(message, code, **extra))

    async def open(self) -> bool:
        """Admit the socket (its address's handshake budget, a session slot, the shared MCP session)."""
        refused = self._spend(None)  # a handshake counts against its address, like any request without a credential
        if refused is not None:
            await self.send_error(
                f"WebSocket handshakes: {refused.detail()}",
                "CAPACITY_REACHED",
                status=429,
                retry_after_s=refused.retry_after_s,
            )
            return False
        self.sessions.acquire(self.client)
        self.acquired = True
        self.session = await self.sessions.open_session()
        if self.requested:
            shared = await self.mcp_sessions.get(self.requested)
            if shared is None:
                await self.send_error(
                    "Unknown session_id; create one with POST /mcp openenv/session/create", "SESSION_ERROR"
                )
                return False
            self.session = shared
        return True

    async def serve(self) -> None:
        """Answer frames until the client closes, goes idle or sends ``close``."""
        idle_deadline = self.loop.time() + self.settings.ws_idle_timeout_s
        while True:
            try:
                raw = await _receive_text(self.socket, idle_deadline)
            except TimeoutError:
                await self._reap()
                return
            if raw is None:
                return
            frame = await self._decoded(raw)
            if frame is None:
                continue
            try:
                reply, active = await self._answer(frame)
            except _SessionGone as gone:
                await self.send_error(str(gone), "SESSION_ERROR")
                return
            if reply is None:
                return
            if active:
                idle_deadline = self.loop.time() + self.settings.ws_idle_timeout_s
            await self.socket.send_text(reply)

    async def _reap(self) -> None:
        timeout = self.settings.ws_idle_timeout_s
        log.info("ws session reaped after %gs idle", timeout)  # no episode id: a server-made one is a capability
        await self.send_error(
            f"session idle for {timeout:g}s (no reset or step) and closed; reconnect "
            'and send a reset frame with {"episode_id": ..., "resume": true} to continue',
            "SESSION_ERROR",
        )

    async def _decoded(self, raw: str) -> dict[str, Any] | None:
        """The frame as a JSON object, or None after answering why it cannot be one (size, rate, JSON)."""
        limit = self.settings.max_body_bytes
        if len(raw) > limit:
            await self.send_error(
                f"frame of {len(raw)} bytes is over the {limit}-byte limit; send less",
                "VALIDATION_ERROR",
                errors=[{"field": "frame", "message": "too large"}],
            )
            return None
        refused = self._spend(self.budget_key)  # a frame counts against its session (and its address's ceiling)
        if refused is not None:
            await self.send_error(
                f"frames: {refused.detail()}", "EXECUTION_ERROR", status=429, retry_after_s=refused.retry_after_s
            )
            return None
        try:
            frame = decode_json(raw)
        except (BodyNotJson, RecursionError):
            await self.send_error("Invalid JSON: send one JSON object per text frame", "INVALID_JSON")
            return None
        except UnstorableText as exc:
            await self.send_error(exc.detail, "VALIDATION_ERROR", errors=exc.extra["errors"])
            return None
        if not isinstance(frame, dict):
            await self.send_error("a frame must be a JSON object with a `type` key", "VALIDATION_ERROR", errors=[])
            return None
        return frame

    async def _answer(self, frame: dict[str, Any]) -> tuple[str | None, bool]:
        """The reply to a decoded frame (None: close) and whether it was activity; a shared MCP session
        is read before and written after, as any worker last left it."""
        try:
            if self.requested:
                shared = await self.mcp_sessions.get(self.requested)
                if shared is None:
                    raise _SessionGone("this MCP session was closed or expired; create a new one")
                self.session = shared
            reply, active = await _handle(frame, self.session, self.episodes, self.address)
            if self.requested:
                await self.mcp_sessions.save(self.session)
            return reply, active
        except DatabaseFault as exc:  # an outage: one log line per frame, a clear answer, the session stays
            self.episodes.db.faults.failure(log, f"ws frame episode_id={self.session.episode_id}", exc)
            return _fault_frame(exc), False
        except Exception:
            log.exception("ws frame failed episode_id=%s", self.session.episode_id)
            return _error(
                "internal error while handling the frame (logged on the server); retry", "EXECUTION_ERROR"
            ), False

    async def close(self) -> None:
        if self.acquired:
            self.sessions.release(self.client)
        try:
            await self.socket.close()
        except Exception:  # noqa: BLE001 - already closed by the peer
            pass


@websocket("/ws")
async def ws_endpoint(socket: WebSocket[Any, Any, Any], state: State, settings: NamedDependency[Settings]) -> None:
    await socket.accept()
    connection = _Connection(socket, state, settings)
    try:
        if await connection.open():
            await connection.serve()
    except SessionCapacity as exc:
        await connection.send_error(str(exc), "CAPACITY_REACHED", active_sessions=exc.active, max_sessions=exc.maximum)
    except FactoryFailed as exc:
        await connection.send_error(str(exc), "FACTORY_ERROR", factory_name="episode_store")
    except Exception as exc:
        if type(exc).__name__ == "WebSocketDisconnect":
            return
        log.exception("ws session failed")
        try:
            await connection.send_error("session failed (logged on the server); reconnect", "SESSION_ERROR")
        except Exception:  # noqa: BLE001 - the socket may already be gone
            pass
    finally:
        await connection.close()
