"""MCP over JSON-RPC 2.0 (``POST /mcp`` and WebSocket ``mcp`` frames): one tool per action, and the
session tools reset, step, state, grade.

The action tools are the tasks' own (``service.env.tool_specs``, the specs ``GET /tasks`` shows): the six
ticket tasks share decide, reply, route, tag, lookup and close; the store desk has its eighteen. A session
with an episode lists its task's tools; one without lists both sets (their names differ), so a client that
lists once, before its first reset, still knows every tool. A call plays the tool as one step of the
session's episode — the same step as ``{"tool": name, "arguments": {...}}`` on ``POST /step`` — after its
arguments pass the tool's model (field errors come back as a tool error, and nothing is played).

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
from pydantic import BaseModel, ValidationError

from service import env as core
from service.db import mcp_store
from service.db import repository as repo
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
from service.errors import Conflict, DomainError, InvalidRequest, clip
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
from service.lib.problems import fault_body, listed, mcp_tool_error

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
SESSION_TOOLS: list[dict[str, Any]] = [
    {"name": name, "description": description, "inputSchema": model.model_json_schema()}
    for name, (description, model) in TOOL_MODELS.items()
]


def _desk(family: str) -> str:
    """Which set of action tools a task family plays with: the store desk's, or the ticket tasks' six."""
    return "store" if family == "store" else "ticket"


# The action tools of each desk, as GET /tasks shows them (one source: the tools' pydantic models).
DESK_TOOLS: dict[str, list[dict[str, Any]]] = {
    _desk(family): [
        {"name": spec["name"], "description": spec["description"], "inputSchema": spec["parameters"]}
        for spec in core.tool_specs(family)
    ]
    for family in ("decision", "store")
}
ACTION_TOOLS: dict[str, tuple[str, type[BaseModel]]] = {
    tool.name: (_desk(family), tool.args) for family in ("decision", "store") for tool in core.tools_for(family)
}
assert not set(ACTION_TOOLS) & set(TOOL_MODELS), "an action tool may not shadow a session tool"


def listed_tools(desk: str | None) -> list[dict[str, Any]]:
    """``tools/list``: the session tools, then the action tools of the episode's desk (every desk's
    when there is no episode yet)."""
    if desk is None:
        return SESSION_TOOLS + DESK_TOOLS["ticket"] + DESK_TOOLS["store"]
    return SESSION_TOOLS + DESK_TOOLS[desk]


class NoEpisode(Conflict):
    """An action tool called in a session that has no episode (or without a session)."""

    slug = "no-episode"


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
    task_id: str | None  # the episode's task, once known (not stored: a stored session looks it up)

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
        self.task_id = result.metadata.get("task_id") or result.observation.get("task_id")

    async def desk(self, episodes: EpisodeService) -> str | None:
        """The desk of this session's episode (``store`` or ``ticket``); None without an episode (or when it
        is gone). A session loaded from the database reads its episode's task once."""
        if self.episode_id is None:
            return None
        if self.task_id is None:
            record = await repo.get_episode(episodes.db, self.episode_id)
            self.task_id = record.task_id if record is not None else None
        return None if self.task_id is None else _desk(core.get_task(self.task_id).family)

    def __init__(self, episode_id: str | None = None, session_id: str | None = None, stored: bool = False) -> None:
        self.id = session_id or uuid.uuid4().hex
        self.episode_id = episode_id
        self.run_token = None
        self.episode_token = None
        self.task_id = None
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
        return _error(INVALID_PARAMS, f"unknown tool {clip(name)!r}; tools/list shows every tool", req.id)
    except DomainError as exc:
        return _result(req.id, _tool_result(mcp_tool_error(exc), is_error=True))
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
                "serverInfo": {"name": core.ENV_NAME, "version": core.ENV_VERSION},
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
        try:
            desk = None if session is None else await session.desk(episodes)
        except DatabaseFault as exc:
            episodes.db.faults.failure(log, "mcp tools/list", exc)
            return _error(INTERNAL_ERROR, exc.detail, req.id, data=fault_body(exc))
        return _result(req.id, {"tools": listed_tools(desk)})
    if req.method == "tools/call":
        return await _tools_call(req, episodes, session, sessions, client)
    return _error(
        METHOD_NOT_FOUND,
        f"Method not found: {clip(req.method)}; use initialize, tools/list, tools/call, "
        "openenv/session/create or openenv/session/close",
        req.id,
    )


def _arguments(name: str, args: dict[str, Any], model: type[BaseModel] | None = None) -> Any:
    """The tool's arguments, validated by its model (a 4xx-style tool error naming the fields otherwise)."""
    try:
        return (model or TOOL_MODELS[name][1]).model_validate(args)
    except ValidationError as exc:
        errors = validation_errors(exc, "arguments")
        raise InvalidRequest(f"invalid {name} arguments: {listed(errors)}", errors=errors) from exc


async def _play_tool(
    name: str, args: dict[str, Any], episodes: EpisodeService, session: McpSession | None
) -> dict[str, Any]:
    """An action tool: its arguments checked by its model, then played as one step of the session's episode
    (``{"tool": name, "arguments": args}``, as over ``POST /step``). Returns what the step tool returns."""
    desk, model = ACTION_TOOLS[name]
    if session is None or session.episode_id is None:
        how = (
            "call the reset tool first"
            if session is not None
            else ("call it in a session: openenv/session/create, then reset and the tools with its session_id")
        )
        raise NoEpisode(f"{name} acts on the session's episode and there is none: {how}")
    _arguments(name, args, model)
    episode_desk = await session.desk(episodes)
    if episode_desk is not None and episode_desk != desk:
        tools = ", ".join(t["name"] for t in DESK_TOOLS[episode_desk])
        raise InvalidRequest(
            f"{name} is a tool of the {'store desk' if desk == 'store' else 'ticket'} tasks; this episode "
            f"({session.task_id}) takes: {tools}",
            errors=[{"field": "name", "message": f"not a tool of {session.task_id}", "type": "tool_of_other_task"}],
        )
    payload = {"tool": name, "arguments": args}
    result = await episodes.step(
        session.episode_id, payload, run_token=session.run_token, episode_token=session.episode_token
    )
    return result.wire()


async def _call_tool(
    name: str,
    args: dict[str, Any],
    episodes: EpisodeService,
    session: McpSession | None,
    client_address: str | None = None,
) -> dict[str, Any]:
    """Run one tool (KeyError: no such tool). A session supplies its episode and its secrets."""
    if name in ACTION_TOOLS:
        return await _play_tool(name, args, episodes, session)
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


# The tools that do episode work: a reset, a step, every action tool (their payload is a step's result).
PLAYING_TOOLS = frozenset({"reset", "step", *ACTION_TOOLS})


def _episode_work(name: Any, arguments: Any) -> bool:
    resumed = name == "reset" and isinstance(arguments, dict) and arguments.get("resume") is True
    return name in PLAYING_TOOLS and not resumed


def jsonrpc_activity(request: Any, response: JsonRpcResponse) -> bool:
    """Whether an ``mcp`` frame was episode work that succeeded (a ``tools/call`` of reset — not a resume —,
    step or an action tool): WS activity, like the same work sent as reset and step frames."""
    if not isinstance(request, dict) or request.get("method") != "tools/call":
        return False
    params = request.get("params")
    result = response.get("result")
    return (
        isinstance(params, dict)
        and _episode_work(params.get("name"), params.get("arguments"))
        and isinstance(result, dict)
        and result.get("isError") is False
    )


def mcp_style_activity(data: dict[str, Any], answered: dict[str, Any]) -> bool:
    """Whether the request ``data`` answered by :func:`mcp_style_step` was episode work that succeeded — a
    reset that started an episode (not a resume), a step or an action tool — the only WS activity."""
    observation = answered["observation"]
    result = observation.get("result") or {}
    return (
        _episode_work(observation.get("tool_name"), data.get("arguments"))
        and observation.get("error") is None
        and not result.get("isError")
    )


async def mcp_style_step(
    data: dict[str, Any], episodes: EpisodeService, session: McpSession, client_address: str | None = None
) -> dict[str, Any] | None:
    """openenv-core 0.3.0's MCPToolClient (and openenv 0.10's ``env.step(ListToolsAction())`` /
    ``env.step(CallToolAction(...))``) send their requests as WebSocket step frames:
    ``{"type": "list_tools"}`` and ``{"type": "call_tool", "tool_name": ..., "arguments": {...}}``.
    No action of this environment has a ``type`` field, so such a step is an MCP request: answered
    with the observation payload that client parses (``tools``, or ``tool_name`` + ``result`` /
    ``error``); a call that played a step (reset, step, an action tool) carries the step's reward and done
    on the frame. Returns None for anything else (an ordinary action)."""
    kind = data.get("type")
    if kind == "list_tools" and set(data) <= {"type", "metadata"}:
        return {"observation": {"tools": listed_tools(await session.desk(episodes))}, "reward": None, "done": False}
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
        return failed("tool_not_found", f"unknown tool {clip(name)!r}; list_tools shows every tool")
    except (DomainError, DatabaseFault) as exc:  # the tool ran and failed: a tool-level result, as over JSON-RPC
        body = mcp_tool_error(exc) if isinstance(exc, DomainError) else fault_body(exc)
        return {
            "observation": {"tool_name": name, "result": _tool_result(body, is_error=True), "error": None},
            "reward": None,
            "done": False,
        }
    # a reset, a step or an action tool: its reward and done are the frame's too (openenv's StepResult reads them)
    played = name in PLAYING_TOOLS
    return {
        "observation": {"tool_name": name, "result": _tool_result(payload), "error": None},
        "reward": payload.get("reward") if played else None,
        "done": bool(payload.get("done")) if played else False,
    }


@post("/mcp", status_code=200, summary="MCP JSON-RPC 2.0: initialize, tools/list, tools/call")
async def mcp_http(request: Request[Any, Any, Any], episodes: NamedDependency[EpisodeService]) -> JsonRpcResponse:
    body = await request.body()
    try:
        payload = decode_json(body) if body.strip() else None
    except (BodyNotJson, RecursionError):
        return {
            "jsonrpc": "2.0",
            "error": {"code": PARSE_ERROR, "message": "Parse error: the body is not JSON"},
            "id": None,
        }
    except UnstorableText:
        payload = json.loads(body)  # valid JSON with unstorable text: answered below with the request's id
    return await handle_jsonrpc(
        payload, episodes, sessions=request.app.state.mcp_sessions, client=request.app.state.clients.of(request)
    )
