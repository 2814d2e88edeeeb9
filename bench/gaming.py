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
from bench.store_gaming_agents import STRATEGIES as STORE_STRATEGIES
from service.env import PUBLIC
from service.env import TASKS as EVERY_TASK
from service.env import TICKET_TASKS as TASKS  # the ticket tasks; the store desk's: store_table()
from service.env.agents import make_agent, play

STORE_TASKS = [t.id for t in EVERY_TASK.values() if t.family == "store"]


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


def _store_cell(make: Any, task_id: str) -> dict[str, float]:
    task = EVERY_TASK[task_id]
    pool = PUBLIC.pool("dev", "store", task.difficulty)
    grades = [play(make(seed, tid), task_id, seed, "dev")[0] for seed, tid in enumerate(pool)]
    return {
        "resolved": round(sum(g.resolved for g in grades) / len(grades), 3),
        "mean": round(sum(g.score for g in grades) / len(grades), 3),
    }


def _fresh(make: Any) -> Any:
    """A strategy's player per episode (strategies take no seed or ticket)."""
    return lambda seed, ticket_id: make()


def store_table() -> dict[str, Any]:
    """The store desk's cheap strategies and reference agents on the dev pools (bound: 0.05 on medium and
    hard; the suite adds acting without verifying identity, built on the test-only oracle)."""
    rows = []
    players: dict[str, Any] = {name: _fresh(make) for name, make in STORE_STRATEGIES.items()}
    players["random agent"] = lambda seed, tid: make_agent("random", seed, tid)
    players["heuristic agent"] = lambda seed, tid: make_agent("heuristic", seed, tid)
    for name, make in players.items():
        rows.append({"strategy": name, "split": "dev", "tasks": {t: _store_cell(make, t) for t in STORE_TASKS}})
    return {"tasks": STORE_TASKS, "rows": rows}


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
    report, store = table(), store_table()
    if args.markdown:  # methodology's two blocks: gaming, then store-gaming
        print(markdown(report) + "\n\n" + markdown(store))
    else:
        print(json.dumps({**report, "store": store}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
