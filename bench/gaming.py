"""The gaming table: every degenerate strategy of the gaming suite on every task, next to the
reference agents and each pool's best constant answer — the README's table is this output.

    .venv/bin/python -m bench.gaming                      # JSON on stdout
    .venv/bin/python -m bench.gaming --markdown           # the README table

The strategies are :mod:`bench.gaming_agents` (the gaming suite, ``tests/env/test_gaming.py``, bounds
each of them); this script only plays them on the public dev split (the reward prober on train, where
plain episodes have dense rewards) and reports each task's resolved rate and mean score, beside the two
shipped baselines. (The oracles live with the tests and never in this table's imports: bench/ depends on
nothing under tests/; the suite checks the oracle resolves every dev ticket.) Deterministic: two runs
print the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bench.gaming_agents import constant_ceiling, labelled_rows, play_pool, strategies
from service.env import PUBLIC
from service.env import TICKET_TASKS as TASKS  # the ticket tasks; the store desk's rows: store_rows()
from service.env.agents import make_agent


def _reference(name: str) -> Any:
    def make(task_id: str, seed: int) -> object:
        task = TASKS[task_id]
        pool = PUBLIC.pool("dev", task.family, task.difficulty)
        return make_agent(name, seed, pool[seed % len(pool)])

    return make


def table() -> dict[str, Any]:
    train = {t: labelled_rows(t, "train", PUBLIC) for t in TASKS}
    rows: list[dict[str, Any]] = []
    for strategy in strategies(train, PUBLIC, "dev"):
        split = "train" if "prober" in strategy.name else "dev"
        cells = {t: play_pool(strategy.make, t, split, PUBLIC) for t in TASKS}
        rows.append(
            {
                "strategy": strategy.name,
                "split": split,
                "kind": "guesses" if strategy.guesses else "answers nothing",
                "tasks": {t: {"resolved": round(r, 3), "mean": round(m, 3)} for t, (r, m) in cells.items()},
            }
        )
    ceilings = {t: constant_ceiling(t, "dev", PUBLIC) for t in TASKS}
    rows.append(
        {
            "strategy": "best constant answer (plain or after asking; caps: 0.35 / 0.55)",
            "split": "dev",
            "kind": "reference",
            "tasks": {t: {"resolved": round(r, 3), "mean": round(m, 3)} for t, (r, m) in ceilings.items()},
        }
    )
    for name in ("random", "heuristic"):
        cells = {t: play_pool(_reference(name), t, "dev", PUBLIC) for t in TASKS}
        rows.append(
            {
                "strategy": f"{name} agent",
                "split": "dev",
                "kind": "reference",
                "tasks": {t: {"resolved": round(r, 3), "mean": round(m, 3)} for t, (r, m) in cells.items()},
            }
        )
    return {"tasks": list(TASKS), "rows": rows}


def markdown(report: dict[str, Any]) -> str:
    tasks = report["tasks"]
    lines = ["| strategy | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    for row in report["rows"]:
        cells = [f"{row['tasks'][t]['resolved']:.2f} / {row['tasks'][t]['mean']:.2f}" for t in tasks]
        lines.append(
            f"| {row['strategy']}{' (train)' if row['split'] == 'train' else ''} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true", help="print the README table (resolved / mean per task)")
    args = parser.parse_args(argv)
    report = table()
    print(markdown(report) if args.markdown else json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
