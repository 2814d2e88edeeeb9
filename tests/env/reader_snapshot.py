"""Record every verdict of the reply and question readers, to prove a restructuring changes none of them.

    python -m tests.env.reader_snapshot record before.json   # on the old reader
    python -m tests.env.reader_snapshot compare before.json  # on the new one: lists every difference

What is recorded: for every entry of every corpus in ``tests/env/corpus/`` (bound to the first three
tickets of its case), :func:`~service.env.replies.meaning` and :func:`~service.env.replies.judge` in full;
for every question corpus, the topics :func:`~service.env.customer.topics_asked` reads; and for each
reference agent (random, heuristic, both oracles) on every ticket of every task's dev pool, the episode's
grade (every check and penalty) and the meaning of every text the agent sent. Deterministic readers, so
"identical" is exact equality.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

from service.env import PUBLIC, TASKS
from service.env.agents import play
from service.env.customer import topics_asked
from service.env.replies import meaning
from tests.env.corpus_binding import CORPUS, bind, fill, judged, load
from tests.env.oracles import make_reference
from tests.env.snapshots import main
from tests.env.store_oracles import GoldOracle, ObservableOracle

AGENTS = ("random", "heuristic", "oracle", "observable-oracle")


def _meaning(text: str) -> dict[str, Any]:
    return {k: sorted(v) if isinstance(v, frozenset) else v for k, v in asdict(meaning(text)).items()}


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if len(value.split()) > 2 else []
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def reference_agent(name: str, family: str, seed: int, ticket_id: str) -> Any:
    """A reference agent of the family's desk (the store desk's oracles are its own)."""
    if family == "store" and name == "oracle":
        return GoldOracle(ticket_id, PUBLIC)
    if family == "store" and name == "observable-oracle":
        return ObservableOracle()
    return make_reference(name, seed, ticket_id)


def record() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(CORPUS.glob("replies*.jsonl")):
        for entry in load(path.name):
            for nth in (0, 1, 2):
                ticket, verdict, _ = bind(entry["case"], nth)
                judgement, ok = judged(entry, nth)
                out[f"{path.name}/{entry['id']}/{nth}"] = {
                    "meaning": _meaning(fill(entry["reply"], ticket, verdict)),
                    "judgement": asdict(judgement),
                    "accepted": ok,
                }
    for path in sorted(CORPUS.glob("questions*.jsonl")):
        for q in load(path.name):
            out[f"{path.name}/{q['id']}"] = sorted(topics_asked(q["question"]))
    for agent in AGENTS:
        for task_id, task in TASKS.items():
            for seed in range(len(PUBLIC.pool("dev", task.family, task.difficulty))):
                ticket_id = PUBLIC.pool("dev", task.family, task.difficulty)[seed]
                grade, actions = play(reference_agent(agent, task.family, seed, ticket_id), task_id, seed, "dev")
                texts = [t for a in actions for t in _texts(a.model_dump(mode="json"))]
                out[f"{agent}/{task_id}/{seed}"] = {
                    "grade": grade.model_dump(mode="json", exclude={"grader_version"}),
                    "meanings": {t: _meaning(t) for t in texts},
                }
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv, record, "verdicts"))
