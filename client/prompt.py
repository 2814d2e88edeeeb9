"""What the LLM agent is shown, and how its answer becomes an action.

Prompts are stateless: every turn renders the whole (trimmed) situation afresh — the ticket, the
latest conversation, every lookup result so far and the agent's own past actions with the
service's notes — so the prompt stays bounded however long the episode runs. Rewards are never
shown: the model is evaluated, not coached by the grader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from client.logformat import compact_json, one_line

HISTORY_ENTRIES = 8
ENTRY_CHARS = 800
LOOKUP_CHARS = {"policy": 5000}
OTHER_LOOKUP_CHARS = 2000
PAST_TURNS = 10
TICKET_CHARS = 3000


@dataclass
class PastTurn:
    """An action the agent sent, whether the service rejected it, and the service's note."""

    action: dict[str, Any]
    rejected: bool
    note: str | None


class UnparseableReply(ValueError):
    pass


def _schema_summary(schema: Mapping[str, Any]) -> str:
    """One line per action field: type or allowed values, and its description."""
    lines = []
    for name, prop in schema.get("properties", {}).items():
        options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
        kinds = []
        for o in options:
            if "enum" in o:
                kinds.append(" | ".join(map(str, o["enum"])))
            elif o.get("type"):
                kinds.append(o["type"])
        lines.append(f'- "{name}": {" or ".join(kinds) or "any"} — {prop.get("description", "")}'.rstrip(" —"))
    return "\n".join(lines)


def _store_system_prompt(task: Mapping[str, Any]) -> str:
    tools = "\n".join(
        f"- {t['name']}: {t.get('description', '')} Arguments: {compact_json(t['parameters'])}"
        for t in task.get("tools") or []
    )
    return (
        f"You are a customer-support agent for an online store, working one ticket.\n"
        f"Task: {task['id']} — {task.get('title', '')} ({task.get('family')}, {task.get('difficulty')}).\n\n"
        f"INSTRUCTIONS\n{task.get('instructions', '')}\n\n"
        f"TOOLS (each with the JSON schema of its arguments)\n{tools}\n\n"
        "Answer every turn with exactly one JSON object — one tool call — and nothing else: no prose, no code "
        'fences. Example: {"tool": "search_policy", "arguments": {"query": "damaged item"}}'
    )


def system_prompt(task: Mapping[str, Any], action_schema: Mapping[str, Any]) -> str:
    """The task's instructions and the action schema, as ``GET /tasks`` describes them (the store desk, which
    takes tool calls only: its tools and their schemas)."""
    if task.get("family") == "store" and task.get("tools"):
        return _store_system_prompt(task)
    return (
        f"You are a customer-support agent for an online store, working one ticket.\n"
        f"Task: {task['id']} — {task.get('title', '')} ({task.get('family')}, {task.get('difficulty')}).\n\n"
        f"INSTRUCTIONS\n{task.get('instructions', '')}\n\n"
        f"ACTION FIELDS (all optional; set at least one; several may be combined in one action)\n"
        f"{_schema_summary(action_schema)}\n\n"
        f"ACTION JSON SCHEMA\n{compact_json(action_schema)}\n\n"
        "The store policy, the order record and the customer record are available with the `lookup` "
        "field; the result arrives in the next turn. You have at most the step budget shown.\n"
        "Answer every turn with exactly one JSON object — the action — and nothing else: no prose, "
        'no code fences. Example: {"lookup": "policy"}'
    )


def _clip(text: Any, limit: int) -> str:
    s = text if isinstance(text, str) else compact_json(text)
    return s if len(s) <= limit else s[:limit] + f" …[{len(s) - limit} more chars]"


def _conversation(obs: Mapping[str, Any]) -> str | None:
    history = [e for e in obs.get("history") or [] if e.get("text") != obs.get("customer_message")]
    if not history:
        return None
    shown = history[-HISTORY_ENTRIES:]
    if len(shown) < len(history):
        head = f"CONVERSATION (last {len(shown)} of {len(history)} entries after the first message)"
    else:
        head = "CONVERSATION (after the first message)"
    return head + "\n" + "\n".join(f"{e.get('role')}: {_clip(e.get('text', ''), ENTRY_CHARS)}" for e in shown)


def _past_actions(past: Sequence[PastTurn]) -> str:
    lines = []
    for t in past[-PAST_TURNS:]:
        if t.rejected:
            outcome = f"rejected: {one_line(t.note, 200)}"
        else:
            outcome = "accepted" + (f"; note: {one_line(t.note, 200)}" if t.note else "")
        lines.append(f"- {compact_json(t.action)} → {outcome}")
    return "YOUR PREVIOUS ACTIONS\n" + "\n".join(lines)


def render_turn(obs: Mapping[str, Any], lookups: Mapping[str, Any], past: Sequence[PastTurn]) -> str:
    """The user message of one turn: the ticket's state, the conversation, lookups, the latest tool result,
    past actions."""
    parts = [
        f"TICKET {obs.get('ticket_id')} (task_id: {obs.get('task_id')}) — step_count: {obs.get('step_count')} "
        f"of max_steps: {obs.get('max_steps')}; status: {obs.get('status')}; queue: {obs.get('current_queue')}; "
        f"tags: {', '.join(obs.get('tags') or []) or 'none'}",
        _clip(obs.get("ticket", ""), TICKET_CHARS),
    ]
    conversation = _conversation(obs)
    if conversation:
        parts.append(conversation)
    if lookups:
        parts.append(
            "LOOKUP RESULTS\n"
            + "\n".join(f"{k}: {_clip(v, LOOKUP_CHARS.get(k, OTHER_LOOKUP_CHARS))}" for k, v in lookups.items())
        )
    latest = obs.get("tool_result")
    if latest is not None and latest not in lookups.values():  # a lookup's result is shown above
        parts.append(f"LATEST TOOL RESULT (of your last action)\n{_clip(latest, OTHER_LOOKUP_CHARS * 2)}")
    if past:
        parts.append(_past_actions(past))
    if obs.get("last_action_error"):
        parts.append(f"LAST ACTION NOTE: {obs['last_action_error']}")
    parts.append("Your next action, as one JSON object:")
    return "\n\n".join(parts)


# ------------------------------------------------------------------- native tool calling (and TRL)

# What an agent is never shown of an observation: the grade, in any form (rewards ride beside the
# observation on the wire; a final observation carries its score and verdict).
HIDDEN_FIELDS = frozenset({"reward", "score", "resolved", "grade", "final", "truncated", "breakdown"})
# What the first message already showed and never changes: left out of every tool message.
STATIC_FIELDS = frozenset({"ticket", "customer_message", "instructions", "ticket_id", "task_id", "episode_id"})
TOOL_TEXT_CHARS = 4000  # the longest text of a tool message (a policy section is shorter; a long reply is cut)


# The ticket tasks' instructions name the action's fields; their tools stand for those fields.
TICKET_TOOLS_NOTE = (
    "The instructions name the action's fields; each is a tool here: `decision` (with its `reply`) is decide, a "
    "`reply` alone is reply(text), `reassign_queue` is route, `add_tag` is tag, `lookup` is lookup and "
    "`close_ticket: true` is close."
)


def tool_instructions(task: Mapping[str, Any]) -> str:
    """The system prompt of an agent that calls tools natively: the task's instructions (``GET /tasks``), how the
    ticket tasks' fields map to their tools, and the rule of one call per turn."""
    note = "" if task.get("family") == "store" else f"\n\n{TICKET_TOOLS_NOTE}"
    return (
        f"You are a customer-support agent for an online store, working one ticket.\n"
        f"Task: {task['id']} — {task.get('title', '')} ({task.get('family')}, {task.get('difficulty')}).\n\n"
        f"INSTRUCTIONS\n{task.get('instructions', '')}{note}\n\n"
        "Act by calling the tools, exactly one per turn (only the first call of a turn is played); what it "
        "did comes back as the tool's answer (what the customer wrote since, in its new_messages). You have at "
        "most the step budget shown."
    )


def function_tools(specs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A task's tools (``GET /tasks``' ``tools``: name, description, JSON schema) in the shape the OpenAI
    chat API takes as ``tools=[...]``."""
    return [
        {
            "type": "function",
            "function": {"name": s["name"], "description": s.get("description", ""), "parameters": s["parameters"]},
        }
        for s in specs
    ]


def first_message(obs: Mapping[str, Any]) -> str:
    """The situation at the start of an episode, as text: the ticket as the desk receives it and the budget.
    The task's instructions go in the system prompt (inference.py) or the trainer's prompt (TRL)."""
    return (
        f"TICKET {obs.get('ticket_id')} (task_id: {obs.get('task_id')}) — step_count: {obs.get('step_count')} of "
        f"max_steps: {obs.get('max_steps')}\n\n{obs.get('ticket', '')}"
    )


def tool_view(obs: Mapping[str, Any], seen_history: int = 0) -> dict[str, Any]:
    """What a tool call returns to the model: the observation after the step without the grade (reward,
    score, resolved) and without what the first message showed, its history cut to the entries after the
    first ``seen_history`` (the new messages)."""
    view = {k: v for k, v in obs.items() if k not in HIDDEN_FIELDS | STATIC_FIELDS and k != "history"}
    view["new_messages"] = list(obs.get("history") or [])[seen_history:]
    return view


def _bounded(value: Any) -> Any:
    """``value`` with every text longer than ``TOOL_TEXT_CHARS`` cut (and saying so): still valid JSON."""
    if isinstance(value, str):
        return _clip(value, TOOL_TEXT_CHARS)
    if isinstance(value, list):
        return [_bounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _bounded(v) for k, v in value.items()}
    return value


def tool_message_text(obs: Mapping[str, Any], seen_history: int = 0) -> str:
    """:func:`tool_view` as one JSON text, every long text in it cut."""
    return compact_json(_bounded(tool_view(obs, seen_history)))


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _balanced_objects(text: str) -> list[str]:
    """Every top-level balanced ``{...}`` substring, in order; braces inside strings are ignored."""
    found, depth, start, in_str, escaped = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def parse_action(text: str | None) -> dict[str, Any]:
    """The JSON action in a model's answer: bare, in a code fence, or amid prose (first balanced
    ``{...}`` that decodes to an object). ``{"action": {...}}`` is unwrapped."""
    if text is None or not text.strip():
        raise UnparseableReply("empty reply")
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    candidates += _balanced_objects(text)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            if set(value) == {"action"} and isinstance(value["action"], dict):
                value = value["action"]
            return value
    raise UnparseableReply(f"no JSON object in reply: {one_line(text, 120)!r}")
