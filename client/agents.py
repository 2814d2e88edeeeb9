"""The agents a runner plays: each turns an observation (the wire's JSON) into a :class:`Turn`.

- :class:`ToolCallingEpisodeAgent`: the model under evaluation, calling the task's tools natively (the
  default): ``tools=[...]`` from ``GET /tasks``, its calls and their results kept as a chat.
- :class:`LLMEpisodeAgent`: the model under evaluation in the JSON-in-text mode (``--action-format json``),
  for models without tool calling (prompts from :mod:`client.prompt`).
- :class:`ReferenceEpisodeAgent`: the environment's scripted reference agents (``heuristic``,
  ``random``), for baselines. They are pure policies over an observation, published with the
  environment's core; this adapter is the client's only import of ``service`` and it never
  reaches the service through it (the import-layering contract in pyproject.toml allows exactly
  this import).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from client.llm import LLMClient, Reply
from client.logformat import compact_json, one_line
from client.prompt import (
    PastTurn,
    UnparseableReply,
    first_message,
    parse_action,
    render_turn,
    tool_message_text,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

AGENTS = ("llm", "heuristic", "random")
ACTION_FORMATS = ("tools", "json")  # how the llm agent acts: native tool calls (default), or JSON in its text

# The chat a tool-calling agent sends: the system prompt, the first message, and at most this many of the
# latest messages after it (assistant calls and their tool answers; cut only where a turn starts).
CHAT_MESSAGES_KEPT = 24
NOT_EXECUTED = "not executed: one tool call is played per turn (the first); call it again if you still need it"


@dataclass
class Turn:
    """An agent's move: an action, or None with the reason it has none."""

    action: dict[str, Any] | None
    error: str | None = None


class EpisodeAgent(Protocol):
    async def act(self, obs: dict[str, Any]) -> Turn: ...

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        """The service accepted ``action`` (with the environment's in-band ``note``, if any) or
        rejected it (``note`` says why). Rewards are never passed to an agent."""


@dataclass
class LLMEpisodeAgent:
    """One episode's LLM agent: remembers lookup results and its own past actions, nothing else."""

    llm: LLMClient
    system: str
    lookups: dict[str, Any] = field(default_factory=dict)
    past: list[PastTurn] = field(default_factory=list)

    def render(self, obs: dict[str, Any]) -> str:
        return render_turn(obs, self.lookups, self.past)

    async def act(self, obs: dict[str, Any]) -> Turn:
        tool = obs.get("tool_result")
        if tool is not None and self.past and self.past[-1].action.get("lookup"):
            self.lookups[self.past[-1].action["lookup"]] = tool
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.render(obs)},
        ]
        reply = await self.llm.complete(messages)
        try:
            return Turn(parse_action(reply))
        except UnparseableReply as first:
            # Re-ask once, showing the model its own answer; a second failure is the turn's error.
            messages += [
                {"role": "assistant", "content": reply[:2000]},
                {
                    "role": "user",
                    "content": f"That answer could not be used ({first}). Reply with exactly one JSON "
                    "object, the action, and nothing else.",
                },
            ]
            reply = await self.llm.complete(messages)
            try:
                return Turn(parse_action(reply))
            except UnparseableReply as second:
                return Turn(None, f"unparseable model reply after one re-ask: {second}")

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        self.past.append(PastTurn(action, rejected, note))


@dataclass
class ToolCallingEpisodeAgent:
    """One episode's LLM agent calling tools natively: the chat holds the first message, then each turn's
    assistant message with its tool calls and one tool message per call — the first call's result (the
    observation after the step, without rewards or grades: :func:`~client.prompt.tool_view`), the others
    answered "not executed". Trimmed to the latest ``CHAT_MESSAGES_KEPT`` messages for long episodes."""

    llm: LLMClient
    system: str
    tools: list[dict[str, Any]]
    chat: list[dict[str, Any]] = field(default_factory=list)  # after the system prompt
    pending: list[str] = field(default_factory=list)  # the ids of the last turn's calls, not yet answered
    sent: dict[str, Any] | None = None  # the action of the last turn
    outcome: tuple[dict[str, Any], bool, str | None] | None = None  # what the service made of an action
    seen: int = 0  # history entries the model has been shown

    def _answer(self, obs: dict[str, Any]) -> None:
        """Answer the last turn's calls (and tell of an action the runner played instead: a fallback)."""
        if self.outcome is None:  # the last turn played nothing (no call, or none usable): answered already
            return
        action, rejected, note = self.outcome
        if rejected:
            result = compact_json({"error": f"rejected by the service, nothing was done: {one_line(note, 500)}"})
        else:
            result = tool_message_text(obs, self.seen)
            self.seen = len(obs.get("history") or [])
        if self.pending:
            first, *extra = self.pending
            self.chat.append({"role": "tool", "tool_call_id": first, "content": result})
            self.chat += [{"role": "tool", "tool_call_id": i, "content": NOT_EXECUTED} for i in extra]
        else:  # no call of the model's: the runner's fallback action was played
            self.chat.append(
                {
                    "role": "user",
                    "content": f"No tool was called, so this was played for you: {compact_json(action)}; "
                    f"result: {result}. Call one of the tools.",
                }
            )
        self.pending, self.outcome = [], None

    def window(self) -> list[dict[str, Any]]:
        """The messages sent: the system prompt, the first message, and the latest ones (whole turns)."""
        head, rest = self.chat[:1], self.chat[1:]
        if len(rest) > CHAT_MESSAGES_KEPT:
            cut = len(rest) - CHAT_MESSAGES_KEPT
            while cut < len(rest) and rest[cut]["role"] == "tool":  # never a tool answer without its call
                cut += 1
            omitted = {"role": "user", "content": f"({cut} earlier messages of this episode are not shown.)"}
            rest = [omitted, *rest[cut:]]
        return [{"role": "system", "content": self.system}, *head, *rest]

    async def act(self, obs: dict[str, Any]) -> Turn:
        if not self.chat:
            self.chat.append({"role": "user", "content": first_message(obs)})
            self.seen = len(obs.get("history") or [])
        else:
            self._answer(obs)
        reply: Reply = await self.llm.chat(self.window(), self.tools)  # type: ignore[arg-type]
        self.chat.append(reply.message())
        self.sent = None
        if not reply.tool_calls:
            self.chat.append({"role": "user", "content": "Act by calling one of the tools."})
            return Turn(None, f"the model called no tool: {one_line(reply.content, 120)!r}")
        first = reply.tool_calls[0]
        try:
            arguments = json.loads(first.arguments or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            problem = f"the arguments of {first.name} are not a JSON object: {one_line(first.arguments, 120)!r}"
            self.chat += [
                {"role": "tool", "tool_call_id": c.id, "content": f"not executed: {problem}"} for c in reply.tool_calls
            ]
            return Turn(None, problem)
        self.pending = [c.id for c in reply.tool_calls]
        self.sent = {"tool": first.name, "arguments": arguments}
        return Turn(self.sent)

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        self.outcome = (action, rejected, note)


class ReferenceEpisodeAgent:
    """Adapter for a scripted agent of ``service.env.agents``: it reads a typed ``Observation`` and
    returns an ``Action``; the wire JSON is converted both ways."""

    def __init__(self, agent: Any) -> None:
        from service.env import Observation

        self.agent = agent
        self._fields = set(Observation.model_fields)
        self._obs_type = Observation

    async def act(self, obs: dict[str, Any]) -> Turn:
        typed = self._obs_type.model_validate({k: v for k, v in obs.items() if k in self._fields})
        action = self.agent.act(typed)
        return Turn(action.model_dump(mode="json", exclude_defaults=True))

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        pass


def reference_agent(name: str, family: str, split: str, seed: int, trial: int) -> ReferenceEpisodeAgent:
    """``heuristic`` or ``random`` of the task's family (``GET /tasks``' ``family``) for one episode."""
    from service.env.agents import family_agent

    if name == "heuristic":
        return ReferenceEpisodeAgent(family_agent(name, family, seed))
    # Each (split, ticket seed, trial) gets its own random stream — k trials are k independent
    # draws — and the same stream every time, so random baselines are reproducible.
    return ReferenceEpisodeAgent(family_agent(name, family, zlib.crc32(f"{split}:{seed}:{trial}".encode())))
