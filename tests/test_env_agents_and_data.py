"""Reference agents (oracle solves everything; random < heuristic < oracle) and the dataset."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from service.env import TASKS, Action, Dataset, derive_test_key, reset, step
from service.env.agents import HeuristicAgent, _REASON_SENTENCES, evaluate_agent, play_episode
from service.env.customer import answer, topics_asked
from service.env.dataset import PUBLIC, render_artefacts
from service.env.generator import SPLIT_SIZES
from service.env.policy import REASONS, evaluate
from service.env.world import DIFFICULTIES, FAMILIES

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("task_id", list(TASKS))
def test_oracle_scores_one_on_every_dev_ticket_of_every_task(task_id: str) -> None:
    task = TASKS[task_id]
    pool = PUBLIC.pool("dev", task.family, task.difficulty)
    scores = [play_episode("oracle", task_id, seed, "dev")[0] for seed in range(len(pool))]
    assert scores == [1.0] * len(pool)


def test_random_below_heuristic_below_oracle_per_family_on_dev() -> None:
    results = {a: evaluate_agent(a, "dev", 66) for a in ("random", "heuristic", "oracle")}
    for family in FAMILIES:
        ids = [t.id for t in TASKS.values() if t.family == family]
        mean = {a: sum(r["tasks"][i]["mean"] for i in ids) / len(ids) for a, r in results.items()}
        assert mean["random"] < mean["heuristic"] < mean["oracle"] == 1.0, (family, mean)


def test_heuristic_agent_never_reads_gold_or_hidden_facts() -> None:
    """The heuristic's inputs are observations only: it runs with the ticket store unreachable."""
    import service.env.agents as agents

    source = Path(agents.__file__).read_text()
    heuristic_src = source.split("class HeuristicAgent")[1].split("class OracleAgent")[0]
    for forbidden in ("evaluate(", "load_ticket", ".hidden", "verdict", "gold"):
        assert forbidden not in heuristic_src, forbidden
    state, obs = reset("decision-hard", 4, "dev")
    agent = HeuristicAgent()
    while not state.done:
        result = step(state, agent.act(obs))
        state, obs = result.state, result.observation


def test_reason_sentences_state_every_reason() -> None:
    for reason, phrases in REASONS.items():
        assert any(p in _REASON_SENTENCES[reason] for p in phrases), reason


# ----------------------------------------------------------------------- scripted customer

def test_customer_answers_what_was_asked_and_reveals_only_that() -> None:
    t = next(t for t in PUBLIC.tickets("train") if t.scenario == "delivered_but_missing")
    text, revealed = answer(t, "Could you check with your neighbours whether the parcel turned up?", 1)
    assert revealed == {"delivery"} and text
    text2, revealed2 = answer(t, "Could you send photos?", 1)
    assert revealed2 == frozenset()  # nothing hidden about photos on this ticket
    _, nothing = answer(t, None, 1)
    assert nothing == frozenset()
    assert answer(t, "Could you check with your neighbours?", 1) == answer(t, "Could you check with your neighbours?", 1)


def test_customer_answer_depends_on_hidden_facts() -> None:
    t = next(t for t in PUBLIC.tickets("train") if t.scenario == "damaged_without_photos")
    damage = t.model_copy(update={"hidden": t.hidden.model_copy(update={"photos_show": "damage"})})
    wear = t.model_copy(update={"hidden": t.hidden.model_copy(update={"photos_show": "normal_wear"})})
    q = "Please send photos of the damage."
    assert answer(damage, q, 1)[0] != answer(wear, q, 1)[0]
    assert evaluate(damage, frozenset({"photos"})).gold.startswith("approve")
    assert evaluate(wear, frozenset({"photos"})).gold == "reject"


def test_topics_are_read_from_the_question() -> None:
    assert topics_asked("Can you send a picture and tell me if it was worn?") == {"photos", "usage"}
    assert topics_asked("ok") == frozenset()


def test_request_info_episode_reveals_and_then_grades_the_final_decision() -> None:
    pool = PUBLIC.pool("dev", "decision", "easy")
    seed = next(i for i, tid in enumerate(pool) if evaluate(PUBLIC.ticket(tid)).ask_topic == "photos")
    state, _ = reset("decision-easy", seed, "dev")
    r1 = step(state, Action(decision="request_info", reply="Please send photos of the item."))
    assert r1.reward == 0.3 and not r1.done and r1.observation.history[-1].role == "customer"
    assert r1.state.revealed == ("photos",)


# ------------------------------------------------------------------------------- dataset

def test_splits_have_the_promised_sizes_and_are_balanced() -> None:
    dataset = Dataset(test_key=derive_test_key("balance"))
    for split, size in SPLIT_SIZES.items():
        tickets = dataset.tickets(split)
        assert len(tickets) == size
        cells = Counter((t.family, t.difficulty) for t in tickets)
        assert set(cells) == {(f, d) for f in FAMILIES for d in DIFFICULTIES}
        assert max(cells.values()) - min(cells.values()) <= 1
        golds = Counter(evaluate(t).gold for t in tickets if t.family == "decision")
        assert set(golds) == {"approve_refund", "approve_replacement", "reject", "request_info"}
        assert min(golds.values()) / max(golds.values()) > 0.6, golds
    assert sum(SPLIT_SIZES.values()) >= 2000


def test_no_task_implies_its_answer() -> None:
    for task in TASKS.values():
        golds = Counter(evaluate(t).gold for t in (PUBLIC.tickets("dev")) if (t.family, t.difficulty) == (task.family, task.difficulty))
        assert len(golds) >= 3 and max(golds.values()) / sum(golds.values()) < 0.5, (task.id, golds)


def test_messages_do_not_give_the_decision_away() -> None:
    """No sentence of a message occurs only with one gold decision while being common."""
    by_sentence: dict[str, Counter] = {}
    for t in PUBLIC.tickets("train"):
        gold = evaluate(t).gold
        for sentence in {s.strip().lower() for s in t.message.replace("!", ".").replace("?", ".").split(".") if len(s.strip()) > 12}:
            by_sentence.setdefault(sentence, Counter())[gold] += 1
    giveaways = [s for s, c in by_sentence.items() if sum(c.values()) >= 25 and len(c) == 1]
    assert not giveaways, giveaways[:5]


def test_committed_seed_data_matches_a_fresh_generation() -> None:
    files = render_artefacts()
    manifest = json.loads(files["manifest.json"])
    committed = json.loads((ROOT / "seed_data" / "manifest.json").read_text())
    assert committed["content_sha256"] == manifest["content_sha256"], "seed_data is stale: run `make data`"
    for name, text in files.items():
        assert (ROOT / "seed_data" / name).read_text(encoding="utf-8") == text, name
    assert manifest["counts"]["train"]["total"] == 1200


def test_seed_data_ships_no_test_tickets_only_their_count() -> None:
    files = render_artefacts()
    assert "test.jsonl" not in files and not (ROOT / "seed_data" / "test.jsonl").exists()
    manifest = json.loads(files["manifest.json"])
    assert manifest["splits"]["test"]["size"] == SPLIT_SIZES["test"] and "test" not in manifest["counts"]
