"""Stored observations keep only what a step changed.

Every observation repeats what is static (ticket text, customer message, instructions) and the whole
history so far; stored whole at every step, a 10-step episode took ~25 kB (~200 kB with long replies).
A transition now stores its observation as a *delta* against the previous step's observation:
values that changed, and for a list that grew (the history), only the new items. The first step is
stored whole, so an episode's transitions rebuild themselves, in step order, without anything else.

Rows stored whole (every row written before this, and any step whose keys differ from the previous
one's) have no ``$delta`` key and are read as they are. Rebuilding is exact: same keys, values and
JSON types (``1``, ``1.0`` and ``true`` are different values here). Key order follows the first step's
stored row, so on SQLite it is the order the step answered with, and on PostgreSQL JSONB's order, as
before.
"""

from __future__ import annotations

from typing import Any

import msgspec

DELTA = "$delta"


_encode = msgspec.json.Encoder().encode


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, types and key order included (``==`` says ``1 == 1.0 == True``).

    Equal by ``==`` and written the same by the JSON encoder the database uses: ``1``, ``1.0`` and ``true``,
    ``0.0`` and ``-0.0``, ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` encode differently, and what encodes the
    same but is not equal (infinity and ``null``) fails ``==``. Both comparisons run in C: the history, compared
    item by item on every step, was most of the writer thread's Python time."""
    if a is b:
        return True
    try:
        return bool(a == b) and _encode(a) == _encode(b)
    except (TypeError, ValueError, OverflowError, RecursionError):  # not JSON the encoder takes: walk it
        return _same_walk(a, b)


def _same_walk(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_walk(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_walk(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)  # -0.0 is not 0.0
    return bool(a == b)


def compact(previous: dict[str, Any] | None, observation: dict[str, Any]) -> dict[str, Any]:
    """What to store for ``observation`` when the step before showed ``previous`` (None: store it whole)."""
    if previous is None or previous.keys() != observation.keys():
        return observation
    changed: dict[str, Any] = {}
    extended: dict[str, list[Any]] = {}
    for key, value in observation.items():
        before = previous[key]
        if _same(before, value):
            continue
        if (
            isinstance(value, list)
            and isinstance(before, list)
            and len(value) > len(before)
            and _same(before, value[: len(before)])
        ):
            extended[key] = value[len(before) :]
        else:
            changed[key] = value
    delta: dict[str, Any] = {}
    if changed:
        delta["set"] = changed
    if extended:
        delta["extend"] = extended
    return {DELTA: delta}


def expand(previous: dict[str, Any] | None, stored: dict[str, Any]) -> dict[str, Any]:
    """The whole observation a stored row stands for, given the previous step's whole observation."""
    if DELTA not in stored:
        return stored
    if previous is None:
        raise ValueError("a stored observation delta without the step before it")
    delta = stored[DELTA]
    changed, extended = delta.get("set", {}), delta.get("extend", {})
    return {
        key: changed[key] if key in changed else (value + extended[key] if key in extended else value)
        for key, value in previous.items()
    }


def expand_all(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The whole observations of an episode's stored rows, in step order from its first step."""
    out: list[dict[str, Any]] = []
    previous = None
    for row in stored:
        previous = expand(previous, row)
        out.append(previous)
    return out


__all__ = ["DELTA", "compact", "expand", "expand_all"]
