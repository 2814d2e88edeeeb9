"""The time the service stamps rows with and measures ages by: the wall clock read once, when the process
started, advanced by the monotonic clock since.

Every stamp (``created_at``, ``updated_at``, …) and every cutoff — retention, the run TTL, idle MCP
sessions, the quotas' windows — comes from :func:`utcnow`. Had it read the wall clock each time, one jump
of the system clock would age everything at once: a jump of +25 h made retention delete every live
episode, expired every active run and dropped every MCP session. Counted this way, a wall-clock jump
while the process runs changes no age: an episode stepped since the process started is only ever as old
as the time that really passed. A process that starts after the clock jumped takes that clock as it
finds it, so two processes can count from different wall clocks: one started after a +25 h jump would
see every row the other stamps as 25 h old. Stamps stay each process's own; **ages are measured against
the slowest live process**: every process writes its clock into the database at each retention pass
(:func:`service.db.retention.align`) and sets :attr:`SteadyClock.lag` to how far it runs ahead of the
slowest one it hears from, and every cutoff — retention, the run TTL, idle MCP sessions — is taken from
:func:`cutoff_now`, ``now − lag``. A process ahead ages things later, never sooner; one behind is not
slowed. :meth:`SteadyClock.drift` says how far the wall clock has moved away, and the retention loop
logs it once when it passes :data:`DRIFT_WARNING_S`.

One per process, on purpose: it is a fact about the process (when it started), not state of an app.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

DRIFT_WARNING_S = 60.0


class SteadyClock:
    """UTC time that moves only as the monotonic clock does, from the wall clock at its start."""

    def __init__(self, wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._wall, self._monotonic = wall, monotonic
        self._start = datetime.fromtimestamp(wall(), UTC)
        self._start_monotonic = monotonic()
        self.id = uuid.uuid4().hex  # this process, in the database's table of clocks
        self.lag = 0.0  # seconds this clock runs ahead of the slowest live process's (service.db.retention.align)
        # each other process's last clock reading seen, and this clock's monotonic time when it was first seen
        self.peers: dict[str, tuple[datetime, float]] = {}

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._monotonic() - self._start_monotonic)

    def monotonic(self) -> float:
        return self._monotonic()

    def cutoff_now(self) -> datetime:
        """Now as the slowest live process counts it: what every age is measured against."""
        return self.now() - timedelta(seconds=self.lag)

    def drift(self) -> float:
        """How far the wall clock has moved from this clock since the start, in seconds (+: it jumped ahead)."""
        return self._wall() - self.now().timestamp()


PROCESS_CLOCK = SteadyClock()


def utcnow() -> datetime:
    """Now, UTC-aware, as :data:`PROCESS_CLOCK` counts it (see the module docstring): what rows are stamped with."""
    return PROCESS_CLOCK.now()


def cutoff_now() -> datetime:
    """Now as the slowest live process counts it: what ages are measured against (see the module docstring)."""
    return PROCESS_CLOCK.cutoff_now()
