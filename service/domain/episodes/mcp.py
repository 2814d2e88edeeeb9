"""MCP over JSON-RPC 2.0 (``POST /mcp`` and WebSocket ``mcp`` frames): tools reset, step, state, grade.

Always answers with a JSON-RPC object (HTTP 200); errors are JSON-RPC error objects, and a tool
that fails on its input returns ``isError: true`` with the problem detail as text. A successful
tool result also carries the payload as ``data`` (as OpenEnv's reference server does), which is
what OpenEnv's ``MCPToolClient.call_tool`` returns.

Sessions, as OpenEnv's ``MCPToolClient`` (openenv 0.10) uses them: ``openenv/session/create``
returns a ``session_id``; ``tools/list`` / ``tools/call`` with ``params.session_id`` act on that
session's episode; a WebSocket opened with ``/ws?session_id=`` shares it (reset over WS, tools
over HTTP); ``openenv/session/close`` ends it. Sessions live in the database (``McpSessions``), so
any worker serves any of them; a client address holds at most ``MCP_MAX_SESSIONS_PER_CLIENT`` live
ones and none is ever evicted for another's; unused ones expire. Without a session id a call is
stateless, as before. openenv-core 0.3.0's ``MCPToolClient`` sends ``list_tools`` / ``call_tool`` as WebSocket
*step* frames instead: ``mcp_style_step`` answers those.
"""

from __future__ import annotations

import json
import logging
import secrets
import uuid
from datetime import timedelta
from typing import Any, NamedTuple

import msgspec
from litestar import Request, post
from litestar.di import NamedDependency
from pydantic import ValidationError

from service.db import mcp_store
from service.db.engine import Database
from service.db.errors import DatabaseFault
from service.db.models import utcnow
from service.domain.episodes.schemas import (
    EpisodeArguments,
    EpisodeResult,
    JsonRpcError,
    JsonRpcResponse,
    ResetParams,
    StateArguments,
    StepArguments,
)
from service.domain.episodes.services import EpisodeService
from service.lib.decoding import (
    BodyNotJson,
    ClosedBody,
    UnstorableText,
    check_text,
    decode_json,
    unstorable,
    validation_errors,
)
from service.lib.limits import Client
from service.lib.problems import InvalidInput, Problem, clip, fault_body, listed

log = logging.getLogger("service.mcp")

PROTOCOL_VERSION = "2025-06-18"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
TOO_MANY_SESSIONS = -32029  # a server error (the -32000..-32099 range): this client holds its share of sessions

# The tools and their argument models: each tool's inputSchema is its model's JSON schema, and its
# arguments are validated by that model — the same closed bodies as HTTP (an unknown argument such as
# `run_tokne` is refused by name).
TOOL_MODELS: dict[str, tuple[str, type[ClosedBody]]] = {
    "reset": (
        "Start a persisted episode (one support ticket). Returns the first observation and episode_id.",
        ResetParams,
    ),
    "step": ("Apply one action to an episode. Returns observation, reward and done.", StepArguments),
    "state": (
        "Episode id, step count and status (and the visible ticket state where it may be shown); a test episode's "
        "progress needs its run's token (run_token, or the session's).",
        StateArguments,
    ),
    "grade": ("Resolved, score in [0, 1] and breakdown of a finished episode.", EpisodeArguments),
}
TOOLS: list[dict[str, Any]] = [
    {"name": name, "description": description, "inputSchema": model.model_json_schema()}
    for name, (description, model) in TOOL_MODELS.items()
]


def _error(code: int, message: str, id_: Any = None, data: Any = None) -> JsonRpcResponse:
    err: JsonRpcError = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "error": err, "id": id_}


def jsonrpc_invalid_text(exc: UnstorableText, id_: Any = None) -> JsonRpcResponse:
    """A request whose text cannot be stored: JSON-RPC invalid params, the field in ``data``."""
    return _error(INVALID_PARAMS, f"Invalid params: {exc.detail}", id_, data={"errors": exc.extra["errors"]})


def _tool_result(payload: dict[str, Any], is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": json.dumps(payload)}],
        "structuredContent": payload,
        "isError": is_error,
    }
    if not is_error:
        result["data"] = payload
    return result


class McpSession:
    """Per-connection MCP context: the episode a WebSocket session (or an HTTP MCP session) is
    attached to, if any."""

    episode_id: str | None
    run_token: str | None  # from the reset that started a run episode
    episode_token: str | None  # the session owns what it reset (a client-chosen id's token)

    def with_secrets(self, params: ResetParams) -> ResetParams:
        """A resume of the episode this session already holds needs no token resent."""
        if params.resume and params.episode_id is not None and params.episode_id == self.episode_id:
            return params.model_copy(
                update={
                    "episode_token": params.episode_token or self.episode_token,
                    "run_token": params.run_token or self.run_token,
                }
            )
        return params

    def own(self, result: EpisodeResult, params: ResetParams) -> None:
        """After a reset or resume in this session: it now acts on that episode, with its secrets."""
        self.episode_id = result.episode_id
        self.run_token = params.run_token
        self.episode_token = result.metadata.get("episode_token") or params.episode_token

    def __init__(self, episode_id: str | None = None, session_id: str | None = None, stored: bool = False) -> None:
        self.id = session_id or uuid.uuid4().hex
        self.episode_id = episode_id
        self.run_token = None
        self.episode_token = None
        self.stored = stored  # an HTTP MCP session (McpSessions): changes are written back
        self.saved: tuple[str | None, ...] = self.snapshot()

    def snapshot(self) -> tuple[str | None, ...]:
        return self.episode_id, self.run_token, self.episode_token


class TooManySessions(Exception):
    def __init__(self, held: int, limit: int) -> None:
        super().__init__(
            f"this client already holds {held} MCP sessions used in the last hour "
            f"(MCP_MAX_SESSIONS_PER_CLIENT={limit}); close one with openenv/session/close, or reuse one"
        )


class McpSessions:
    """The HTTP MCP sessions (``openenv/session/create``), in the database: every worker serves every
    session, and a restart keeps them. One unused for ``idle_s`` is gone (the retention pass deletes
    it); a client address holds at most ``per_client`` live ones (exempt clients: no cap). A full
    client is refused: nobody's session is ever dropped to make room for another's."""

    TOUCH_EVERY = timedelta(seconds=60)  # last use is written at most once a minute per session

    def __init__(self, db: Database, idle_s: float = 3600.0, per_client: int = 64) -> None:
        self.db = db
        self.idle = timedelta(seconds=idle_s)
        self.per_client = per_client

    async def create(self, client: Client) -> McpSession:
        session_id = secrets.token_hex(16)
        now = utcnow()
        held = await mcp_store.create(
            self.db, session_id, client.address, now, now - self.idle, None if client.exempt else self.per_client
        )
        if held is not None:
            raise TooManySessions(held, self.per_client)
        return McpSession(session_id=session_id, stored=True)

    async def get(self, session_id: str) -> McpSession | None:
        """The session, as any worker last saved it; None when unknown, closed or idle too long."""
        now = utcnow()
        row = await mcp_store.load(self.db, session_id, now - self.idle)
        if row is None:
            return None
        session = McpSession(row.episode_id, session_id, stored=True)
        if row.sealed_secrets:
            sealed = mcp_store.unseal(session_id, row.sealed_secrets)
            session.run_token, session.episode_token = sealed.get("run_token"), sealed.get("episode_token")
        session.saved = session.snapshot()
        if row.used_at < now - self.TOUCH_EVERY:
            await mcp_store.save(self.db, session_id, now)
        return session

    async def save(self, session: McpSession) -> None:
        """Write back what a tool call or WebSocket frame changed in a stored session (nothing otherwise)."""
        if not session.stored or session.snapshot() == session.saved:
            return
        held = {"run_token": session.run_token, "episode_token": session.episode_token}
        sealed = mcp_store.seal(session.id, held) if any(held.values()) else None
        await mcp_store.save(self.db, session.id, utcnow(), episode_id=session.episode_id, sealed_secrets=sealed)
        session.saved = session.snapshot()

    async def close(self, session_id: str) -> bool:
        return await mcp_store.close(self.db, session_id)


class _Request(NamedTuple):
    """A JSON-RPC request that passed the envelope checks."""

    id: str | int | None
    method: str
    params: dict[str, Any]


def _envelope(raw: Any) -> _Request | JsonRpcResponse:
    """The request, or the JSON-RPC error its envelope deserves (text rule, version, id, params)."""
    if isinstance(raw, dict):
        try:  # the decoders' text rule, answered in JSON-RPC's shape with the caller's id when it is usable
            check_text(raw)
        except UnstorableText as exc:
            rid = raw.get("id")
            usable = isinstance(rid, int) or (isinstance(rid, str) and not unstorable(rid))
            return jsonrpc_invalid_text(exc, rid if usable else None)
    if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0" or not isinstance(raw.get("method"), str):
        rid = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), (str, int)) else None
        return _error(INVALID_REQUEST, 'Invalid Request: send {"jsonrpc": "2.0", "method": ..., "id": ...}', rid)
    id_ = raw.get("id")
    if id_ is not None and not isinstance(id_, (str, int)):
        return _error(INVALID_REQUEST, "Invalid Request: id must be a string, an integer or null")
    params = raw.get("params")
    params = {} if params is None else params
    if not isinstance(params, dict):
        return _error(INVALID_PARAMS, "params must be an object", id_)
    return _Request(id_, raw["method"], params)


def _result(id_: str | int | None, result: dict[str, Any]) -> JsonRpcResponse:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


async def _session_method(
    req: _Request, session: McpSession | None, sessions: McpSessions | None, client: Client | None
) -> JsonRpcResponse:
    """``openenv/session/create`` and ``openenv/session/close`` (openenv 0.10's MCPToolClient)."""
    if req.method == "openenv/session/create":
        if session is not None:  # a WebSocket is its own session
            return _result(req.id, {"session_id": session.id})
        if sessions is None:
            return _error(METHOD_NOT_FOUND, "Method not found: openenv/session/create (no session store here)", req.id)
        try:
            created = await sessions.create(client or Client("unknown", exempt=False))
        except TooManySessions as exc:
            return _error(TOO_MANY_SESSIONS, str(exc), req.id, data={"status": 429})
        return _result(req.id, {"session_id": created.id})
    target = req.params.get("session_id")
    if not isinstance(target, str) or not target:
        return _error(INVALID_PARAMS, "Invalid params - 'session_id' is required", req.id)
    if session is not None and target == session.id:
        return _error(INVALID_REQUEST, "Cannot close the WebSocket's own session via MCP; close the WebSocket", req.id)
    if sessions is None or not await sessions.close(target):
        return _error(INVALID_PARAMS, f"Unknown session_id: {clip(target)}", req.id)
    return _result(req.id, {"session_id": target, "closed": True})


async def _tools_call(
    req: _Request,
    episodes: EpisodeService,
    session: McpSession | None,
    sessions: McpSessions | None,
    client: Client | None,
) -> JsonRpcResponse:
    """``tools/call``: a tool that refuses its input answers a result with ``isError``, not an error."""
    name, args = req.params.get("name"), req.params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(args, dict):
        return _error(INVALID_PARAMS, 'tools/call needs params {"name": str, "arguments": object}', req.id)
    address = None if client is None or client.exempt else client.address
    try:
        payload = await _call_tool(name, args, episodes, session, address)
    except KeyError:
        return _error(
            INVALID_PARAMS, f"unknown tool {clip(name)!r}; tools/list shows reset, step, state, grade", req.id
        )
    except Problem as exc:
        return _result(req.id, _tool_result(exc.body(), is_error=True))
    except DatabaseFault as exc:  # the tool's problem, as over HTTP: outcome-unknown is its own type
        episodes.db.faults.failure(log, f"mcp tools/call {clip(name)}", exc)
        return _result(req.id, _tool_result(fault_body(exc), is_error=True))
    finally:
        if session is not None and sessions is not None:
            await sessions.save(session)  # a reset moved the session to another episode: every worker sees it
    return _result(req.id, _tool_result(payload))


async def handle_jsonrpc(
    raw: Any,
    episodes: EpisodeService,
    session: McpSession | None = None,
    sessions: McpSessions | None = None,
    client: Client | None = None,
) -> JsonRpcResponse:
    """Answer one JSON-RPC request (already JSON-decoded). ``session`` is the WebSocket's own
    session (``mcp`` frames); ``sessions`` the HTTP MCP sessions (``POST /mcp``); ``client`` who asks
    (its address holds the sessions it creates and the episodes it resets)."""
    req = _envelope(raw)
    if not isinstance(req, _Request):
        return req
    if req.method == "initialize":
        return _result(
            req.id,
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "ecomm-support-env", "version": "1.0.0"},
            },
        )
    if req.method == "ping" or req.method.startswith("notifications/"):
        return _result(req.id, {})
    if req.method in ("openenv/session/create", "openenv/session/close"):
        return await _session_method(req, session, sessions, client)
    requested = req.params.get("session_id")
    if session is None and requested is not None:
        session = await sessions.get(requested) if sessions is not None and isinstance(requested, str) else None
        if session is None:
            unknown = f"Unknown session_id: {clip(str(requested))}; create one with openenv/session/create"
            return _error(INVALID_PARAMS, unknown, req.id)
    if req.method == "tools/list":
        return _result(req.id, {"tools": TOOLS})
    if req.method == "tools/call":
        return await _tools_call(req, episodes, session, sessions, client)
    return _error(
        METHOD_NOT_FOUND,
        f"Method not found: {clip(req.method)}; use initialize, tools/list, tools/call, "
        "openenv/session/create or openenv/session/close",
        req.id,
    )


def _arguments(name: str, args: dict[str, Any]) -> Any:
    """The tool's arguments, validated by its model (a 4xx-style tool error otherwise)."""
    try:
        return TOOL_MODELS[name][1].model_validate(args)
    except ValidationError as exc:
        errors = validation_errors(exc, "arguments")
        raise InvalidInput(f"invalid {name} arguments: {listed(errors)}", errors=errors) from exc


async def _call_tool(
    name: str,
    args: dict[str, Any],
    episodes: EpisodeService,
    session: McpSession | None,
    client_address: str | None = None,
) -> dict[str, Any]:
    """Run one tool (KeyError: no such tool). A session supplies its episode and its secrets."""
    if name not in TOOL_MODELS:
        raise KeyError(name)
    parsed = _arguments(name, args)
    if isinstance(parsed, ResetParams):
        params = session.with_secrets(parsed) if session is not None else parsed
        result = await episodes.reset(params, client_address=client_address)
        if session is not None:
            session.own(result, params)
        return result.wire()
    episode_id = parsed.episode_id if parsed.episode_id is not None else (session.episode_id if session else None)
    token = parsed.episode_token
    if token is None and session is not None and episode_id == session.episode_id:
        token = session.episode_token
    if isinstance(parsed, StepArguments):
        run_token = parsed.run_token or (session.run_token if session is not None else None)
        return (await episodes.step(episode_id, parsed.action, parsed.request_id, run_token, token)).wire()
    if name == "state":
        run_token = session.run_token if session is not None and episode_id == session.episode_id else None
        return await episodes.state(episode_id, token, getattr(parsed, "run_token", None) or run_token)
    return msgspec.structs.asdict(await episodes.grade(episode_id, token))


def mcp_style_activity(data: dict[str, Any], answered: dict[str, Any]) -> bool:
    """Whether the request ``data`` answered by :func:`mcp_style_step` was episode work that succeeded — a
    reset that started an episode (not a resume) or a step — the only WS activity."""
    observation = answered["observation"]
    result = observation.get("result") or {}
    raw = data.get("arguments")
    arguments: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return (
        observation.get("tool_name") in ("reset", "step")
        and not (observation.get("tool_name") == "reset" and arguments.get("resume") is True)
        and observation.get("error") is None
        and not result.get("isError")
    )


async def mcp_style_step(
    data: dict[str, Any], episodes: EpisodeService, session: McpSession, client_address: str | None = None
) -> dict[str, Any] | None:
    """openenv-core 0.3.0's MCPToolClient sends its requests as WebSocket step frames:
    ``{"type": "list_tools"}`` and ``{"type": "call_tool", "tool_name": ..., "arguments": {...}}``.
    No action of this environment has a ``type`` field, so such a step is an MCP request: answered
    with the observation payload that client parses (``tools``, or ``tool_name`` + ``result`` /
    ``error``). Returns None for anything else (an ordinary action)."""
    kind = data.get("type")
    if kind == "list_tools" and set(data) <= {"type", "metadata"}:
        return {"observation": {"tools": TOOLS}, "reward": None, "done": False}
    if kind != "call_tool" or not set(data) <= {"type", "tool_name", "arguments", "metadata"}:
        return None
    name, args = data.get("tool_name"), data.get("arguments") or {}

    def failed(error_type: str, message: str) -> dict[str, Any]:
        error = {"error_type": error_type, "message": message}
        return {"observation": {"tool_name": str(name), "result": None, "error": error}, "reward": None, "done": False}

    if not isinstance(name, str) or not isinstance(args, dict):
        return failed("invalid_args", "call_tool needs a string tool_name and an arguments object")
    try:
        payload = await _call_tool(name, args, episodes, session, client_address)
    except KeyError:
        return failed("tool_not_found", f"unknown tool {clip(name)!r}; list_tools shows reset, step, state, grade")
    except (Problem, DatabaseFault) as exc:  # the tool ran and failed: a tool-level result, as over JSON-RPC
        body = exc.body() if isinstance(exc, Problem) else fault_body(exc)
        return {
            "observation": {"tool_name": name, "result": _tool_result(body, is_error=True), "error": None},
            "reward": None,
            "done": False,
        }
    return {
        "observation": {"tool_name": name, "result": _tool_result(payload), "error": None},
        "reward": None,
        "done": False,
    }


@post("/mcp", status_code=200, summary="MCP JSON-RPC 2.0: initialize, tools/list, tools/call")
async def mcp_http(request: Request[Any, Any, Any], episodes: NamedDependency[EpisodeService]) -> JsonRpcResponse:
    body = await request.body()
    try:
        payload = decode_json(body) if body.strip() else None
    except (BodyNotJson, RecursionError):
        return {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error: the body is not JSON"}, "id": None}
    except UnstorableText:
        payload = json.loads(body)  # valid JSON with unstorable text: answered below with the request's id
    return await handle_jsonrpc(
        payload, episodes, sessions=request.app.state.mcp_sessions, client=request.app.state.clients.of(request)
    )
