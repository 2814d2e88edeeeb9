"""The time the service stamps rows with and measures ages by: the wall clock read once, when the process
started, advanced by the monotonic clock since.

Every stamp (``created_at``, ``updated_at``, …) and every cutoff — retention, the run TTL, idle MCP
sessions, the quotas' windows — comes from :func:`utcnow`. Had it read the wall clock each time, one jump
of the system clock would age everything at once: a jump of +25 h made retention delete every live
episode, expired every active run and dropped every MCP session. Counted this way, a wall-clock jump
while the process runs changes no age: an episode stepped since the process started is only ever as old
as the time that really passed. What it cannot know is a jump across a restart (a process that starts
after the clock jumped takes that clock as it finds it); :meth:`SteadyClock.drift` says how far the wall
clock has moved away, and the retention loop logs it once when it passes :data:`DRIFT_WARNING_S`.

One per process, on purpose: it is a fact about the process (when it started), not state of an app.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

DRIFT_WARNING_S = 60.0


class SteadyClock:
    """UTC time that moves only as the monotonic clock does, from the wall clock at its start."""

    def __init__(self, wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._wall, self._monotonic = wall, monotonic
        self._start = datetime.fromtimestamp(wall(), UTC)
        self._start_monotonic = monotonic()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._monotonic() - self._start_monotonic)

    def drift(self) -> float:
        """How far the wall clock has moved from this clock since the start, in seconds (+: it jumped ahead)."""
        return self._wall() - self.now().timestamp()


PROCESS_CLOCK = SteadyClock()


def utcnow() -> datetime:
    """Now, UTC-aware, as :data:`PROCESS_CLOCK` counts it (see the module docstring)."""
    return PROCESS_CLOCK.now()
