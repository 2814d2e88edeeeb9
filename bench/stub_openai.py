"""A scripted OpenAI-compatible chat-completions server for the inference tests.

Real HTTP on 127.0.0.1 (``http.server`` in a daemon thread), ``POST /v1/chat/completions``. It
plays a simple agent: it reads the ``task_id`` and ``step_count`` that inference.py renders into
its prompt and answers with a valid action (look up the order first, then decide or close; on the
store desk, search the policy, then end the conversation).

A request with ``tools`` (inference.py's default, native tool calling) is answered with
``tool_calls``: the task is read from the system prompt, the step count from the latest tool answer;
the ticket tasks play lookup, then decide (decision tasks) or tag, reply, close (workflow tasks).
Without ``tools`` (``--action-format json``) the action is JSON in the text.

How each answer is *delivered* is scripted per episode: ``behaviours`` maps a marker (a substring
of the prompt, e.g. a ticket id) to a list of kinds, consumed one per call for prompts containing
that marker; the last kind repeats. Prompts without a marker get ``default_kind``. Kinds:

``json`` plain JSON · ``fenced`` JSON in a json code fence with prose around it · ``prose`` JSON
inside a sentence · ``garbage`` no JSON at all · ``invalid`` JSON the service rejects (422) ·
``429`` rate limited · ``500`` server error · ``slow`` answers after ``slow_s`` (past the client's
timeout) · ``html`` a 200 whose body is an HTML page, not JSON (a base URL that is not the API's).
With tools, ``json``/``fenced``/``prose`` are one tool call; ``multi`` two calls in one message (the
second must not be played) · ``text`` an answer without a tool call · ``garbage`` a call whose
arguments are not JSON · ``invalid`` a call the service rejects (422).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from service.env import get_task

_TASK = re.compile(r"task_id: ([\w-]+)\) — step_count: (\d+)")
_SYSTEM_TASK = re.compile(r"Task: ([\w-]+) —")
REPLY = "Thank you for contacting us about your order; we have reviewed it."


def scripted_action(prompt: str) -> dict[str, Any]:
    """A valid action for the situation in the prompt: order lookup first, then finish."""
    m = _TASK.search(prompt)
    task_id, step_count = (m.group(1), int(m.group(2))) if m else ("decision-easy", 1)
    task = get_task(task_id)  # what the task's declaration says: its desk, what ends it
    if task.store_desk:
        return scripted_call(task_id, step_count)
    if step_count == 0:
        return {"lookup": "order"}
    if task.ends_on_decision:
        return {"decision": "reject"}
    return {"add_tag": "Policy_Denied", "reply": REPLY, "close_ticket": True}


def scripted_call(task_id: str, step_count: int) -> dict[str, Any]:
    """A valid tool call (``{"tool", "arguments"}``) for the step of an episode of ``task_id``."""
    task = get_task(task_id)
    if task.store_desk:
        if step_count == 0:
            return {"tool": "search_policy", "arguments": {"query": "damaged item replacement"}}
        return {"tool": "end_conversation", "arguments": {}}
    if step_count == 0:
        return {"tool": "lookup", "arguments": {"target": "order"}}
    if task.ends_on_decision:
        return {"tool": "decide", "arguments": {"decision": "reject"}}
    workflow = [("tag", {"tag": "Policy_Denied"}), ("reply", {"text": REPLY}), ("close", {})]
    name, arguments = workflow[min(step_count - 1, len(workflow) - 1)]
    return {"tool": name, "arguments": arguments}


def _situation(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The task (from the system prompt) and the step count (from the latest tool answer that has one)."""
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    found = _SYSTEM_TASK.search(system)
    step_count = 0
    for m in reversed(messages):
        if m.get("role") != "tool":
            continue
        try:
            step_count = int(json.loads(m.get("content") or "")["step_count"])
            break
        except (ValueError, KeyError, TypeError):
            continue
    return (found.group(1) if found else "decision-easy"), step_count


def tool_message(kind: str, messages: list[dict[str, Any]], serial: int) -> dict[str, Any]:
    """The assistant message of a native tool-calling turn."""
    task_id, step_count = _situation(messages)
    call = scripted_call(task_id, step_count)
    if kind == "text":
        return {"role": "assistant", "content": "I think the customer deserves an answer, but I am not sure how."}
    arguments = json.dumps(call["arguments"])
    if kind == "garbage":
        arguments = '{"target": "order"'
    elif kind == "invalid":
        call, arguments = {"tool": "decide"}, json.dumps({"decision": "maybe_later"})
    calls = [{"id": f"call_{serial}_0", "type": "function", "function": {"name": call["tool"], "arguments": arguments}}]
    if kind == "multi":  # a second call in the same message: the client answers it "not executed"
        extra = {"name": "get_customer" if get_task(task_id).store_desk else "lookup", "arguments": "{}"}
        calls.append({"id": f"call_{serial}_1", "type": "function", "function": extra})
    return {"role": "assistant", "content": None, "tool_calls": calls}


def render(kind: str, action: dict[str, Any]) -> str:
    body = json.dumps(action)
    if kind == "fenced":
        return f"Here is my action:\n```json\n{json.dumps(action, indent=2)}\n```\nLet me know if you need more."
    if kind == "prose":
        return f"I will go with {body} since that fits the policy."
    if kind == "garbage":
        return "I'm not sure what to do with this ticket, sorry."
    if kind == "invalid":
        return '{"decision": "maybe_later"}'
    return body


class StubLLM:
    def __init__(
        self,
        *,
        delay_s: float = 0.0,
        slow_s: float = 3.0,
        default_kind: str = "json",
        behaviours: dict[str, list[str]] | None = None,
    ) -> None:
        self.delay_s, self.slow_s, self.default_kind = delay_s, slow_s, default_kind
        self.behaviours = behaviours or {}
        self._cursor: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0
        self.served: Counter[str] = Counter()  # kind -> how many times
        self.by_marker: dict[str, list[str]] = {}  # marker -> kinds served, in order
        self.prompts: list[str] = []  # every user message received, in order
        self.tool_answers: list[str] = []  # every tool message received (native tool calling), in order
        self.with_tools = 0  # requests that offered tools
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                with stub._lock:
                    stub.in_flight += 1
                    stub.calls += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    status, payload = stub._answer(self.path, request)
                    html = payload.get("html")
                    data = html.encode() if isinstance(html, str) else json.dumps(payload).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "text/html; charset=utf-8" if html else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to deliver
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StubLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _kind_for(self, prompt: str) -> tuple[str, str | None]:
        with self._lock:
            for marker, kinds in self.behaviours.items():
                if marker in prompt:
                    i = self._cursor[marker]
                    self._cursor[marker] += 1
                    kind = kinds[min(i, len(kinds) - 1)]
                    self.by_marker.setdefault(marker, []).append(kind)
                    return kind, marker
            return self.default_kind, None

    def _answer(self, path: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}
        messages = request.get("messages") or []
        # the situation is in the first user message (a re-ask appends more turns after it)
        prompt = next((m["content"] for m in messages if m.get("role") == "user"), "")
        kind, _ = self._kind_for(prompt)
        tools = bool(request.get("tools"))
        with self._lock:
            self.served[kind] += 1
            self.with_tools += tools
            self.prompts.extend(m.get("content") or "" for m in messages if m.get("role") == "user")
            self.tool_answers.extend(m.get("content") or "" for m in messages if m.get("role") == "tool")
        if self.delay_s:
            time.sleep(self.delay_s)
        if kind == "429":
            return 429, {
                "error": {
                    "message": "Rate limit reached, slow down",
                    "type": "rate_limit_error",
                    "code": "rate_limited",
                }
            }
        if kind == "500":
            return 500, {"error": {"message": "upstream model crashed", "type": "server_error"}}
        if kind == "slow":
            time.sleep(self.slow_s)
        if kind == "html":
            return 200, {"html": "<!doctype html><html><body><h1>Welcome to our router</h1></body></html>"}
        if tools:
            message = tool_message(kind, messages, self.calls)
        else:
            message = {"role": "assistant", "content": render(kind, scripted_action(prompt))}
        content = message.get("content") or json.dumps(message.get("tool_calls"))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return 200, {
            "id": f"chatcmpl-{self.calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "stub"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": len(json.dumps(messages)) // 4,
                "completion_tokens": len(content) // 4,
                "total_tokens": len(json.dumps(messages)) // 4 + len(content) // 4,
            },
        }
