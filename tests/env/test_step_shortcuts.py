"""The core's per-step shortcuts (#22 item 5) give exactly what the plain computations give: verdicts and
reply judgements memoised per ticket, observations built without a second validation, ticket texts
rendered once per ticket."""

from __future__ import annotations

import json

import pytest

from service import env as core
from service.env import core as env_core
from service.env import grading
from service.env.agents import play_episode
from service.env.models import Observation
from service.env.policy import evaluate
from service.env.replies import judge


def _episodes(agent: str, seeds: range) -> list[tuple[str, int, list[core.Action]]]:
    return [(task_id, seed, play_episode(agent, task_id, seed, "dev")[1]) for task_id in core.TASKS for seed in seeds]


@pytest.mark.parametrize("agent", ["heuristic", "random"])
def test_grades_with_memoised_verdicts_and_judgements_are_the_plain_grades(
    agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    episodes = _episodes(agent, range(6))

    def grades() -> list[str]:
        out = []
        for task_id, seed, actions in episodes:
            state, _ = core.reset(task_id, seed, "dev")
            for action in actions:
                result = core.step(state, action)
                state = result.state
                out.append(json.dumps([result.reward, result.grade.model_dump(mode="json")]))
        return out

    grading._memo.cache_clear()
    cold = grades()
    warm = grades()  # every verdict and judgement from the memo now
    with monkeypatch.context() as m:
        m.setattr(grading, "_evaluate", lambda ticket, revealed=frozenset(): evaluate(ticket, revealed))
        m.setattr(grading, "_judge", judge)
        plain = grades()
    assert cold == warm == plain


def test_a_memoised_judgement_is_never_served_for_another_verdict() -> None:
    ticket = core.PUBLIC.ticket(core.reset("decision-medium", 4, "dev")[0].ticket_id)
    first, other = evaluate(ticket), evaluate(ticket)  # equal, not the same object
    reply = f"We approved a refund for order {ticket.order.order_id}. Thank you!"
    grading._memo.cache_clear()
    assert grading._judge(reply, ticket, "approve_refund", first, frozenset()) == judge(
        reply, ticket, "approve_refund", first, frozenset()
    )
    assert grading._judge(reply, ticket, "approve_refund", other, frozenset()) == judge(
        reply, ticket, "approve_refund", other, frozenset()
    )
    key = (reply, "approve_refund", id(other), frozenset())
    assert grading._memo(ticket).judgements[key][0] is other


def test_observations_built_without_validation_validate_to_themselves() -> None:
    for task_id, seed, actions in _episodes("heuristic", range(3)):
        state, observation = core.reset(task_id, seed, "dev")
        observations = [observation]
        for action in actions:
            result = core.step(state, action)
            state = result.state
            observations.append(result.observation)
        for seen in observations:
            given = {name: getattr(seen, name) for name in seen.model_fields_set}
            again = Observation.model_validate(given)  # what validating the same fields makes of them
            assert json.dumps(again.model_dump(mode="json")) == json.dumps(seen.model_dump(mode="json"))
            assert again.model_fields_set == seen.model_fields_set


def test_ticket_text_is_rendered_once_per_ticket_and_is_the_rendering() -> None:
    state, _ = core.reset("decision-hard", 8, "dev")
    ticket = core.PUBLIC.ticket(state.ticket_id)
    assert env_core._ticket_text(ticket) == env_core.ticket_text(ticket)
    assert env_core._ticket_text(ticket) is env_core._ticket_text(ticket)
