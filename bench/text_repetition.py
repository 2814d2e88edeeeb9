"""Sentence repetition of the public splits' messages, per family (issue 19's ≤ 25 % target).

.venv/bin/python -m bench.text_repetition          # JSON: per split and family, with the masking described
                                                  # in service.env.store.repetition
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from service.env import PUBLIC, PUBLIC_SPLITS
from service.env.store.repetition import REPEATS, repetition


def report() -> dict[str, Any]:
    out: dict[str, Any] = {"repeats": REPEATS, "splits": {}}
    for split in PUBLIC_SPLITS:
        tickets = PUBLIC.tickets(split)
        out["splits"][split] = {
            "decision": repetition(t.message for t in tickets if t.family == "decision"),
            "workflow": repetition(t.message for t in tickets if t.family == "workflow"),
            "decision+workflow": repetition(t.message for t in tickets),
            "store": repetition(t.message for t in PUBLIC.store_tickets(split)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    print(json.dumps(report(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
