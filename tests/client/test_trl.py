"""The TRL adapter (issue 20.3): ``client.trl.TicketDesk`` and ``StoreDesk`` as ``GRPOTrainer(environment_factory=...)``
reads them, without a GPU (torch is not installed; transformers imports without it).

- The tool schemas transformers' ``get_json_schema`` (what TRL calls on each public method) builds are valid
  JSON schemas, complete (a description for the tool and every argument) and the tool models' own: the same
  names, required arguments, types and enums as ``GET /tasks`` and MCP show.
- A decision, a workflow and a store episode played through the adapter against a live server end with
  ``reward`` equal to ``GET /grader``'s score; several instances in parallel threads each play their own.
"""

from __future__ import annotations

import inspect
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from transformers.utils import get_json_schema

from client.trl import EpisodeOver, StoreDesk, TicketDesk, dataset_rows
from service import env as core
from service.env.agents import make_agent, play_episode

DESKS = [(TicketDesk, "decision"), (StoreDesk, "store")]


def tools_of(instance: Any) -> dict[str, Any]:
    """What TRL exposes as tools: every public bound method except reset (and get_reward, which we do not
    define: older TRL versions would expose it as a tool)."""
    return {
        name: member
        for name, member in inspect.getmembers(instance, predicate=inspect.ismethod)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def _model_property(schema: dict[str, Any], prop: dict[str, Any]) -> dict[str, Any]:
    """A property of a pydantic schema with ``$ref`` resolved and a ``T | None`` union reduced to ``T``."""
    if "$ref" in prop:
        prop = schema["$defs"][prop["$ref"].rsplit("/", 1)[-1]]
    options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
    return options[0] if len(options) == 1 else prop


@pytest.mark.parametrize(("desk", "family"), DESKS)
def test_get_json_schema_reads_every_tool_as_its_model(desk: type, family: str) -> None:
    instance = desk(base_url="http://127.0.0.1:9")  # nothing is called: building schemas needs no server
    tools = tools_of(instance)
    assert sorted(tools) == sorted(t.name for t in core.tools_for(family))
    for tool in core.tools_for(family):
        built = get_json_schema(tools[tool.name])
        assert built["type"] == "function"
        function = built["function"]
        assert function["name"] == tool.name and function["description"] == " ".join(tool.description.split())
        parameters = function["parameters"]
        Draft202012Validator.check_schema(parameters)
        model = tool.args.model_json_schema()
        assert set(parameters["properties"]) == set(model.get("properties", {})), tool.name
        assert sorted(parameters.get("required", [])) == sorted(model.get("required", [])), tool.name
        for name, prop in parameters["properties"].items():
            assert prop["description"].strip(), (tool.name, name)
            expected = _model_property(model, model["properties"][name])
            assert prop["type"] == expected["type"], (tool.name, name)
            assert prop.get("enum") == expected.get("enum"), (tool.name, name)
            if expected["type"] == "array":
                item = _model_property(model, expected["items"])
                assert prop["items"]["type"] == item["type"] and prop["items"].get("enum") == item.get("enum")
                if item["type"] == "object":  # nested models: their fields are named in the description
                    assert all(field in prop["description"] for field in item["properties"]), (tool.name, name)


def test_without_an_episode_nothing_is_sent() -> None:
    desk = TicketDesk(base_url="http://127.0.0.1:9")  # nothing answers there
    with pytest.raises(EpisodeOver, match="reset first"):
        desk.route(queue="Billing")
    with pytest.raises(ValueError, match="StoreDesk|store-easy"):
        desk.reset(task_id="store-easy")


def test_calls_that_do_not_fit_play_nothing(live_server: Any) -> None:
    """A wrong argument name is a TypeError (TRL shows the model its message), a value the tool refuses a
    ValueError with the server's detail; neither is a step."""
    desk = TicketDesk(base_url=live_server.url)
    desk.reset(task_id="workflow-triage", seed=0, split="dev")
    with pytest.raises(TypeError, match="queu"):
        desk.route(queu="Billing")
    with pytest.raises(ValueError, match="queue"):
        desk.route(queue="Nowhere")
    state = httpx.get(live_server.url + "/state", params={"episode_id": desk.episode_id}, timeout=10).json()
    assert state["step_count"] == 0


def grader(url: str, episode_id: str | None) -> dict[str, Any]:
    return httpx.get(url + "/grader", params={"episode_id": episode_id}, timeout=10).json()


def _tool_calls(action: core.Action) -> list[tuple[str, dict[str, Any]]]:
    """A reference agent's action as tool calls: a store call as it is; a ticket action's parts in the order the
    core applies them (lookup, route, tag, reply, decision, close) — a decision takes its reply along."""
    if action.tool is not None:
        return [(action.tool, dict(action.arguments or {}))]
    calls: list[tuple[str, dict[str, Any]]] = []
    if action.lookup:
        calls.append(("lookup", {"target": action.lookup}))
    if action.reassign_queue:
        calls.append(("route", {"queue": action.reassign_queue}))
    if action.add_tag:
        calls.append(("tag", {"tag": action.add_tag}))
    if action.decision:
        calls.append(("decide", {"decision": action.decision, **({"reply": action.reply} if action.reply else {})}))
    elif action.reply:
        calls.append(("reply", {"text": action.reply}))
    if action.close_ticket:
        calls.append(("close", {}))
    return calls


def play_reference(desk: Any, task_id: str, seed: int) -> list[str]:
    """Play the reference heuristic's episode through the adapter, tool by tool, reset with a dataset row as TRL
    passes it (every column, the prompt too); the texts the tools return."""
    (row,) = dataset_rows([task_id], [seed], split="dev")
    assert row["prompt"][0]["content"].startswith("You are a customer-support agent")
    first = desk.reset(**row)
    assert task_id in first and "reward" not in first.lower()
    state, obs = core.reset(task_id, seed, "dev")
    agent = make_agent("heuristic", seed, state.ticket_id)
    texts = []
    while not desk.done and not state.done:
        action = agent.act(obs)
        for name, arguments in _tool_calls(action):
            if not desk.done:
                texts.append(getattr(desk, name)(**arguments))
        stepped = core.step(state, action)
        state, obs = stepped.state, stepped.observation
    return texts


@pytest.mark.parametrize(
    ("desk", "task_id", "seed"),
    [(TicketDesk, "decision-easy", 0), (TicketDesk, "workflow-resolution", 1), (StoreDesk, "store-easy", 1)],
)
def test_an_episode_through_the_adapter_ends_with_the_graders_score(
    live_server: Any, desk: type, task_id: str, seed: int
) -> None:
    env = desk(base_url=live_server.url)
    texts = play_reference(env, task_id, seed)
    assert env.done and texts[-1].endswith("The episode is over.")
    graded = grader(live_server.url, env.episode_id)
    assert env.reward == graded["score"] > 0
    for text in texts:  # what the model reads back: the observation without the grade
        view = json.loads(text.removesuffix("\nThe episode is over."))
        assert not {"reward", "score", "resolved", "final"} & set(view), view
    if desk is StoreDesk:  # one tool per step both ways: the very episode the core plays in process
        assert env.reward == play_episode("heuristic", task_id, seed, "dev")[0]
    with pytest.raises(EpisodeOver, match="over"):
        next(iter(tools_of(env).values()))()
    env.reset(task_id=task_id, seed=seed, split="dev")
    assert env.reward == 0.0 and not env.done  # a new episode, nothing earned yet


def test_parallel_instances_each_play_their_own_episode(live_server: Any) -> None:
    """Eight instances used from eight threads at once, as a trainer's rollouts: eight episodes on the server,
    each instance's reward its own episode's grade."""

    def rollout(i: int) -> tuple[str | None, float]:
        desk: Any = StoreDesk(base_url=live_server.url) if i % 2 else TicketDesk(base_url=live_server.url)
        task_id = "store-easy" if i % 2 else "decision-easy"
        play_reference(desk, task_id, i // 2)
        return desk.episode_id, desk.reward

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(rollout, range(8)))
    ids = [episode_id for episode_id, _ in results]
    assert len(set(ids)) == 8 and None not in ids
    for episode_id, reward in results:
        assert reward == grader(live_server.url, episode_id)["score"]
