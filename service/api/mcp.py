"""MCP over JSON-RPC 2.0 (``POST /mcp`` and WebSocket ``mcp`` frames): tools reset, step, state, grade.

Always answers with a JSON-RPC object (HTTP 200); errors are JSON-RPC error objects, and a tool
that fails on its input returns ``isError: true`` with the problem detail as text.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from service.api.episodes import EpisodeService, ResetParams, validation_errors
from service.api.problems import InvalidInput, Problem

PROTOCOL_VERSION = "2025-06-18"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603

_EPISODE_ID = {"type": "string", "maxLength": 255, "description": "From the reset tool (or POST /reset)."}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "reset",
        "description": "Start a persisted episode (one support ticket). Returns the first observation and episode_id.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "seed": {"type": "integer", "minimum": 0},
                "episode_id": _EPISODE_ID,
                "task_id": {"type": "string"},
                "split": {"type": "string", "enum": ["train", "dev", "test"]},
                "difficulty": {"type": "string"},
            },
        },
    },
    {
        "name": "step",
        "description": "Apply one action to an episode. Returns observation, reward and done.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "episode_id": _EPISODE_ID,
                "action": {"type": "object", "description": "Action fields; see GET /schema."},
                "request_id": {"type": "string", "maxLength": 255},
            },
            "required": ["action"],
        },
    },
    {
        "name": "state",
        "description": "Episode id, step count, status and the visible ticket state.",
        "inputSchema": {"type": "object", "properties": {"episode_id": _EPISODE_ID}},
    },
    {
        "name": "grade",
        "description": "Score in [0, 1] with breakdown for a finished episode.",
        "inputSchema": {"type": "object", "properties": {"episode_id": _EPISODE_ID}},
    },
]


def _error(code: int, message: str, id_: Any = None, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "error": err, "id": id_}


def _tool_result(payload: dict[str, Any], is_error: bool = False) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": json.dumps(payload)}],
        "structuredContent": payload,
        "isError": is_error,
    }


class McpSession:
    """Per-connection MCP context: the episode a WebSocket session is attached to, if any."""

    def __init__(self, episode_id: str | None = None) -> None:
        self.episode_id = episode_id
        self.run_token: str | None = None  # from the reset that started a run episode


async def handle_jsonrpc(raw: Any, episodes: EpisodeService, session: McpSession | None = None) -> dict[str, Any]:
    """Answer one JSON-RPC request (already JSON-decoded)."""
    if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0" or not isinstance(raw.get("method"), str):
        return _error(INVALID_REQUEST, "Invalid Request: send {\"jsonrpc\": \"2.0\", \"method\": ..., \"id\": ...}",
                      raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), (str, int)) else None)
    id_ = raw.get("id")
    if id_ is not None and not isinstance(id_, (str, int)):
        return _error(INVALID_REQUEST, "Invalid Request: id must be a string, an integer or null")
    params = raw.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return _error(INVALID_PARAMS, "params must be an object", id_)
    method = raw["method"]
    if method == "initialize":
        return {
            "jsonrpc": "2.0",
            "id": id_,
            "result": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "ecomm-support-env", "version": "1.0.0"},
            },
        }
    if method == "ping" or method.startswith("notifications/"):
        return {"jsonrpc": "2.0", "id": id_, "result": {}}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": id_, "result": {"tools": TOOLS}}
    if method != "tools/call":
        return _error(METHOD_NOT_FOUND, f"Method not found: {method}; use initialize, tools/list or tools/call", id_)
    name = params.get("name")
    args = params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(args, dict):
        return _error(INVALID_PARAMS, "tools/call needs params {\"name\": str, \"arguments\": object}", id_)
    try:
        payload = await _call_tool(name, args, episodes, session)
    except KeyError:
        return _error(INVALID_PARAMS, f"unknown tool {name!r}; tools/list shows reset, step, state, grade", id_)
    except Problem as exc:
        return {"jsonrpc": "2.0", "id": id_, "result": _tool_result(exc.body(), is_error=True)}
    return {"jsonrpc": "2.0", "id": id_, "result": _tool_result(payload)}


async def _call_tool(name: str, args: dict[str, Any], episodes: EpisodeService, session: McpSession | None) -> dict[str, Any]:
    default_id = session.episode_id if session is not None else None
    if name == "reset":
        try:
            params = ResetParams(**args)
        except ValidationError as exc:
            errors = validation_errors(exc)
            raise InvalidInput("invalid reset arguments: " + ", ".join(e["field"] for e in errors), errors=errors) from exc
        result = await episodes.reset(params)
        if session is not None:
            session.episode_id = result.episode_id
            session.run_token = params.run_token
        return result.wire()
    if name == "step":
        request_id = args.get("request_id")
        if request_id is not None and (not isinstance(request_id, str) or not 0 < len(request_id) <= 255):
            raise InvalidInput("request_id must be a string of 1-255 characters", errors=[{"field": "request_id"}])
        token = args.get("run_token") or (session.run_token if session is not None else None)
        if token is not None and not isinstance(token, str):
            raise InvalidInput("run_token must be a string", errors=[{"field": "run_token"}])
        result = await episodes.step(_episode_id(args, default_id), args.get("action"), request_id, token)
        return result.wire()
    if name == "state":
        return await episodes.state(_episode_id(args, default_id))
    if name == "grade":
        return await episodes.grade(_episode_id(args, default_id))
    raise KeyError(name)


def _episode_id(args: dict[str, Any], default: str | None) -> str | None:
    value = args.get("episode_id", default)
    if value is not None and (not isinstance(value, str) or len(value) > 255):
        raise InvalidInput("episode_id must be a string of at most 255 characters", errors=[{"field": "episode_id"}])
    return value
