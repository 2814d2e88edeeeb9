"""Waiting in tests: on an event or a state, never on a time budget.

A wait ends as soon as what it waits for has happened, however slow the machine is. The only clock
is ``STALLED_AFTER_S`` (``bench.harness``): a safety net that turns a wait for something that never
happens into a failure instead of a hung suite — never what a test measures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from bench.harness import STALLED_AFTER_S


def until(check: Callable[[], object], what: str, poll_s: float = 0.02) -> None:
    """Return once ``check()`` is true; fail with ``what`` if it never is (after STALLED_AFTER_S)."""
    deadline = time.monotonic() + STALLED_AFTER_S
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(poll_s)


async def until_async(check: Callable[[], object | Awaitable[object]], what: str, poll_s: float = 0.01) -> None:
    """:func:`until` inside an event loop; ``check`` may be a coroutine function."""
    deadline = time.monotonic() + STALLED_AFTER_S
    while True:
        result = check()
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        if result:
            return
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(poll_s)
