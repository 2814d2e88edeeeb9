"""The core's contract: determinism, validation, step rules, score bounds, no leaks."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from service.env import TASKS, Action, EpisodeFinished, UnknownTask, grade_episode, observe, reset, step
from service.env.agents import play_episode
from service.env.dataset import PUBLIC
from service.env.models import DECISIONS, LOOKUP_TARGETS, MAX_REPLY_CHARS, QUEUES, TAGS
from service.env.policy import CLAUSES, evaluate


def _play(task_id: str, seed: int, actions: list[Action], split: str = "dev"):
    state, obs = reset(task_id, seed, split)
    observations, rewards = [obs], []
    for action in actions:
        if state.done:
            break
        result = step(state, action)
        assert result.grade == grade_episode(result.state)  # the grade step returns is the state's grade
        state = result.state
        observations.append(result.observation)
        rewards.append(result.reward)
    return state, observations, rewards


# ------------------------------------------------------------------------------ determinism


@pytest.mark.parametrize("task_id", list(TASKS))
@pytest.mark.parametrize("agent", ["random", "heuristic"])
def test_same_task_and_seed_give_identical_episodes(task_id: str, agent: str) -> None:
    for seed in (0, 7, 123):
        s1, a1 = play_episode(agent, task_id, seed, "dev")
        s2, a2 = play_episode(agent, task_id, seed, "dev")
        assert s1 == s2
        assert [a.model_dump() for a in a1] == [a.model_dump() for a in a2]
        state1, obs1, r1 = _play(task_id, seed, a1)
        state2, obs2, r2 = _play(task_id, seed, a2)
        assert state1 == state2 and r1 == r2
        assert [o.model_dump_json() for o in obs1] == [o.model_dump_json() for o in obs2]


def test_seeds_enumerate_the_task_pool_without_repeats() -> None:
    pool = PUBLIC.pool("dev", "decision", "easy")
    seen = [reset("decision-easy", seed, "dev")[0].ticket_id for seed in range(len(pool))]
    assert seen == list(pool)
    assert reset("decision-easy", len(pool), "dev")[0].ticket_id == pool[0]


def test_tickets_are_regenerated_identically() -> None:
    from service.env.generator import generate_ticket, public_split_key

    key = public_split_key("train")
    pool = PUBLIC.pool("train", "decision", "hard")
    assert generate_ticket(key, "train", "decision", "hard", 42) == PUBLIC.ticket(pool[42])
    assert generate_ticket(key, "train", "decision", "hard", 42) != generate_ticket(
        key, "train", "decision", "hard", 43
    )


# ------------------------------------------------------------------------------- validation


def test_action_rejects_unknown_fields_and_values() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Action.model_validate({"decision": "reject", "refund_amount": 10})
    with pytest.raises(ValidationError, match="approve_refund"):
        Action.model_validate({"decision": "give_money"})
    with pytest.raises(ValidationError, match="Escalations"):
        Action.model_validate({"reassign_queue": "Nowhere"})
    with pytest.raises(ValidationError, match="at least one of"):
        Action.model_validate({})
    with pytest.raises(ValidationError, match="at most 2000"):
        Action.model_validate({"reply": "x" * (MAX_REPLY_CHARS + 1)})


def test_action_type_is_an_alias_of_decision() -> None:
    assert Action.model_validate({"action_type": "approve_refund"}).decision == "approve_refund"
    assert Action.model_validate({"action_type": "reject", "decision": "reject"}).decision == "reject"
    with pytest.raises(ValidationError, match="not both"):
        Action.model_validate({"action_type": "reject", "decision": "approve_refund"})


def test_unknown_task_and_split_are_clear_errors() -> None:
    with pytest.raises(UnknownTask, match="choose one of: decision-easy"):
        reset("refund-everything", 0)
    with pytest.raises(ValueError, match="unknown split"):
        reset("decision-easy", 0, "holdout")
    with pytest.raises(ValueError, match="non-negative"):
        reset("decision-easy", -1)


# ------------------------------------------------------------------------------ step rules


def test_steps_after_done_are_refused() -> None:
    state, _ = reset("decision-easy", 0, "dev")
    result = step(state, Action(decision="reject"))
    assert result.done
    with pytest.raises(EpisodeFinished, match="call reset"):
        step(result.state, Action(decision="approve_refund"))


@pytest.mark.parametrize("task_id", list(TASKS))
def test_episodes_are_truncated_at_max_steps(task_id: str) -> None:
    state, obs = reset(task_id, 3, "dev")
    for _ in range(state.max_steps):
        assert not state.done and not obs.final and not obs.truncated
        result = step(state, Action(lookup="policy"))
        state, obs = result.state, result.observation
    assert state.done and state.truncated and state.step_count == TASKS[task_id].max_steps
    # issue 23.4: the observation says so too (Gymnasium's truncated), and final is done, from one place
    assert obs.done and obs.final and obs.truncated and observe(state).truncated and observe(state).final


@pytest.mark.parametrize("task_id", list(TASKS))
def test_an_episode_the_agent_ends_is_final_and_not_truncated(task_id: str) -> None:
    state, _ = reset(task_id, 3, "dev")
    end = Action(tool="end_conversation", arguments={}) if TASKS[task_id].store_desk else Action(close_ticket=True)
    result = step(state, end)
    assert result.done and result.observation.final and not result.observation.truncated, task_id
    assert not result.state.truncated and result.observation.score is not None


def test_step_does_not_mutate_its_input() -> None:
    state, _ = reset("workflow-resolution", 1, "dev")
    before = state.model_dump_json()
    step(state, Action(add_tag="Refund", reply="Thank you", lookup="order"))
    assert state.model_dump_json() == before


def test_lookups_return_records_in_tool_result() -> None:
    state, _ = reset("decision-medium", 2, "dev")
    ticket = PUBLIC.ticket(state.ticket_id)
    obs = step(state, Action(lookup="order")).observation
    assert obs.tool_result["order_id"] == ticket.order.order_id
    items = obs.tool_result["items"]
    assert [i["name"] for i in items] == [line.product.name for line in ticket.order.lines]
    assert [i["in_stock"] for i in items] == [line.product.in_stock for line in ticket.order.lines]
    assert obs.tool_result["payment"]["charges"] == ticket.order.charges
    assert obs.tool_result["total"] == ticket.order.amount
    obs = step(state, Action(lookup="policy")).observation
    assert all(f"## {c.id}." in obs.tool_result for c in CLAUSES)


def test_the_ticket_header_prints_seed_as_labels_true_or_false() -> None:
    """Seed A's keyword agent reads "images provided: true|false" and "past returns: N" (lower-cased):
    the header prints exactly those labels, so its image branches fire."""
    from service.env.core import ticket_text

    seen = set()
    for t in PUBLIC.tickets("dev"):
        text = ticket_text(t).lower()
        flag = "true" if t.claim.images_provided else "false"
        assert f"images provided: {flag} ·" in text, t.ticket_id
        assert f"past returns: {t.customer.returns_12m} " in text
        seen.add(flag)
    assert seen == {"true", "false"}


# ----------------------------------------------------------------------------- score bounds

_action_fields = st.fixed_dictionaries(
    {},
    optional=dict(
        decision=st.none() | st.sampled_from(DECISIONS),
        reply=st.none()
        | st.sampled_from(
            [
                "Thank you, sorry for the trouble.",
                "Send photos please",
                "whatever, not our problem",
                "We will refund you.",
            ]
        ),
        reassign_queue=st.none() | st.sampled_from(QUEUES),
        add_tag=st.none() | st.sampled_from(TAGS),
        close_ticket=st.booleans(),
        lookup=st.none() | st.sampled_from(LOOKUP_TARGETS),
    ),
)
_actions = _action_fields.filter(lambda d: any(v not in (None, False) for v in d.values())).map(Action.model_validate)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    task_id=st.sampled_from(list(TASKS)), seed=st.integers(0, 500), actions=st.lists(_actions, min_size=1, max_size=12)
)
def test_any_valid_action_sequence_scores_in_unit_interval(task_id: str, seed: int, actions: list[Action]) -> None:
    state, _, rewards = _play(task_id, seed, actions)
    grade = grade_episode(state)
    assert 0.0 <= grade.score <= 1.0
    assert all(-1.0 <= r <= 1.0 for r in rewards)  # openenv.yaml declares the range
    assert -1.0 <= grade.raw <= 1.0
    if state.done and all(abs(r) < 1.0 for r in rewards):  # nothing carried: the rewards add up to the raw score
        assert sum(rewards) == pytest.approx(grade.raw, abs=1e-6)


def test_a_step_that_would_drop_the_raw_score_by_more_than_one_pays_the_rest_later() -> None:
    """Several penalties in one step (a changed decision, a rude, leaking reply, a second outcome tag) moved
    the raw score by -1.03: the reward stays at -1 and the remainder arrives with the next step."""
    pool = PUBLIC.pool("dev", "workflow", "hard")
    seed = next(
        k for k, tid in enumerate(pool) if evaluate(PUBLIC.ticket(tid)).gold == "reject"
    )  # the first decision is right
    oid = PUBLIC.ticket(pool[seed]).order.order_id
    actions = [
        Action(lookup="policy"),
        Action(
            decision="reject", add_tag="Policy_Denied", reply=f"Thank you, order {oid}: sorry, we can't accept this."
        ),
        Action(
            decision="approve_refund",
            add_tag="Refund",
            reassign_queue="Fraud",
            reply="Stupid request, your fraud flag and chargebacks are noted. Not our problem.",
        ),
        Action(close_ticket=True),
    ]
    state, _, rewards = _play("workflow-resolution", seed, actions)
    assert rewards[2] == -1.0 and rewards[3] < 0
    assert sum(rewards) == pytest.approx(grade_episode(state).raw, abs=1e-6)
    assert state.step_count == len(rewards) <= state.max_steps


# ---------------------------------------------------------------------------------- no leak


def _secret_strings(ticket) -> list[str]:
    v = evaluate(ticket)
    secrets = [
        v.rationale,
        '"gold":',
        '"alternatives":',
        '"hidden":',
        '"harmful":',
        '"rationale":',
        "photos_show",
        "parcel_found",
        "actual_issue",
    ]
    return secrets


def test_observations_never_leak_gold_or_hidden_facts_across_dev() -> None:
    for ticket in PUBLIC.tickets("dev"):
        task_id = next(t.id for t in TASKS.values() if (t.family, t.difficulty) == (ticket.family, ticket.difficulty))
        pool = PUBLIC.pool("dev", ticket.family, ticket.difficulty)
        seed = pool.index(ticket.ticket_id)
        _, actions = play_episode("heuristic", task_id, seed, "dev")
        state, observations, _ = _play(task_id, seed, actions)
        for obs in observations:
            text = obs.model_dump_json()
            for secret in _secret_strings(ticket):
                assert secret not in text, (ticket.ticket_id, secret)
            # clause ids appear only inside the policy document the agent asked for
            if not (isinstance(obs.tool_result, str) and obs.tool_result.startswith("# Store policy")):
                assert not any(f'"{c.id}"' in text or f" {c.id} " in text for c in CLAUSES), ticket.ticket_id


def test_hidden_facts_do_not_change_what_the_agent_sees_before_asking() -> None:
    """Metamorphic no-leak check: flip every hidden fact; the first observation is identical."""
    from service.env import core

    for ticket in PUBLIC.tickets("dev")[:200]:
        h = ticket.hidden
        flipped = h.model_copy(
            update={
                "photos_show": {"damage": "normal_wear", "normal_wear": "damage"}.get(h.photos_show),
                "item_used": None if h.item_used is None else not h.item_used,
                "parcel_found": None if h.parcel_found is None else not h.parcel_found,
            }
        )
        assert core.ticket_text(ticket) == core.ticket_text(ticket.model_copy(update={"hidden": flipped}))


def test_serialized_state_round_trips() -> None:
    state, _ = reset("workflow-routing", 5, "dev")
    state = step(state, Action(reassign_queue="Fraud", reply="Thanks for your patience")).state
    again = type(state).model_validate(json.loads(state.model_dump_json()))
    assert again == state
    assert grade_episode(again) == grade_episode(state)
