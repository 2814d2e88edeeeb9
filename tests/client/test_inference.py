"""inference.py end to end: a live service, a scripted OpenAI-compatible stub over real HTTP, and
the runner as a subprocess. stdout is checked line by line against strict regular expressions."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.harness import STALLED_AFTER_S
from bench.stub_openai import StubLLM
from client import agents, config, evaluation, llm, logformat, prompt, runner, wire
from service import env as core

ROOT = Path(__file__).resolve().parents[2]

START_RE = re.compile(r"^\[START\] task=(?P<task>[a-z0-9-]+) env=(?P<env>[\w.-]+) model=(?P<model>\S+)$")
STEP_RE = re.compile(
    r"^\[STEP\] step=(?P<n>[1-9]\d*) action=(?P<action>\{.*\}|null) reward=(?P<reward>-?\d+\.\d{2}) "
    r"done=(?P<done>true|false) error=(?P<error>\S.*)$"
)
END_RE = re.compile(
    r"^\[END\] success=(?P<success>true|false) steps=(?P<steps>\d+) score=(?P<score>0\.(?!000)\d{3}) "
    r"rewards=(?P<rewards>(?:-?\d+\.\d{2}(?:,-?\d+\.\d{2})*)?)$"
)


@dataclass
class Episode:
    task: str
    model: str
    steps: list[re.Match[str]] = field(default_factory=list)
    end: re.Match[str] | None = None

    @property
    def success(self) -> bool:
        assert self.end is not None
        return self.end["success"] == "true"


def classify(stdout: str) -> list[tuple[str, re.Match[str]]]:
    """Every stdout line is exactly one of START, STEP, END — nothing else is allowed."""
    out = []
    for line in stdout.splitlines():
        for kind, rx in (("START", START_RE), ("STEP", STEP_RE), ("END", END_RE)):
            m = rx.match(line)
            if m:
                out.append((kind, m))
                break
        else:
            raise AssertionError(f"stdout line matches no format: {line!r}")
    return out


def check_step(m: re.Match[str]) -> None:
    if m["action"] != "null":
        assert isinstance(json.loads(m["action"]), dict)


def check_end(ep: Episode) -> None:
    end = ep.end
    assert end is not None
    rewards = [float(r) for r in end["rewards"].split(",")] if end["rewards"] else []
    assert int(end["steps"]) == len(ep.steps) == len(rewards)
    assert rewards == [float(s["reward"]) for s in ep.steps]
    assert [int(s["n"]) for s in ep.steps] == list(range(1, len(ep.steps) + 1))
    # done=true can only be the last step
    assert all(s["done"] == "false" for s in ep.steps[:-1])
    assert 0.0 < float(end["score"]) < 1.0


def sequential_episodes(stdout: str) -> list[Episode]:
    """With --concurrency 1 the grammar is strict: (START STEP* END)*."""
    episodes: list[Episode] = []
    current: Episode | None = None
    for kind, m in classify(stdout):
        if kind == "START":
            assert current is None, "START inside an open episode"
            current = Episode(m["task"], m["model"])
        elif kind == "STEP":
            assert current is not None, "STEP outside an episode"
            check_step(m)
            current.steps.append(m)
        else:
            assert current is not None, "END without START"
            current.end = m
            check_end(current)
            episodes.append(current)
            current = None
    assert current is None, "the last episode has no END"
    return episodes


def interleaved_counts(stdout: str, concurrency: int) -> tuple[int, int]:
    """Concurrent episodes interleave by whole lines: at any point between 0 and ``concurrency``
    episodes are open, STEP lines only while one is, and every START is closed by an END."""
    open_, max_open, ends = 0, 0, 0
    for kind, m in classify(stdout):
        if kind == "START":
            open_ += 1
            max_open = max(max_open, open_)
        elif kind == "STEP":
            check_step(m)
            assert open_ > 0
        else:
            open_ -= 1
            ends += 1
            assert open_ >= 0
    assert open_ == 0
    assert max_open <= concurrency
    return ends, max_open


def run_inference(
    args: list[str], env_url: str, *, extra_env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    env = _env(env_url, extra_env)
    return subprocess.run(
        [sys.executable, "inference.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


LLM_TIMEOUT_S = 5.0
STUB_SLOW_S = 2 * LLM_TIMEOUT_S


def _env(env_url: str, extra_env: dict[str, str] | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_TOKEN", "API_KEY", "RUN_TOKEN", "MODEL_NAME", "API_BASE_URL")
    }
    # LLM_TIMEOUT_S: far more than the local stub takes to answer on a busy machine; its "slow" replies
    # (STUB_SLOW_S) take longer still, so a timeout is always the stub's doing, never the machine's
    env.update(
        ENV_URL=env_url,
        LLM_TIMEOUT_S=str(LLM_TIMEOUT_S),
        LLM_BACKOFF_S="0.02",
        LLM_MAX_ATTEMPTS="3",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra_env or {})
    return env


def llm_env(stub: StubLLM, tmp_path: Path) -> dict[str, str]:
    return {
        "API_BASE_URL": stub.url,
        "HF_TOKEN": "test-token",
        "MODEL_NAME": "stub/model-1",
        "INFERENCE_STATE_DIR": str(tmp_path / "runs"),
    }


def ticket_of(task_id: str, seed: int, split: str = "dev") -> str:
    return core.reset(task_id, seed, split)[0].ticket_id


# ------------------------------------------------------------------------------ unit: parsing


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"decision": "reject"}', {"decision": "reject"}),
        ('```json\n{"lookup": "policy"}\n```', {"lookup": "policy"}),
        (
            'Sure! Here you go:\n```\n{"add_tag": "Refund", "close_ticket": true}\n```\nAnything else?',
            {"add_tag": "Refund", "close_ticket": True},
        ),
        (
            'I think {"decision": "request_info", "reply": "Could you send {photos}?"} is right. {"x": 1}',
            {"decision": "request_info", "reply": "Could you send {photos}?"},
        ),
        ('{"action": {"decision": "approve_refund"}}', {"decision": "approve_refund"}),
        ('{not json} then {"lookup": "order"}', {"lookup": "order"}),
        ('  \n{"reply": "line one\\nline two"}  trailing', {"reply": "line one\nline two"}),
    ],
)
def test_parse_action_tolerates_fences_and_prose(reply: str, expected: dict[str, Any]) -> None:
    assert prompt.parse_action(reply) == expected


@pytest.mark.parametrize("reply", ["", "   ", "I cannot decide.", "[1, 2, 3]", "{unclosed", '"just a string"'])
def test_parse_action_rejects_replies_without_an_object(reply: str) -> None:
    with pytest.raises(prompt.UnparseableReply):
        prompt.parse_action(reply)


def test_log_lines_are_single_lines_in_the_exact_format() -> None:
    step = logformat.step_line(3, {"reply": "a\nb", "close_ticket": True}, -0.5, True, "bad\nthing\r\nhappened")
    assert "\n" not in step and STEP_RE.match(step)
    assert (
        step
        == '[STEP] step=3 action={"reply":"a\\nb","close_ticket":true} reward=-0.50 done=true error=bad thing happened'
    )
    assert (
        logformat.step_line(1, None, 0.0, False, None) == "[STEP] step=1 action=null reward=0.00 done=false error=null"
    )
    # The hackathon checker rejects a task score of exactly 0 or 1: the printed score is clamped
    # into [0.001, 0.999] (the exact score is GET /grader's). Step rewards are printed as sent.
    assert logformat.end_line(False, 0, 0.0, []) == "[END] success=false steps=0 score=0.001 rewards="
    assert logformat.end_line(True, 1, 1.0, [1.0]) == "[END] success=true steps=1 score=0.999 rewards=1.00"
    assert logformat.end_line(False, 1, 0.0, [-0.5]) == "[END] success=false steps=1 score=0.001 rewards=-0.50"
    end = logformat.end_line(True, 2, 0.85, [0.1, 0.75])
    assert end == "[END] success=true steps=2 score=0.850 rewards=0.10,0.75" and END_RE.match(end)
    assert START_RE.match(logformat.start_line("decision-easy", "ecomm-support-env", "Qwen/Qwen2.5-72B-Instruct"))


def test_prompt_carries_instructions_schema_and_trimmed_history() -> None:
    task = core.TASKS["workflow-resolution"].model_dump(mode="json")
    system = prompt.system_prompt(task, core.Action.model_json_schema())
    assert task["instructions"] in system
    assert '"reassign_queue": General | Returns | Billing | Escalations | Fraud' in system
    assert '"properties"' in system  # the full schema is there too
    _, obs = core.reset("workflow-resolution", 0, "dev")
    seen = obs.model_dump(mode="json")
    seen["history"] = seen["history"] + [{"role": "customer", "text": f"message {i} " + "x" * 2000} for i in range(30)]
    agent = agents.LLMEpisodeAgent(llm=None, system=system)  # type: ignore[arg-type]
    text = agent.render(seen)
    assert "message 29" in text and "message 21" not in text  # only the latest entries
    assert "more chars]" in text  # long entries are cut, and say so
    assert len(text) < 12_000


def test_tool_calling_chat_is_trimmed_by_whole_turns() -> None:
    """A long episode's chat keeps the first message and the latest turns; a tool answer is never sent
    without the call it answers (the API refuses that)."""
    agent = agents.ToolCallingEpisodeAgent(llm=None, system="SYSTEM", tools=[])  # type: ignore[arg-type]
    agent.chat = [{"role": "user", "content": "FIRST"}]
    for i in range(30):
        ids = [f"c{i}_{k}" for k in range(1 + i % 3)]  # turns of one, two and three calls
        calls = [{"id": c, "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for c in ids]
        agent.chat.append({"role": "assistant", "content": None, "tool_calls": calls})
        agent.chat += [{"role": "tool", "tool_call_id": c, "content": "{}"} for c in ids]
    sent = agent.window()
    assert [m["content"] for m in sent[:2]] == ["SYSTEM", "FIRST"]
    assert sent[2]["role"] == "user" and "not shown" in sent[2]["content"]
    assert len(sent) <= 3 + agents.CHAT_MESSAGES_KEPT and sent[3]["role"] == "assistant"
    called: set[str] = set()
    for message in sent:
        called |= {c["id"] for c in message.get("tool_calls") or []}
        if message["role"] == "tool":
            assert message["tool_call_id"] in called
    assert sent[-1] == agent.chat[-1]  # the latest turn is always there


def test_json_mode_shows_the_latest_tool_result() -> None:
    """Before, only a lookup's result was shown: on the store desk the model never saw what a tool returned."""
    state, _ = core.reset("store-easy", 0, "dev")
    result = core.step(state, core.Action(tool="search_policy", arguments={"query": "damaged item"}))
    obs = result.observation.model_dump(mode="json")
    past = [prompt.PastTurn({"tool": "search_policy", "arguments": {"query": "damaged item"}}, False, None)]
    text = prompt.render_turn(obs, {}, past)
    assert "LATEST TOOL RESULT" in text and '"tool":"search_policy"' in text
    task = {**core.TASKS["store-easy"].model_dump(mode="json"), "tools": core.tool_specs("store")}
    system = prompt.system_prompt(task, core.Action.model_json_schema())
    assert "- refund:" in system and '{"tool": "search_policy"' in system and '"lookup": "policy"' not in system


# ------------------------------------------------------------------------- unit: LLM retries


async def test_llm_client_retries_429_and_timeouts_then_gives_up_on_persistent_500() -> None:
    cfg = config.Config.from_env(
        {"HF_TOKEN": "t", "LLM_TIMEOUT_S": str(LLM_TIMEOUT_S), "LLM_BACKOFF_S": "0.01", "LLM_MAX_ATTEMPTS": "3"}
    )
    with StubLLM(
        slow_s=STUB_SLOW_S, behaviours={"A-429": ["429", "json"], "B-slow": ["slow", "json"], "C-500": ["500"]}
    ) as stub:
        cfg = config.Config(**{**cfg.__dict__, "api_base_url": stub.url})
        usage = llm.TokenUsage()
        chat = llm.LLMClient(cfg, usage)
        try:
            ask = lambda marker: [{"role": "user", "content": f"{marker} (task_id: decision-easy) — step_count: 0"}]  # noqa: E731 - a one-line local helper
            assert prompt.parse_action(await chat.complete(ask("A-429"))) == {"lookup": "order"}
            assert prompt.parse_action(await chat.complete(ask("B-slow"))) == {"lookup": "order"}
            with pytest.raises(llm.LLMUnavailable, match="after 3 attempts"):
                await chat.complete(ask("C-500"))
        finally:
            await chat.aclose()
        assert stub.by_marker == {"A-429": ["429", "json"], "B-slow": ["slow", "json"], "C-500": ["500", "500", "500"]}
        assert usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_llm_agent_without_credentials_exits_2_naming_both_variables(tmp_path: Path) -> None:
    # ENV_URL points nowhere: the check must come before any network access.
    proc = run_inference(["--direct"], "http://127.0.0.1:9", extra_env={"INFERENCE_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "HF_TOKEN" in proc.stderr and "API_KEY" in proc.stderr
    assert "cannot reach" not in proc.stderr


# ---------------------------------------------------------------------------- end to end


def test_direct_mode_scripted_replies_every_line_strict(live_server: Any, tmp_path: Path) -> None:
    """The JSON-in-text mode (``--action-format json``): good JSON, fenced JSON, prose, garbage, a rejected
    action, a 429 and a slow reply: every episode still completes, the problems show up as [STEP] errors,
    stdout stays pure; the store desk is played with tool calls written as JSON."""
    tasks = [
        "decision-easy",
        "decision-medium",
        "workflow-triage",
        "workflow-routing",
        "workflow-resolution",
        "decision-hard",
        "store-easy",
    ]
    behaviours = {
        ticket_of("decision-easy", 0): ["fenced"],
        ticket_of("decision-medium", 0): ["prose"],
        ticket_of("workflow-triage", 0): ["garbage", "garbage", "json"],  # one turn lost, then fine
        ticket_of("workflow-routing", 0): ["invalid", "json"],  # 422 from the service, then fine
        ticket_of("workflow-resolution", 0): ["429", "json"],
        ticket_of("decision-hard", 0): ["slow", "json"],
        ticket_of("store-easy", 0): ["fenced", "json"],
    }
    with StubLLM(slow_s=STUB_SLOW_S, behaviours=behaviours) as stub:
        proc = run_inference(
            [
                "--direct",
                "--split",
                "dev",
                "--tasks",
                ",".join(tasks),
                "--limit-per-task",
                "1",
                "--concurrency",
                "1",
                "--action-format",
                "json",
            ],
            live_server.url,
            extra_env=llm_env(stub, tmp_path),
        )
    assert proc.returncode == 0, proc.stderr
    episodes = sequential_episodes(proc.stdout)
    assert [e.task for e in episodes] == tasks
    assert all(e.model == "stub/model-1" for e in episodes)
    by_task = {e.task: e for e in episodes}
    assert all(e.steps[-1]["done"] == "true" for e in episodes)
    triage = by_task["workflow-triage"].steps
    assert triage[0]["action"] == "null" and "unparseable model reply" in triage[0]["error"]
    routing = by_task["workflow-routing"].steps
    assert json.loads(routing[0]["action"]) == {"decision": "maybe_later"} and routing[0]["error"].startswith(
        "action rejected:"
    )
    assert routing[0]["reward"] == "0.00"
    for task in ("decision-easy", "decision-medium", "workflow-resolution", "decision-hard"):
        assert by_task[task].steps[0]["error"] == "null"
        assert json.loads(by_task[task].steps[0]["action"]) == {"lookup": "order"}
    store = [json.loads(s["action"]) for s in by_task["store-easy"].steps]
    assert store == [
        {"tool": "search_policy", "arguments": {"query": "damaged item replacement"}},
        {"tool": "end_conversation", "arguments": {}},
    ]
    # the JSON mode shows the latest tool result, whatever the tool (not only a lookup's)
    assert any("LATEST TOOL RESULT" in p and '"tool":"search_policy"' in p for p in stub.prompts)
    assert stub.served["429"] == 1 and stub.served["slow"] == 1 and stub.with_tools == 0
    assert "per-task summary" in proc.stderr


def test_native_tool_calls_every_line_strict(live_server: Any, tmp_path: Path) -> None:
    """The default mode: the model calls the task's tools (``tools=[...]`` from GET /tasks). Two calls in one
    message (the second answered "not executed"), an answer without a call, arguments that are not JSON, a
    call the service rejects, a 429: every episode of a decision, a workflow and a store task completes, each
    step one tool call, stdout as strict as ever."""
    tasks = ["decision-easy", "decision-medium", "workflow-triage", "workflow-routing", "workflow-resolution"]
    tasks += ["store-easy", "store-medium"]
    behaviours = {
        ticket_of("decision-easy", 0): ["multi", "json"],
        ticket_of("decision-medium", 0): ["text", "json"],  # one turn lost, then fine
        ticket_of("workflow-triage", 0): ["garbage", "json"],  # one turn lost, then fine
        ticket_of("workflow-routing", 0): ["invalid", "json"],  # 422 from the service, then fine
        ticket_of("workflow-resolution", 0): ["429", "json"],
        ticket_of("store-medium", 0): ["multi", "json"],
    }
    with StubLLM(behaviours=behaviours) as stub:
        proc = run_inference(
            ["--direct", "--split", "dev", "--tasks", ",".join(tasks), "--limit-per-task", "1", "--concurrency", "1"],
            live_server.url,
            extra_env=llm_env(stub, tmp_path),
        )
    assert proc.returncode == 0, proc.stderr
    episodes = sequential_episodes(proc.stdout)
    by_task = {e.task: e for e in episodes}
    assert [e.task for e in episodes] == tasks and all(e.steps[-1]["done"] == "true" for e in episodes)
    played = {t: [json.loads(s["action"]) for s in e.steps if s["action"] != "null"] for t, e in by_task.items()}
    assert all(set(a) == {"tool", "arguments"} for actions in played.values() for a in actions)
    assert [a["tool"] for a in played["decision-easy"]] == ["lookup", "decide"]  # the extra call was not played
    assert [a["tool"] for a in played["workflow-resolution"]] == ["lookup", "tag", "reply", "close"]
    assert [a["tool"] for a in played["store-easy"]] == ["search_policy", "end_conversation"]
    assert [a["tool"] for a in played["store-medium"]] == ["search_policy", "end_conversation"]
    assert "the model called no tool" in by_task["decision-medium"].steps[0]["error"]
    assert "not a JSON object" in by_task["workflow-triage"].steps[0]["error"]
    routing = by_task["workflow-routing"].steps[0]
    assert json.loads(routing["action"]) == {"tool": "decide", "arguments": {"decision": "maybe_later"}}
    assert routing["error"].startswith("action rejected:") and routing["reward"] == "0.00"
    # what the model was told: every call answered, the extra ones "not executed", the rejection's reason
    assert any(a.startswith("not executed: one tool call is played per turn") for a in stub.tool_answers)
    assert any("rejected by the service" in a and "invalid arguments for decide" in a for a in stub.tool_answers)
    assert stub.served["429"] == 1 and stub.with_tools == stub.calls  # every call offered the tools


def test_end_is_printed_after_a_failure_mid_episode(live_server: Any, tmp_path: Path) -> None:
    broken = ticket_of("decision-medium", 1)
    with StubLLM(behaviours={broken: ["json", "500"]}) as stub:  # first turn fine, then 500 forever
        proc = run_inference(
            ["--direct", "--tasks", "decision-medium", "--limit-per-task", "3", "--concurrency", "1"],
            live_server.url,
            extra_env=llm_env(stub, tmp_path),
        )
    assert proc.returncode == 1  # an episode did not finish
    episodes = sequential_episodes(proc.stdout)
    assert len(episodes) == 3
    failed = episodes[1]
    assert [json.loads(s["action"]) for s in failed.steps] == [{"tool": "lookup", "arguments": {"target": "order"}}]
    assert failed.end is not None and failed.end["success"] == "false" and failed.end["steps"] == "1"
    assert stub.by_marker[broken] == ["json", "500", "500", "500"]  # bounded retries
    assert episodes[0].steps[-1]["done"] == "true" and episodes[2].steps[-1]["done"] == "true"
    assert "LLMUnavailable" in proc.stderr


def test_requested_concurrency_is_reached(live_server: Any, tmp_path: Path) -> None:
    with StubLLM(delay_s=0.3) as stub:
        proc = run_inference(
            ["--direct", "--tasks", "decision-easy,workflow-triage", "--limit-per-task", "6", "--concurrency", "6"],
            live_server.url,
            extra_env=llm_env(stub, tmp_path),
        )
    assert proc.returncode == 0, proc.stderr
    ends, max_open = interleaved_counts(proc.stdout, 6)
    assert ends == 12
    assert stub.max_in_flight == 6  # six episodes really were in flight at once
    assert max_open == 1  # ... and still each one's lines came out as one block


def test_heuristic_agent_needs_no_credentials_and_respects_max_episodes(live_server: Any, tmp_path: Path) -> None:
    proc = run_inference(
        ["--direct", "--agent", "heuristic", "--limit-per-task", "2", "--max-episodes", "5"],
        live_server.url,
        extra_env={"INFERENCE_STATE_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    ends, _ = interleaved_counts(proc.stdout, 8)
    assert ends == 5
    assert all(m["model"] == "heuristic" for k, m in classify(proc.stdout) if k == "START")


# ------------------------------------------------------------------------------- run mode


def _require_runs_api(url: str) -> None:
    paths = httpx.get(url + "/openapi.json", timeout=STALLED_AFTER_S).json().get("paths", {})
    if "/runs" not in paths:
        pytest.skip("the service has no runs API (POST /runs) yet — issue 4")


def _run_file(tmp_path: Path) -> dict[str, Any]:
    files = list((tmp_path / "runs").glob("*.json"))
    assert len(files) == 1
    assert files[0].stat().st_mode & 0o077 == 0  # the token file is private
    return json.loads(files[0].read_text())


def test_run_mode_creates_a_ranked_run_and_completes_it(live_server: Any, tmp_path: Path) -> None:
    _require_runs_api(live_server.url)
    proc = run_inference(
        ["--agent", "heuristic", "--tasks", "decision-easy,workflow-triage", "--limit-per-task", "2", "--trials", "2"],
        live_server.url,
        extra_env={"INFERENCE_STATE_DIR": str(tmp_path / "runs")},
    )
    assert proc.returncode == 0, proc.stderr
    ends, _ = interleaved_counts(proc.stdout, 8)
    assert ends == 8
    saved = _run_file(tmp_path)
    run = httpx.get(
        f"{live_server.url}/runs/{saved['run_id']}",
        headers={"Authorization": f"Bearer {saved['run_token']}"},
        timeout=STALLED_AFTER_S,
    ).json()
    assert run["status"] == "complete"
    assert len(run["episodes"]) == 8 and all(e["status"] == "done" for e in run["episodes"])
    assert run["summary"] is not None
    assert "/leaderboard" in proc.stderr
    # The server reveals no verdict while its run is in progress; the blocks printed once it completed
    # carry the verdicts the run then published, in some order (one block per episode).
    published = sorted((e["task_id"], min(max(e["score"], 0.001), 0.999), e["resolved"]) for e in run["episodes"])
    blocks = sorted((e.task, float(e.end["score"]), e.success) for e in hackathon_blocks(proc.stdout))
    assert [(t, round(sc, 3), ok) for t, sc, ok in published] == blocks
    assert any(ok for *_, ok in blocks)  # the heuristic resolves some: success is not always false


def test_resume_finishes_an_interrupted_run_without_replaying(live_server: Any, tmp_path: Path) -> None:
    _require_runs_api(live_server.url)
    extra = {"INFERENCE_STATE_DIR": str(tmp_path / "runs")}
    with StubLLM(delay_s=0.15) as stub:
        extra.update(llm_env(stub, tmp_path))
        first = subprocess.Popen(
            [
                sys.executable,
                "inference.py",
                "--tasks",
                "decision-easy,workflow-triage,workflow-resolution",
                "--limit-per-task",
                "2",
                "--concurrency",
                "2",
            ],
            cwd=ROOT,
            env=_env(live_server.url, extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        # A run's blocks are printed when it completes, so the crash is timed by the server's count.
        deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the loop ends when two episodes are done
        while first.poll() is None and time.monotonic() < deadline:
            if list((tmp_path / "runs").glob("*.json")):
                saved = _run_file(tmp_path)
                page = httpx.get(
                    f"{live_server.url}/runs/{saved['run_id']}",
                    headers={"Authorization": f"Bearer {saved['run_token']}"},
                    timeout=STALLED_AFTER_S,
                ).json()
                if page.get("episodes_done", 0) >= 2:
                    first.send_signal(signal.SIGKILL)  # this exact child, a crash mid-run
                    break
            time.sleep(0.02)
        first.wait(timeout=STALLED_AFTER_S)
        assert first.stdout is not None and first.stdout.read() == ""  # nothing printed: the run never completed
        saved = _run_file(tmp_path)
        auth = {"Authorization": f"Bearer {saved['run_token']}"}
        before = httpx.get(f"{live_server.url}/runs/{saved['run_id']}", headers=auth, timeout=STALLED_AFTER_S).json()
        done_before = {e["index"]: e for e in before["episodes"] if e["status"] == "done"}
        assert len(done_before) >= 2 and before["status"] == "active"
        steps_before = {
            i: httpx.get(
                f"{live_server.url}/state", params={"episode_id": e["episode_id"]}, timeout=STALLED_AFTER_S
            ).json()["step_count"]
            for i, e in done_before.items()
        }

        second = run_inference(["--resume", saved["run_id"]], live_server.url, extra_env=extra)
    assert second.returncode == 0, second.stderr
    ends, _ = interleaved_counts(second.stdout, 8)
    assert ends == len(before["episodes"]) - len(done_before)  # finished episodes are not replayed
    after = httpx.get(f"{live_server.url}/runs/{saved['run_id']}", headers=auth, timeout=STALLED_AFTER_S).json()
    assert after["status"] == "complete"
    ids = [e["episode_id"] for e in after["episodes"]]
    assert None not in ids and len(set(ids)) == len(ids) == 6  # one episode per manifest entry
    for e in after["episodes"]:
        if e["index"] in done_before:
            assert e["episode_id"] == done_before[e["index"]]["episode_id"]
            assert "score" not in done_before[e["index"]] and e["score"] is not None  # verdicts wait for the run's end
            state = httpx.get(
                f"{live_server.url}/state", params={"episode_id": e["episode_id"]}, timeout=STALLED_AFTER_S
            ).json()
            assert state["step_count"] == steps_before[e["index"]]


# ------------------------------------------------------ the hackathon checker's reading of stdout


def hackathon_blocks(stdout: str) -> list[Episode]:
    """stdout read the way the hackathon's checker reads it: one ``[START]`` … ``[END]`` block at a
    time, nothing between blocks, every block's ``steps`` equal to its ``[STEP]`` lines and its
    ``rewards`` equal to theirs, the score strictly inside (0, 1)."""
    return sequential_episodes(stdout)


def test_default_concurrency_prints_each_episode_as_one_block(live_server: Any, tmp_path: Path) -> None:
    """At the default --concurrency 16 episodes really overlap, yet stdout is a sequence of whole
    blocks: a checker that reads one START…END block per episode sees every episode intact."""
    assert evaluation.DEFAULT_CONCURRENCY == 16
    tasks = ["decision-easy", "workflow-triage"]
    with StubLLM(delay_s=0.25) as stub:
        proc = run_inference(
            ["--direct", "--tasks", ",".join(tasks), "--limit-per-task", "16"],
            live_server.url,
            extra_env=llm_env(stub, tmp_path),
        )
    assert proc.returncode == 0, proc.stderr
    assert stub.max_in_flight == 16  # sixteen episodes were waiting on the model at once
    episodes = hackathon_blocks(proc.stdout)
    assert len(episodes) == 32
    assert sorted(e.task for e in episodes) == sorted(tasks * 16)
    for e in episodes:  # the stub's agent: an order lookup, then the decision / the closing step
        assert [json.loads(s["action"]) for s in e.steps][0] == {"tool": "lookup", "arguments": {"target": "order"}}
        assert e.steps[-1]["done"] == "true"
    assert "[START]" not in proc.stderr and "episodes" in proc.stderr  # progress stays on stderr


# ------------------------------------------------------------- no service behind ENV_URL


def test_unreachable_env_url_exits_2_and_says_so(tmp_path: Path) -> None:
    proc = run_inference(
        ["--agent", "heuristic", "--direct", "--limit-per-task", "1"],
        "http://127.0.0.1:9",
        extra_env={"INFERENCE_STATE_DIR": str(tmp_path)},
        timeout=STALLED_AFTER_S,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "http://127.0.0.1:9" in proc.stderr and "ENV_URL" in proc.stderr
    assert "unset ENV_URL" in proc.stderr  # and what to do about it


def test_without_env_url_a_local_service_is_started(tmp_path: Path) -> None:
    if wire.service_answers(config.DEFAULT_ENV_URL):
        pytest.skip(f"something already serves {config.DEFAULT_ENV_URL}: the default URL is taken, not a local start")
    env = _env("", {"INFERENCE_STATE_DIR": str(tmp_path)})
    env.pop("ENV_URL")
    proc = subprocess.run(
        [
            sys.executable,
            "inference.py",
            "--agent",
            "heuristic",
            "--direct",
            "--tasks",
            "decision-easy",
            "--limit-per-task",
            "2",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=STALLED_AFTER_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert "starting a local service" in proc.stderr
    assert len(hackathon_blocks(proc.stdout)) == 2


# ------------------------------------------------------------------ integrity: what the model sees


@pytest.mark.parametrize("action_format", ["tools", "json"])
def test_the_model_never_sees_rewards(live_server: Any, tmp_path: Path, action_format: str) -> None:
    """Nothing the model is sent after the system prompt — user messages, tool answers — carries a reward, a
    score or a verdict, in either mode, on the ticket tasks and on the store desk."""
    with StubLLM() as stub:
        proc = run_inference(
            [
                "--direct",
                "--tasks",
                "workflow-resolution,decision-medium,store-easy",
                "--limit-per-task",
                "2",
                "--concurrency",
                "1",
                "--action-format",
                action_format,
            ],
            live_server.url,
            extra_env=llm_env(stub, tmp_path),
        )
    assert proc.returncode == 0, proc.stderr
    episodes = hackathon_blocks(proc.stdout)
    assert any(float(s["reward"]) != 0.0 for e in episodes for s in e.steps)  # there were rewards to leak
    if action_format == "json":
        assert len(stub.prompts) >= 8 and any("YOUR PREVIOUS ACTIONS" in p for p in stub.prompts)
    else:  # every step's result came back as a tool answer: the observation without the grade
        assert len(stub.tool_answers) >= 8 and stub.with_tools == stub.calls
        for answer in set(stub.tool_answers):
            assert not {"reward", "score", "resolved", "final", "grade"} & set(json.loads(answer)), answer
    for sent in stub.prompts + stub.tool_answers:
        assert not re.search(r"reward|\bscore\b|resolved", sent, re.IGNORECASE), sent


# -------------------------------------------------------- success means the episode was resolved


class _ScriptedEnv:
    """Answers play_episode's service calls from a script: one step result per call, then /grader."""

    def __init__(self, results: list[dict[str, Any]], grader: dict[str, Any] | None) -> None:
        self.results, self.grader, self.grader_calls = list(results), grader, 0

    async def step(self, episode_id: str, action: dict[str, Any]) -> dict[str, Any]:
        return self.results.pop(0)

    async def grade(self, episode_id: str) -> dict[str, Any] | None:
        self.grader_calls += 1
        return self.grader


class _LookupAgent:
    async def act(self, obs: dict[str, Any]) -> agents.Turn:
        return agents.Turn({"lookup": "order"})

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        pass


def _play(
    results: list[dict[str, Any]], grader: dict[str, Any] | None
) -> tuple[runner.Outcome, list[str], _ScriptedEnv]:
    import asyncio

    env = _ScriptedEnv(results, grader)
    lines: list[str] = []
    start = runner.Started("ep-1", "decision-easy", 0, 0, {"step_count": 0}, False, "dev")
    outcome = asyncio.run(
        runner.play_episode(env, _LookupAgent(), start, "b", "m", runner.Deadline(None), lines.append)
    )  # type: ignore[arg-type]
    return outcome, lines, env


def _obs(**final: Any) -> dict[str, Any]:
    return {"step_count": 1, "last_action_error": None, **final}


@pytest.mark.parametrize(
    ("final", "grader", "success", "score"),
    [
        # the final observation says: resolved (score 0.6 would have failed no threshold test either way)
        ({"final": True, "score": 0.6, "resolved": True}, None, True, 0.6),
        # a high score that did not pass every required check is not a success
        ({"final": True, "score": 0.9, "resolved": False}, None, False, 0.9),
        # score withheld on the final observation (test split): /grader's verdict counts
        ({"final": True, "score": None, "resolved": None}, {"score": 0.7, "resolved": True}, True, 0.7),
        # an older server: no resolved anywhere, the old threshold on /grader's score
        ({}, {"score": 0.55}, True, 0.55),
        ({}, {"score": 0.45}, False, 0.45),
        # nothing revealed at all: the clipped reward sum, never a success claimed from it
        ({}, None, False, 1.0),
    ],
)
def test_success_is_resolved_when_the_server_says_so(
    final: dict[str, Any], grader: dict[str, Any] | None, success: bool, score: float
) -> None:
    outcome, lines, env = _play([{"observation": _obs(**final), "reward": 1.0, "done": True}], grader)
    assert outcome.success is success and outcome.score == pytest.approx(score)
    assert lines[-1].startswith(f"[END] success={'true' if success else 'false'} steps=1 ")
    if final.get("resolved") is not None:
        assert env.grader_calls == 0  # the final observation was enough


class _SilentAgent:
    """A model that never produces an action."""

    def __init__(self) -> None:
        self.told: list[tuple[dict[str, Any], bool]] = []

    async def act(self, obs: dict[str, Any]) -> agents.Turn:
        return agents.Turn(None, "the model called no tool")

    def observe_result(self, action: dict[str, Any], rejected: bool, note: str | None) -> None:
        self.told.append((action, rejected))


class _RecordingEnv(_ScriptedEnv):
    def __init__(self) -> None:
        super().__init__([{"observation": _obs(), "reward": 0.0, "done": True}], {"score": 0.1, "resolved": False})
        self.actions: list[dict[str, Any]] = []

    async def step(self, episode_id: str, action: dict[str, Any]) -> dict[str, Any]:
        self.actions.append(action)
        return await super().step(episode_id, action)


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        ("store", {"tool": "search_policy", "arguments": {"query": "store policy"}}),  # tool calls only
        ("decision", {"lookup": "policy"}),
        ("workflow", {"lookup": "policy"}),
    ],
)
def test_the_fallback_action_is_the_task_familys(family: str, expected: dict[str, Any]) -> None:
    """After three turns without an action the runner plays the family's fallback (before: a lookup everywhere,
    which the store desk refuses) and tells the agent what was played."""
    import asyncio

    env, agent, lines = _RecordingEnv(), _SilentAgent(), []
    start = runner.Started("ep-1", f"{family}-easy", 0, 0, {"step_count": 0}, False, "dev")
    fallback = runner.fallback_action(family)
    asyncio.run(
        runner.play_episode(env, agent, start, "b", "m", runner.Deadline(None), lines.append, fallback=fallback)  # type: ignore[arg-type]
    )
    assert env.actions == [expected] and agent.told == [(expected, False)]
    steps = [line for line in lines if line.startswith("[STEP]")]
    assert len(steps) == 3 and "fallback action after 3 turns" in steps[-1]


def test_inference_says_which_board_its_default_plays_for() -> None:
    """#21.5: the default split is dev, whose board is practice (its labels are public): stderr says so
    before anything is played, and --help too."""
    from client import cli

    assert cli.build_parser().parse_args([]).split == "dev"
    assert "practice board" in cli.board_label("dev") and "not the benchmark" in cli.board_label("dev")
    assert "benchmark" in cli.board_label("test") and "practice" not in cli.board_label("test")
    assert "practice board" in cli.build_parser().format_help()
