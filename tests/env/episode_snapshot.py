"""Record every episode of the reference agents and every store-desk reading, to prove a restructuring
changes none of them (the store desk's counterpart of :mod:`tests.env.reader_snapshot`).

    python -m tests.env.episode_snapshot record before.json   # before the change
    python -m tests.env.episode_snapshot compare before.json  # after it: lists every difference

What is recorded, on every ticket of the train and dev pools of every task:

- for each reference agent (``random``, ``heuristic`` and the two oracles; the store desk's oracles are
  the gold plan and the observable oracle): the actions it sent and the episode's grade (every check and
  penalty, with its detail);
- at the store desk, for every message the agent sent: what the store's readers read in it (refusal
  reasons told and asserted, amounts, timelines, the topics the customer hears asked, whether a sentence
  asks for a yes), and every answer the customer gave;
- every sentence of the store phrasing banks (``tests/env/store_phrasings.py``), read the same way.

Deterministic code, so "identical" is exact equality.
"""

from __future__ import annotations

import sys
from typing import Any

from service.env import PUBLIC, TASKS
from service.env.agents import play
from service.env.core import reset, step
from service.env.language import sentences
from service.env.models import Action
from service.env.store.customer import asks_for_a_yes, topics_in
from service.env.store.reading import asserted_reasons, stated_amounts, stated_reasons, stated_timelines
from tests.env.reader_snapshot import AGENTS, reference_agent
from tests.env.snapshots import main
from tests.env.store_phrasings import BLIND, BLIND_LATER, OUTCOMES, TUNED

SPLITS = ("train", "dev")


def reading(text: str) -> dict[str, Any]:
    """Everything the store desk's readers read in one message."""
    return {
        "stated": sorted(stated_reasons(text)),
        "asserted": sorted(asserted_reasons(text)),
        "amounts": sorted(stated_amounts(text)),
        "timelines": sorted(stated_timelines(text)),
        "topics": sorted(topics_in(text)),
        "yes": [asks_for_a_yes(s) for s in sentences(text)],
    }


def _store_episode(agent: Any, task_id: str, seed: int, split: str) -> dict[str, Any]:
    state, obs = reset(task_id, seed, split)
    actions: list[Action] = []
    while not state.done:
        action = agent.act(obs)
        actions.append(action)
        result = step(state, action)
        state, obs = result.state, result.observation
    sent = [a.arguments["text"] for a in actions if a.tool == "send_message" and isinstance(a.arguments, dict)]
    return {
        "actions": [a.model_dump(mode="json", exclude_defaults=True) for a in actions],
        "grade": result.grade.model_dump(mode="json", exclude={"grader_version"}),
        "customer": [e.text for e in state.history if e.role == "customer"],
        "readings": {t: reading(t) for t in sent if isinstance(t, str)},
    }


def record() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in SPLITS:
        for task_id, task in TASKS.items():
            pool = PUBLIC.pool(split, task.family, task.difficulty)
            store = task.store_desk
            for agent in AGENTS:
                for seed, ticket_id in enumerate(pool):
                    player = reference_agent(agent, task.family, seed, ticket_id)
                    if store:
                        out[f"{split}/{agent}/{task_id}/{seed}"] = _store_episode(player, task_id, seed, split)
                        continue
                    grade, actions = play(player, task_id, seed, split)
                    out[f"{split}/{agent}/{task_id}/{seed}"] = {
                        "actions": [a.model_dump(mode="json", exclude_defaults=True) for a in actions],
                        "grade": grade.model_dump(mode="json", exclude={"grader_version"}),
                    }
    for name, bank in (("blind", BLIND), ("tuned", TUNED), ("blind_later", BLIND_LATER)):
        for cls, sides in bank.items():
            for side, texts in sides.items():
                for i, text in enumerate(texts):
                    out[f"phrasings/{name}/{cls}/{side}/{i}"] = reading(text)
    for i, text in enumerate(OUTCOMES):
        out[f"phrasings/outcomes/{i}"] = reading(text)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv, record, "records"))
