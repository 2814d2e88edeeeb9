"""End to end against a live uvicorn on 127.0.0.1: the real OpenEnv client."""

from __future__ import annotations

import httpx
from openenv.core import GenericEnvClient

from bench.harness import STALLED_AFTER_S
from service import env as core


def test_generic_env_client_plays_whole_episodes(live_server) -> None:
    for n, task in enumerate(core.TASKS):
        with GenericEnvClient(base_url=live_server.url).sync() as env:
            token = f"e2e-secret-{task}".ljust(40, "x")  # a chosen id comes with a secret: here, ours
            first = env.reset(task_id=task, seed=40 + n, episode_id=f"e2e-{task}", episode_token=token)
            assert first.reward is None and first.done is False
            assert first.observation["task_id"] == task and first.observation["episode_id"] == f"e2e-{task}"
            steps = 0
            result = first
            plan = [
                {"lookup": "policy"},
                {"add_tag": "Refund"},
                {"decision": "reject", "reply": "We checked.", "close_ticket": True},
            ]
            while not result.done:
                result = env.step(plan[min(steps, len(plan) - 1)])
                steps += 1
                assert isinstance(result.reward, float) and -1.0 <= result.reward <= 1.0
                state = env.state()
                assert state["episode_id"] == f"e2e-{task}" and state["step_count"] == steps
                assert steps <= core.TASKS[task].max_steps
        grade = httpx.get(
            live_server.url + "/grader",
            params={"episode_id": f"e2e-{task}"},
            headers={"X-Episode-Token": token},
            timeout=STALLED_AFTER_S,
        ).json()
        assert 0.0 <= grade["score"] <= 1.0 and grade["task_id"] == task


# Several tasks and seeds, each played to its end with a plan that finishes any task (some resolved, some not).
FINAL_PLAN = [
    {"lookup": "order"},
    {"lookup": "policy"},
    {"add_tag": "Refund"},
    {"decision": "approve_refund", "reply": "We have refunded your order.", "close_ticket": True},
]
EPISODES = [(task, seed) for task in core.TASKS for seed in (1, 2)]


def test_final_observation_carries_the_grader_score_over_ws(live_server) -> None:
    """What a TRL-style wrapper reads at ``done`` (openenv 0.10's GenericEnvClient, over /ws) is the
    episode's grade: the final observation's score and resolved equal ``GET /grader``'s."""
    finals = []
    with GenericEnvClient(base_url=live_server.url).sync() as env:  # one WS session, episode after episode
        for task, seed in EPISODES:
            result = env.reset(task_id=task, seed=seed, split="dev")
            episode_id = result.observation["episode_id"]
            for n in range(core.TASKS[task].max_steps):
                result = env.step(FINAL_PLAN[min(n, len(FINAL_PLAN) - 1)])
                if result.done:
                    break
            assert result.done
            finals.append((episode_id, result.observation))
    for episode_id, obs in finals:
        grade = httpx.get(
            live_server.url + "/grader", params={"episode_id": episode_id}, timeout=STALLED_AFTER_S
        ).json()
        assert obs["final"] is True and obs["episode_id"] == episode_id
        assert obs["score"] == grade["score"] and obs["resolved"] is grade["resolved"], (obs, grade)
    assert len({o["score"] for _, o in finals}) > 1  # not one constant: real, differing grades


# `openenv validate` on a fresh clone and with --url (both openenv versions): tests/system/test_clients_validate.py.


def test_pre_submission_check_reset_with_empty_object(live_server) -> None:
    resp = httpx.post(live_server.url + "/reset", json={}, timeout=STALLED_AFTER_S)
    assert resp.status_code == 200 and resp.json()["done"] is False


def test_the_typed_openenv_client_plays_an_episode(live_server) -> None:
    """``client.openenv.SupportEnv`` (openenv's EnvClient with this environment's types) over /ws:
    typed observations in, typed actions out, and the final one carries the grade /grader reports."""
    from client.openenv import SupportEnv
    from server.models import SupportAction, SupportObservation

    with SupportEnv(base_url=live_server.url).sync() as env:
        first = env.reset(task_id="decision-easy", seed=5, split="dev")
        assert isinstance(first.observation, SupportObservation) and first.observation.task_id == "decision-easy"
        result = env.step(SupportAction(lookup="order"))
        assert result.done is False and env.state().step_count == 1
        result = env.step(SupportAction(decision="approve_refund"))
        assert result.done is True and result.observation.final is True
        episode_id = first.observation.episode_id
    grade = httpx.get(live_server.url + "/grader", params={"episode_id": episode_id}, timeout=STALLED_AFTER_S).json()
    assert result.observation.score == grade["score"] and result.observation.resolved == grade["resolved"]
