"""The server-side baseline: the heuristic agent on fixed dev seeds, computed once per app."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from service.settings import Settings


class BaselineCache:
    """``evaluate_agent`` is deterministic: compute it once per app, off the event loop."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._value: dict[str, Any] | None = None

    async def get(self, settings: Settings) -> dict[str, Any]:
        async with self._lock:
            if self._value is None:
                from service.env.agents import evaluate_agent

                result = await anyio.to_thread.run_sync(
                    lambda: evaluate_agent(
                        settings.baseline_agent, settings.baseline_split, settings.baseline_seeds_per_task
                    )
                )
                self._value = {**result, "seeds_per_task": settings.baseline_seeds_per_task}
        return self._value
