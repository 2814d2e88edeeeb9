"""Record a snapshot of verdicts, or compare one with a recording: what :mod:`tests.env.reader_snapshot` and
:mod:`tests.env.episode_snapshot` share."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The keys whose recordings differ (or exist on one side only)."""
    keys = sorted(set(before) | set(after))
    return [k for k in keys if before.get(k) != after.get(k)]


def main(argv: list[str], record: Callable[[], dict[str, Any]], what: str) -> int:
    """``record PATH`` writes a snapshot; ``compare PATH`` prints every difference from it (exit 1 if any)."""
    command, path = argv[1], Path(argv[2])
    now = json.loads(json.dumps(record(), sort_keys=True))
    if command == "record":
        path.write_text(json.dumps(now, sort_keys=True), encoding="utf-8")
        print(f"recorded {len(now)} {what} to {path}")
        return 0
    before = json.loads(path.read_text(encoding="utf-8"))
    differences = compare(before, now)
    for key in differences:
        print(key, "\n  before:", json.dumps(before.get(key))[:600], "\n  after: ", json.dumps(now.get(key))[:600])
    print(f"{len(before)} {what} before, {len(now)} after, {len(differences)} differ")
    return 1 if differences else 0
