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


# The audit's look-alikes that a hand list let through (#21 follow-up): a capital I for an l, "rn" for "m",
# small capitals; and a few more of Unicode's confusables (UTS #39) no hand list had.
UNICODE_LOOK_ALIKES = [
    ("Claude", "CIaude"),  # capital I (U+0049) → l
    ("modern", "modem"),  # rn → m
    ("Claude", "\u1d04\u029f\u1d00\u1d1c\u1d05\u1d07"),  # ᴄʟᴀᴜᴅᴇ: small capitals
    ("Gemini", "\u0262\u1d07\u1d0d\u026a\u0274\u026a"),  # ɢᴇᴍɪɴɪ
    ("llama", "\u217c\u217cama"),  # ⅼⅼama: Roman numeral fifty (NFKC) and
    ("llama", "\U0001d4c1\U0001d4c1ama"),  # mathematical script l
    ("paypal", "paypa\u0049"),
    ("scout", "\u0455\u0441\u043e\u057d\u0074"),  # Cyrillic dze, es, o; Armenian seh
    ("agent", "\u0251gent"),  # Latin alpha
    ("vivid", "\u2174\u2170\u2174\u2170d"),  # Roman numerals
    ("wall-e", "wa\u01c0\u01c0\u2010e"),  # dental clicks, a hyphen
    ("rl-bot", "r\u04c0-b\u03bft"),  # Cyrillic palochka, Greek omicron
]


@pytest.mark.parametrize(("a", "b"), UNICODE_LOOK_ALIKES)
def test_unicode_confusable_skeletons_make_look_alikes_one_name(a: str, b: str) -> None:
    assert name_key(a) == name_key(b), (name_key(a), name_key(b))


@pytest.mark.parametrize(
    ("a", "b"), [("Claude", "Clause"), ("modern", "modes"), ("ciaude", "claude"), ("Bot", "Boat"), ("ai", "al")]
)
def test_names_that_do_not_look_alike_stay_apart(a: str, b: str) -> None:
    """A lower-case i is not an l, an s is not a d: the skeleton merges what looks the same, no more."""
    assert name_key(a) != name_key(b)


def test_the_skeleton_is_a_fixed_point() -> None:
    """A key keyed again is itself (a name stored as its key finds itself, whichever form came first)."""
    for a, b in [*UNICODE_LOOK_ALIKES, ("ΑΒΓ", "abc"), ("Ǆ", "dz"), ("ẞ", "ss")]:
        for name in (a, b):
            assert name_key(name_key(name)) == name_key(name), name


async def test_the_audits_look_alikes_of_a_bound_name_are_refused(settings: Settings) -> None:
    app = create_app(replace(settings, submitter_keys=f"alice:{ALICE_KEY}"))
    async with AsyncTestClient(app=app) as client:
        for bound in ("Claude", "modern"):
            resp = await client.post("/runs", json={**BODY, "agent": bound}, headers=auth(ALICE_KEY))
            assert resp.status_code == 201
        for lookalike in ("CIaude", "modem", "\u1d04\u029f\u1d00\u1d1c\u1d05\u1d07"):
            assert_problem(await client.post("/runs", json={**BODY, "agent": lookalike}), 409, "belongs to submitter")


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
    # the older binding keeps the skeleton; its look-alike goes (keys are Unicode skeletons since 0010: "acrne")
    assert rows == {name_key("acme"): "alice", "bot": "bob"}


def test_revision_0010_rekeys_bound_names_to_unicode_skeletons_from_the_names_runs_used(tmp_path) -> None:
    """Before 0010 a key was the hand-list skeleton, case folded: "Claude" was "claude" and the look-alike
    "CIaude" was "ciaude", a key of its own. After: alice's "Claude" holds the Unicode skeleton, and the
    look-alike bound later by mallory does not get it."""
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    first, later = datetime(2026, 1, 1, tzinfo=UTC).isoformat(), datetime(2026, 2, 1, tzinfo=UTC).isoformat()
    try:
        with engine.begin() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0009")
            for key, who, when in (("claude", "alice", first), ("ciaude", "mallory", later), ("modern", "bob", first)):
                conn.execute(
                    text("INSERT INTO agent_names (name_key, submitter, created_at) VALUES (:k, :s, :c)"),
                    {"k": key, "s": who, "c": when},
                )
            for i, (agent, who, when) in enumerate((("Claude", "alice", first), ("CIaude", "mallory", later))):
                conn.execute(
                    text(
                        "INSERT INTO runs (id, token_sha256, agent, model, split, trials, task_ids, episodes_total, "
                        "next_index, episodes_done, status, dataset_version, grader_version, created_at, updated_at, "
                        "submitter, full_split, revision) VALUES (:id, 'x', :a, '', 'dev', 1, '[]', 1, 0, 0, 'active', "
                        "'v', 'v', :c, :c, :s, 0, 0)"
                    ),
                    {"id": f"run_{i}", "a": agent, "c": when, "s": who},
                )
            command.upgrade(cfg, "head")
            rows = dict(conn.execute(text("SELECT name_key, submitter FROM agent_names")).all())
    finally:
        engine.dispose()
    assert rows[name_key("CIaude")] == rows[name_key("Claude")] == "alice"
    assert rows[name_key("modem")] == "bob" and "modern" not in rows and rows["ciaude"] == "mallory"
