"""Look-alike agent names (issue 21, finding 13): a name a reader cannot tell from a bound one is that
name. Before, invisible characters that are not format characters (a Hangul filler, the combining
grapheme joiner, a variation selector, the braille blank) and letters of other scripts passed as a new
name; now they are refused (invisible) or folded onto the bound name's skeleton (409)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from alembic import command
from litestar.testing import AsyncTestClient
from sqlalchemy import create_engine, text

from service.app import create_app
from service.db.migrate import alembic_config
from service.db.names import name_key
from service.settings import Settings
from tests.api.test_api_http import assert_problem
from tests.api.test_runs import ALICE_KEY, auth

BODY = {"split": "dev", "task_ids": ["decision-easy"], "limit_per_task": 1}
INVISIBLE = ["Acme\u3164", "Ac\u034fme", "Acme\ufe0f", "Ac\u2800me", "Acme\u115f", "Acme\U000e0041", "Acme\u180e"]
LOOK_ALIKES = ["\u0410cme", "Acm\u0435", "\u0391CME", "Acm\u00e9", "Ac\u0301me", "ACME", "𝐀𝐜𝐦𝐞", "Acme  "]


async def test_look_alikes_of_a_bound_name_are_refused(settings: Settings) -> None:
    app = create_app(replace(settings, submitter_keys=f"alice:{ALICE_KEY}"))
    async with AsyncTestClient(app=app) as client:
        assert (await client.post("/runs", json={**BODY, "agent": "Acme"}, headers=auth(ALICE_KEY))).status_code == 201
        for hidden in INVISIBLE:
            assert_problem(await client.post("/runs", json={**BODY, "agent": hidden}), 422, "invisible")
        for lookalike in LOOK_ALIKES:
            resp = await client.post("/runs", json={**BODY, "agent": lookalike})
            assert_problem(resp, 409, "belongs to submitter 'alice'")
        assert (
            await client.post("/runs", json={**BODY, "agent": "Acme", "model": "x"}, headers=auth(ALICE_KEY))
        ).is_success
        for own_script in ("Москва", "東京", "मुंबई"):  # other scripts keep their own letters
            assert (await client.post("/runs", json={**BODY, "agent": own_script})).status_code == 201, own_script


@pytest.mark.parametrize(("a", "b"), [("gpt-5", "GPT\u20115"), ("Agent0", "agentO"), ("ВОТ", "bot"), ("Ivan", "IVAN")])
def test_one_skeleton_for_names_that_look_alike(a: str, b: str) -> None:
    assert name_key(a) == name_key(b)


def test_revision_0008_rekeys_bound_names_to_skeletons(tmp_path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        with engine.begin() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0007")
            first, later = datetime(2026, 1, 1, tzinfo=UTC).isoformat(), datetime(2026, 2, 1, tzinfo=UTC).isoformat()
            for key, who, when in (("acme", "alice", first), ("\u0430cme", "mallory", later), ("вот", "bob", first)):
                conn.execute(
                    text("INSERT INTO agent_names (name_key, submitter, created_at) VALUES (:k, :s, :c)"),
                    {"k": key, "s": who, "c": when},
                )
            command.upgrade(cfg, "head")
            rows = dict(conn.execute(text("SELECT name_key, submitter FROM agent_names")).all())
    finally:
        engine.dispose()
    assert rows == {"acme": "alice", "bot": "bob"}  # the older binding keeps the skeleton; its look-alike goes
