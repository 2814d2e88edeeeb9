"""A store-desk episode: one tool call per step, the customer's answers, and what the agent sees.

:func:`step` applies one tool call to an :class:`~service.env.models.EpisodeState` whose ``store``
part holds the calls and effects so far; the core (:mod:`service.env.core`) calls it for the store
family. A call the backend refuses, an unknown tool or malformed arguments are a tool error in the
observation (``tool_result.ok`` false and ``last_action_error``): the step counts, nothing changes.
"""

from __future__ import annotations

from typing import Any

from service.env.models import Action, EpisodeState, HistoryEntry, Observation, cut_off, view
from service.env.store.customer import Memory, reply, topics_in
from service.env.store.state import StoreProgress, ToolCall
from service.env.store.tools import WRITE_TOOLS, Backend, EscalateEffect, SendMessage, ToolError, parse_args
from service.env.store.world import StoreTicket


def new_progress() -> StoreProgress:
    return StoreProgress()


def ticket_text(t: StoreTicket) -> str:
    """The request as the desk receives it: a header (no account data) and the message."""
    attachments = "2 photos" if t.photos_attached else "none"
    return (
        f"Support request {t.ticket_id} · received {t.db.today} · from: {t.writer.name}\n"
        f"Subject: {t.subject}\n"
        f"Attachments: {attachments}\n\n{t.message}"
    )


def step(state: EpisodeState, action: Action, ticket: StoreTicket) -> tuple[EpisodeState, str | None]:
    """The state after one tool call (and the call's error, if any). Pure."""
    progress = state.store or StoreProgress()
    history = list(state.history)
    revealed = list(state.revealed)
    done = False
    queue = state.queue
    if action.tool is None:
        error: str | None = 'the store desk takes tool calls: send {"tool": <name>, "arguments": {...}}'
        call = ToolCall(step=state.step_count, tool="", arguments={}, ok=False, error=error)
        result: dict[str, Any] = {"ok": False, "error": error}
    else:
        name, arguments = action.tool, dict(action.arguments or {})
        try:
            args = parse_args(name, arguments)
            if name == "send_message":
                assert isinstance(args, SendMessage)
                call, result, progress = _message(
                    ticket, state.step_count, args, arguments, progress, history, revealed
                )
            elif name == "end_conversation":
                call = ToolCall(step=state.step_count, tool=name, arguments=arguments, ok=True)
                result, done = {"ok": True, "result": {"status": "conversation ended"}}, True
            else:
                outcome = Backend(ticket.db, progress.effects).call(name, args)
                effects = progress.effects + ((outcome.effect,) if outcome.effect is not None else ())
                verified = outcome.output.get("verified") if name == "verify_identity" else None
                call = ToolCall(step=state.step_count, tool=name, arguments=arguments, ok=True, verified=verified)
                progress = progress.model_copy(update={"effects": effects})
                result = {"ok": True, "result": outcome.output}
                if isinstance(outcome.effect, EscalateEffect):
                    queue = outcome.effect.queue
        except ToolError as exc:
            error = str(exc)
            call = ToolCall(step=state.step_count, tool=name, arguments=arguments, ok=False, error=error)
            result = {"ok": False, "error": error}
        else:
            error = None
    result = {"tool": call.tool, **result}
    progress = progress.model_copy(update={"calls": progress.calls + (call,)})
    step_count = state.step_count + 1
    truncated = cut_off(state, step_count, done)
    new = state.model_copy(
        update={
            "step_count": step_count,
            "history": tuple(history),
            "revealed": tuple(revealed),
            "queue": queue,
            "status": "closed" if done else state.status,
            "tool_result": result,
            "last_action_error": error,
            "done": done or truncated,
            "truncated": truncated,
            "store": progress,
        }
    )
    return new, error


def _message(
    ticket: StoreTicket,
    step_no: int,
    args: SendMessage,
    arguments: dict[str, Any],
    progress: StoreProgress,
    history: list[HistoryEntry],
    revealed: list[str],
) -> tuple[ToolCall, dict[str, Any], StoreProgress]:
    memory = Memory(progress.customer_rounds, progress.identity_asks, progress.mind_changed, progress.insisted)
    answer = reply(ticket, args.text, tuple(args.asking_for), memory)
    history.append(HistoryEntry(role="agent", text=args.text))
    history.append(HistoryEntry(role="customer", text=answer.text))
    for topic in sorted(answer.revealed - set(revealed)):
        revealed.append(topic)
    call = ToolCall(
        step=step_no,
        tool="send_message",
        arguments=arguments,
        ok=True,
        asked=tuple(sorted(_asked(args))),
        revealed=tuple(sorted(answer.revealed)),
        confirmed=answer.confirmed,
    )
    progress = progress.model_copy(
        update={
            "customer_rounds": progress.customer_rounds + 1,
            "identity_asks": progress.identity_asks + int(answer.identity_asked),
            "mind_changed": answer.mind_changed,
            "insisted": answer.insisted,
        }
    )
    return call, {"ok": True, "result": {"customer_reply": answer.text}}, progress


def _asked(args: SendMessage) -> frozenset[str]:
    return topics_in(args.text, tuple(sorted(args.asking_for)))


def observe(state: EpisodeState, ticket: StoreTicket, instructions: str, reward: float | None = None) -> Observation:
    """The agent's view: the request, the conversation, the last tool result — never the gold, the
    customer's hidden facts or the records it has not looked up."""
    return view(
        state,
        ticket_id=ticket.ticket_id,
        ticket=ticket_text(ticket),
        customer_message=ticket.message,
        instructions=instructions,
        reward=reward,
    )


def writes(progress: StoreProgress) -> list[ToolCall]:
    """The accepted write calls, in order."""
    return [c for c in progress.calls if c.ok and c.tool in WRITE_TOOLS]
