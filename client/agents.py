"""The agents a runner plays: each turns an observation (the wire's JSON) into a :class:`Turn`.

- :class:`LLMEpisodeAgent`: the model under evaluation (prompts from :mod:`client.prompt`).
- :class:`ReferenceEpisodeAgent`: the environment's scripted reference agents (``heuristic``,
  ``random``), for baselines. They are pure policies over an observation, published with the
  environment's core; this adapter is the client's only import of ``service`` and it never
  reaches the service through it (the import-layering contract in pyproject.toml allows exactly
  this import).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from client.llm import LLMClient
from client.prompt import PastTurn, UnparseableReply, parse_action, render_turn

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

AGENTS = ("llm", "heuristic", "random")


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


def reference_agent(name: str, split: str, seed: int, trial: int) -> ReferenceEpisodeAgent:
    """``heuristic`` or ``random`` for one episode."""
    from service.env.agents import HeuristicAgent, RandomAgent

    if name == "heuristic":
        return ReferenceEpisodeAgent(HeuristicAgent(seed))
    # Each (split, ticket seed, trial) gets its own random stream — k trials are k independent
    # draws — and the same stream every time, so random baselines are reproducible.
    return ReferenceEpisodeAgent(RandomAgent(zlib.crc32(f"{split}:{seed}:{trial}".encode())))
