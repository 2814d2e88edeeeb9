"""Stored steps keep only what changed since the step before (ticket text, instructions and the history
so far are not repeated), and every read rebuilds exactly the observations that were stored whole before.
On both backends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from service import env as core
from service.app import create_app
from service.db.engine import json_serializer
from service.db.models import episodes as ep_table
from service.db.models import grades as grade_table
from service.db.models import transitions as tr_table
from service.db.observations import compact, expand
from service.env.policy import render_policy_markdown
from service.settings import Settings
from tests.api.test_runs import Client, create_run, play_run

WORKFLOW = "workflow-triage"
# Ten steps that never close the ticket: the episode ends truncated at the task's max_steps (10).
TEN_STEPS: list[dict[str, Any]] = [
    {"lookup": "order"},
    {"reply": "Hello, thanks for writing. We are looking at your order now."},
    {"add_tag": "Shipping"},
    {"reassign_queue": "Returns"},
    {"lookup": "policy"},
    {"decision": "request_info", "reply": "Could you send photos of the item and confirm delivery?"},
    {"lookup": "customer"},
    {"add_tag": "Damaged"},
    {"reply": "Thanks, one more moment please."},
    {"reassign_queue": "Escalations"},
]


async def stored_bytes(settings: Settings, episode_id: str) -> dict[str, int]:
    """What one episode occupies, as JSON text: its transitions, state snapshot and grade."""

    def read(conn: Any) -> dict[str, int]:
        rows = conn.execute(
            select(tr_table.c.action, tr_table.c.observation).where(tr_table.c.episode_id == episode_id)
        ).all()
        state = conn.execute(select(ep_table.c.state).where(ep_table.c.id == episode_id)).scalar_one()
        grade = (
            conn.execute(select(grade_table.c.breakdown).where(grade_table.c.episode_id == episode_id)).scalars().all()
        )
        size = lambda v: len(json_serializer(v).encode())  # noqa: E731 - a one-line local helper
        return {
            "steps": len(rows),
            "observations": sum(size(r.observation) for r in rows),
            "actions": sum(size(r.action) for r in rows),
            "state": size(state),
            "grade": sum(size(g) for g in grade),
        }

    db = settings.database()
    try:
        return await db.read(read)
    finally:
        await db.dispose()


async def test_a_ten_step_episode_stores_a_few_kilobytes(settings: Settings) -> None:
    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        await client.post("/reset", json={"task_id": WORKFLOW, "seed": 5, "split": "dev", "episode_id": "ten"})
        for action in TEN_STEPS:
            body = (await client.post("/step", json={"episode_id": "ten", "action": action})).json()
        assert body["done"] and body["observation"]["step_count"] == 10
    size = await stored_bytes(settings, "ten")
    total = sum(v for k, v in size.items() if k != "steps")
    print(f"\n10-step episode stores {total} bytes: {size}")
    assert size["steps"] == 10
    # The first step keeps the whole observation (ticket, message, instructions: ~2.5 kB), later ones what
    # changed; the policy lookup's document (~6 kB since P11-P14) is what changed at its step. Stored whole:
    # ~30 kB. The budget is the document plus a fixed allowance, so it does not track the policy's length.
    # (#21 added a required check to every rubric — one more component in each stored grade — and longer
    # instructions: about 150 bytes more, within the allowance raised from 7,500 to 8,000.)
    document = len(render_policy_markdown().encode())
    assert size["observations"] <= document + 4_000 and total <= document + 8_000, size


EPISODE_TOKEN = "step-storage-owner-".ljust(40, "0")
OWNER = {"X-Episode-Token": EPISODE_TOKEN}


async def play_scripted(client: Client, prefix: str) -> dict[str, Any]:
    """Every read that returns stored observations, for a fixed set of episodes (ids under ``prefix``)."""
    got: dict[str, Any] = {}
    for t, task in enumerate(core.TASKS):
        eid = f"{prefix}-{task}"
        # a chosen id with the client's own token, the same in both databases (a made one would differ)
        got[f"{task}/reset"] = (
            await client.post(
                "/reset",
                json={
                    "task_id": task,
                    "seed": 3 + t,
                    "split": "dev",
                    "episode_id": eid,
                    "episode_token": EPISODE_TOKEN,
                },
            )
        ).json()
        for i, action in enumerate(TEN_STEPS + [{"close_ticket": True}]):
            resp = await client.post(
                "/step", json={"episode_id": eid, "action": action, "request_id": f"r{i}"}, headers=OWNER
            )
            got[f"{task}/step{i}"] = (resp.status_code, resp.json())
            if resp.status_code != 200 or resp.json()["done"]:
                break
        for i, action in enumerate(TEN_STEPS):  # retried request ids answer the stored step
            resp = await client.post(
                "/step", json={"episode_id": eid, "action": action, "request_id": f"r{i}"}, headers=OWNER
            )
            got[f"{task}/replay{i}"] = (resp.status_code, resp.json())
        got[f"{task}/resume"] = (
            await client.post("/reset", json={"episode_id": eid, "resume": True}, headers=OWNER)
        ).json()
        got[f"{task}/view"] = (await client.get(f"/episodes/{eid}", headers=OWNER)).json()
    run = await create_run(client, split="dev", limit_per_task=1, trials=2)
    await play_run(client, run)
    got["trajectories"] = [
        json.loads(line) for line in (await client.get(f"/runs/{run['run_id']}/trajectories.jsonl")).text.splitlines()
    ]
    return normalized(got, {prefix: "EP", run["run_id"]: "RUN"})


def normalized(value: Any, names: dict[str, str]) -> Any:
    """Ids replaced by placeholders, timestamps dropped: what must be equal between two databases."""
    if isinstance(value, dict):
        return {k: normalized(v, names) for k, v in value.items() if not k.endswith("_at")}
    if isinstance(value, list | tuple):
        return [normalized(v, names) for v in value]
    if isinstance(value, str):
        for old, new in names.items():
            value = value.replace(old, new)
    return value


async def test_compact_steps_read_back_exactly_what_whole_steps_did(
    settings: Settings, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every step stored its whole observation. After: only what changed. Every read of the
    same episodes — step replies, retried request ids, resume, the episode page, trajectories — is equal."""
    from service.db import observations

    async def scenario(prefix: str) -> dict[str, Any]:
        async with AsyncTestClient(app=create_app(settings)) as client:
            return await play_scripted(client, prefix)

    with monkeypatch.context() as m:
        m.setattr(observations, "compact", lambda previous, observation: observation)  # as before this change
        before = await scenario("eid-whole-rows")  # prefixes no policy or message text contains
    after = await scenario("eid-delta-rows")
    assert json.dumps(after) == json.dumps(before)  # key order included


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["a", "b", "history", "n", "x"]),
            st.recursive(
                st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3),
                lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
                max_leaves=8,
            ),
        ),
        min_size=1,
        max_size=6,
    )
)
@hsettings(max_examples=300, deadline=None)
def test_compact_then_expand_gives_back_every_observation_exactly(sequence: list[dict[str, Any]]) -> None:
    previous = None
    for observation in sequence:
        stored = json.loads(json.dumps(compact(previous, observation)))  # through JSON, as the database keeps it
        rebuilt = expand(previous, stored)
        # the same keys, values and JSON types (1, 1.0 and true differ); key order is the integration test's
        assert json.dumps(rebuilt, sort_keys=True) == json.dumps(observation, sort_keys=True)
        previous = rebuilt
