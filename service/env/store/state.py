"""What a store-desk episode keeps besides the fields every episode has: the calls and their effects.

Part of :class:`service.env.models.EpisodeState` (its ``store`` field), persisted with it. The store
as it stands is the ticket's database plus ``effects``; each call records what it was, whether the
backend accepted it, and — for a message — what the customer was asked, revealed and confirmed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from service.env.store.ledger import Effect


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int
    tool: str
    arguments: dict[str, Any]
    ok: bool
    error: str | None = None
    verified: bool | None = None  # verify_identity: the backend's answer
    asked: tuple[str, ...] = ()  # send_message: the topics it asked about
    revealed: tuple[str, ...] = ()  # send_message: the topics the customer's answer stated
    confirmed: bool = False  # send_message: the customer said yes to it


class StoreProgress(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    effects: tuple[Effect, ...] = ()
    calls: tuple[ToolCall, ...] = ()
    identity_asks: int = 0
    customer_rounds: int = 0
    mind_changed: bool = False
    insisted: bool = False
