"""Scripted test agents and a sequential replay through the pure core (helpers, no tests; shared by
the concurrency, restart and end-to-end tests)."""

from __future__ import annotations

import random
from typing import Any

from service import env as core
from service.db import repository as repo
from service.db.engine import Database

REPLIES = ["Thanks for reaching out; we are checking your order now.", "Could you send a photo of the item, please?"]


def script(agent: int, length: int = 40) -> list[dict[str, Any]]:
    """A deterministic, varied action sequence for agent number ``agent``."""
    rng = random.Random(agent)
    options: list[dict[str, Any]] = [
        {"lookup": "policy"},
        {"lookup": "order"},
        {"add_tag": rng.choice(["Refund", "Replacement", "Policy_Denied"])},
        {"reply": rng.choice(REPLIES)},
        {"reassign_queue": rng.choice(["Returns", "Escalations"])},
        {"decision": "request_info", "reply": REPLIES[1]},
        {"decision": rng.choice(["approve_refund", "approve_replacement", "reject"])},
        {"close_ticket": True, "reply": REPLIES[0]},
    ]
    return [rng.choice(options) for _ in range(length)]


def owner(reset_body: dict[str, Any]) -> dict[str, str]:
    """Headers that act on the episode a reset response started (a client-chosen id needs its token)."""
    token = reset_body["metadata"].get("episode_token")
    return {"X-Episode-Token": token} if token else {}


def reset_args(agent: int) -> dict[str, Any]:
    tasks = list(core.TASKS)
    return {"task_id": tasks[agent % len(tasks)], "seed": 1000 + agent, "episode_id": f"agent-{agent:03d}"}


async def assert_matches_replay(
    db: Database, episode_id: str, applied: list[dict[str, Any]], rewards: list[float]
) -> None:
    """Stored transitions are exactly this agent's, and a sequential replay through the core agrees."""
    record = await repo.get_episode(db, episode_id)
    assert record is not None
    stored = await repo.list_transitions(db, episode_id)
    assert [t.step_index for t in stored] == list(range(1, len(applied) + 1))
    assert record.step_count == len(applied)
    state, _ = core.reset(record.task_id, record.seed, record.split)
    replay_rewards = []
    for t, action in zip(stored, applied, strict=True):
        parsed = core.Action.model_validate(action)
        assert t.action == parsed.as_json()
        assert t.episode_id == episode_id and t.observation["episode_id"] == episode_id
        result = core.step(state, parsed)
        state = result.state
        replay_rewards.append(result.reward)
        assert t.reward == result.reward and t.done == result.done
    assert replay_rewards == rewards
    assert state.as_json() == record.state
    assert record.status == ("done" if state.done else "active")
    if state.done:
        grade = await repo.get_grade(db, episode_id, core.GRADER_VERSION)
        assert grade is not None and grade.score == core.grade_episode(state).score
