"""Every task's actions as typed tools: one pydantic model per tool, one source for the JSON schemas
that ``GET /tasks``, MCP's ``tools/list`` and the evaluation client's native tool calling show.

The store desk's tools are its backend (:mod:`service.env.store.tools`). In the six other tasks each
tool stands for one field of :class:`~service.env.models.Action` — ``decide``, ``reply``, ``route``,
``tag``, ``lookup``, ``close`` — and :func:`legacy_action` turns a call into that action, so a tool
call and the field it stands for are the same step.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from service.env.errors import EnvError
from service.env.models import MAX_REPLY_CHARS, Action, Decision, LookupTarget, Queue, Tag
from service.env.store.tools import TOOLS as STORE_TOOLS
from service.env.store.tools import Tool, ToolArgs


class Decide(ToolArgs):
    """Decide the claim: approve_refund, approve_replacement, reject — or request_info, which asks the
    customer the question in ``reply``."""

    decision: Decision
    reply: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REPLY_CHARS,
        description="A message to the customer sent with the decision (the question, for request_info).",
    )


class Reply(ToolArgs):
    """Send the customer a message."""

    text: str = Field(min_length=1, max_length=MAX_REPLY_CHARS)


class Route(ToolArgs):
    """Reassign the ticket to a team's queue."""

    queue: Queue


class AddTag(ToolArgs):
    """Add a tag to the ticket."""

    tag: Tag


class Lookup(ToolArgs):
    """Look up the store policy, the order record or the customer record (the result arrives in
    tool_result)."""

    target: LookupTarget


class Close(ToolArgs):
    """Close the ticket (ends a workflow episode)."""


LEGACY_TOOLS: tuple[Tool, ...] = (
    Tool("decide", "act", Decide),
    Tool("reply", "act", Reply),
    Tool("route", "act", Route),
    Tool("tag", "act", AddTag),
    Tool("lookup", "act", Lookup),
    Tool("close", "act", Close),
)
_LEGACY = {t.name: t for t in LEGACY_TOOLS}


def tools_for(family: str) -> tuple[Tool, ...]:
    """The tools of a task family."""
    return STORE_TOOLS if family == "store" else LEGACY_TOOLS


def legacy_action(task_id: str, action: Action) -> Action:
    """The action a tool call of the decision and workflow tasks stands for; :class:`EnvError` if it names
    no tool of theirs or its arguments do not fit."""
    tool = _LEGACY.get(action.tool or "")
    if tool is None:
        raise EnvError(f"task {task_id} has no tool {action.tool!r}; its tools are: {', '.join(_LEGACY)}")
    try:
        args = tool.args.model_validate(action.arguments or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        raise EnvError(f"invalid arguments for {tool.name} ({where}): {first['msg']}") from exc
    fields: dict[str, Any]
    if isinstance(args, Decide):
        fields = {"decision": args.decision, "reply": args.reply}
    elif isinstance(args, Reply):
        fields = {"reply": args.text}
    elif isinstance(args, Route):
        fields = {"reassign_queue": args.queue}
    elif isinstance(args, AddTag):
        fields = {"add_tag": args.tag}
    elif isinstance(args, Lookup):
        fields = {"lookup": args.target}
    else:
        fields = {"close_ticket": True}
    return Action.model_validate({k: v for k, v in fields.items() if v is not None})
