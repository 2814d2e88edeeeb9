"""The environment for TRL's ``GRPOTrainer(environment_factory=...)``: one class per desk, one instance per
rollout, each playing its own episode on a running service.

- :class:`TicketDesk` plays the six ticket tasks (``decision-*``, ``workflow-*``); its tools are
  ``decide``, ``reply``, ``route``, ``tag``, ``lookup`` and ``close``.
- :class:`StoreDesk` plays the store desk (``store-*``); its tools are the store's eighteen.

What TRL reads from an instance (``trl.GRPOTrainer`` with ``environment_factory``): ``reset(**row)``,
called with the dataset row's columns (``task_id``, ``seed``, ``split``; others such as ``prompt`` are
ignored), returns the first observation as text; every other public method is a tool, described to the
model by ``transformers.utils.get_json_schema`` from its type hints and Google-style docstring. Those
methods are generated from the tools' pydantic models (``service.env.tools_for``: one source, the one
``GET /tasks`` and MCP show), so they cannot drift from what the server accepts. ``reward`` is the
episode's reward: ``GET /grader``'s score once the episode has ended, 0.0 until then (an episode the
rollout left unfinished earns 0.0).

The calls go over the service's HTTP API (``client.wire.EnvClient``: 429 and 503 retried after their
``Retry-After``, paced by ``GET /limits``). TRL calls environments synchronously; the requests of every
instance in the process run on one background event loop, so instances used from many threads at once
each play their own episode. See docs/training.md.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import threading
import types
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from client.config import DEFAULT_ENV_URL
from client.prompt import first_message, tool_instructions, tool_message_text
from client.wire import EnvClient, Pacing, ServiceError
from service.env import TASKS, UnknownTask, get_task, tools_for

# ------------------------------------------------------------------------- the background event loop

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` on the process's background loop (started on first use) and wait for its result."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="ecomm-trl-loop", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(coro, _loop).result()


_pacing: dict[str, Pacing] = {}  # one per service URL, shared by every instance (GET /limits, read once)


async def _pacing_for(url: str) -> Pacing:
    if url not in _pacing:
        probe = EnvClient(url)
        try:
            _pacing[url] = Pacing.from_limits(await probe.limits())
        finally:
            await probe.aclose()
    return _pacing[url]


# ------------------------------------------------------------------- tool methods from the tool models


def _hint(annotation: Any) -> Any:
    """The Python type hint ``get_json_schema`` can read for a model field: nested models become ``dict``
    (their fields are described in the docstring), everything else stays as it is."""
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return dict
    if origin is list:
        return list[_hint(args[0])] if args else list  # type: ignore[misc]
    if origin in (Union, types.UnionType):
        inner = [_hint(a) for a in args if a is not type(None)]
        return Union[tuple(inner) + ((type(None),) if type(None) in args else ())]  # noqa: UP007 - built at run time
    return annotation


def _kind(annotation: Any) -> str:
    """A field's type in words, for the nested objects' descriptions."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin in (Union, types.UnionType):
        return " or ".join(_kind(a) for a in args if a is not type(None))
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(annotation, "value")


def _bounds(field: FieldInfo) -> str:
    """A field's limits in words (``1 to 32 characters``, ``1 to 99``): what its schema's keywords say."""
    limits: dict[str, Any] = {}
    for constraint in field.metadata:
        for key in ("min_length", "max_length", "ge", "gt", "le"):
            if getattr(constraint, key, None) is not None:
                limits[key] = getattr(constraint, key)
    unit = " items" if get_origin(field.annotation) is list else " characters"
    low, high = limits.get("min_length"), limits.get("max_length")
    if low is None and high is None:
        low, high, unit = limits.get("ge"), limits.get("le"), ""
        if limits.get("gt") is not None:
            return f"more than {limits['gt']}" + (f", at most {high}" if high is not None else "")
    if low is not None and high is not None:
        return f"{low} to {high}{unit}"
    if high is not None:
        return f"at most {high}{unit}"
    return f"at least {low}{unit}" if low is not None else ""


def _describe(name: str, field: FieldInfo) -> str:
    """One line for ``Args:``: the field's own description, or its type and limits in words; a list of
    objects lists their fields (the type hint says only ``list[dict]``)."""
    text = (field.description or "").strip().rstrip(".")
    annotation = field.annotation
    item = get_args(annotation)[0] if get_origin(annotation) is list and get_args(annotation) else None
    if isinstance(item, type) and issubclass(item, BaseModel):
        inner = "; ".join(
            f"{n} ({_kind(f.annotation)}{', ' + _bounds(f) if _bounds(f) else ''}"
            f"{'' if f.is_required() else ', default ' + repr(f.get_default(call_default_factory=True))})"
            + (f": {f.description.rstrip('.')}" if f.description else "")
            for n, f in item.model_fields.items()
        )
        text = f"{text + '. ' if text else ''}A list of objects, each with: {inner}"
    elif not text:
        limits = _bounds(field)
        text = f"The {name.replace('_', ' ')}" + (f" ({limits})" if limits else "")
    default = None if field.is_required() else field.get_default(call_default_factory=True)
    if default not in (None, [], ""):
        text += f". Default: {str(default).lower() if isinstance(default, bool) else default}"
    return " ".join(text.split()) + "."


def _docstring(description: str, model: type[BaseModel]) -> str:
    lines = [" ".join(description.split()), ""]
    if model.model_fields:
        lines.append("Args:")
        lines += [f"    {name}: {_describe(name, field)}" for name, field in model.model_fields.items()]
        lines.append("")
    lines += ["Returns:", "    What the desk shows after the call (JSON): the tool's result, new messages, notes."]
    return "\n".join(lines)


def _tool_method(name: str, description: str, model: type[BaseModel]) -> Callable[..., str]:
    """A public method standing for the tool ``name``: keyword arguments typed as its model's fields, a
    Google-style docstring with an ``Args:`` line per field; calling it plays the tool as one step."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    for field_name, field in model.model_fields.items():
        hints[field_name] = _hint(field.annotation)
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        params.append(
            inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[field_name])
        )
    hints["return"] = str
    signature = inspect.Signature(params, return_annotation=str)

    def method(self: _Desk, *args: Any, **kwargs: Any) -> str:
        episode_id = self._open_episode()
        bound = signature.bind(self, *args, **kwargs)  # an unknown argument is a TypeError naming it
        return self._play(episode_id, name, {k: v for k, v in bound.arguments.items() if k != "self"})

    method.__name__ = method.__qualname__ = name
    method.__doc__ = _docstring(description, model)
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = hints
    return method


# ---------------------------------------------------------------------------------------- the desks


class EpisodeOver(RuntimeError):
    """A tool called after the episode ended (or before any reset)."""


class _Desk:
    """One rollout's environment: plays one episode at a time on the service at ``base_url`` (``ENV_URL``,
    else http://localhost:7860). ``reward`` is ``GET /grader``'s score once the episode ends, else 0.0."""

    _family: ClassVar[str]
    _tasks: ClassVar[tuple[str, ...]]

    def __init__(self, base_url: str | None = None, split: str = "train", seed: int | None = None) -> None:
        self._url = (base_url or os.environ.get("ENV_URL") or DEFAULT_ENV_URL).rstrip("/")
        self._split = split
        self._rng = random.Random(seed)
        self._env: EnvClient | None = None
        self._episode_id: str | None = None
        self._seen = 0
        self.reward = 0.0
        self.done = False
        self.episode_id: str | None = None

    def reset(self, task_id: str | None = None, seed: int | None = None, split: str | None = None, **_: Any) -> str:
        """Start a new episode (TRL passes the dataset row's columns; only these three are used) and return
        its first observation as text. Without a task_id, one of this desk's tasks is drawn."""
        try:  # an alias (docs/api.md) names its task
            task = get_task(task_id).id if task_id else self._rng.choice(self._tasks)
        except UnknownTask as exc:
            raise ValueError(str(exc)) from exc
        if task not in self._tasks:
            raise ValueError(f"{task} is not a task of {type(self).__name__} (its tasks: {', '.join(self._tasks)})")
        body: dict[str, Any] = {"task_id": task, "split": split or self._split}
        if seed is not None:
            body["seed"] = int(seed)
        started = _run(self._client_call(lambda env: env.reset(**body)))
        obs = started["observation"]
        self._episode_id = self.episode_id = str((started.get("metadata") or {}).get("episode_id") or obs["episode_id"])
        self._seen = len(obs.get("history") or [])
        self.reward, self.done = 0.0, bool(started.get("done"))
        return first_message(obs)

    async def _client_call(self, call: Callable[[EnvClient], Coroutine[Any, Any, Any]]) -> Any:
        if self._env is None:  # made on the background loop, where it is used
            self._env = EnvClient(self._url, pacing=await _pacing_for(self._url))
        return await call(self._env)

    def _open_episode(self) -> str:
        """The episode a tool call acts on; :class:`EpisodeOver` before any reset and after the episode ended."""
        if self._episode_id is None:
            raise EpisodeOver("no episode: reset first")
        if self.done:
            raise EpisodeOver("the episode is over; no more tool calls")
        return self._episode_id

    def _play(self, episode_id: str, tool: str, arguments: dict[str, Any]) -> str:
        """One tool call as one step of the episode; the observation after it, without the grade, as text.
        The episode's end sets ``reward`` from ``GET /grader``."""
        action = {"tool": tool, "arguments": arguments}
        try:
            result = _run(self._client_call(lambda env: env.step(episode_id, action)))
        except ServiceError as exc:
            if exc.status == 422:  # the call does not fit the tool: nothing was played
                raise ValueError(exc.detail) from exc
            raise
        obs = result["observation"]
        text = tool_message_text(obs, self._seen)
        self._seen = len(obs.get("history") or [])
        if result.get("done"):
            self.done = True
            graded = _run(self._client_call(lambda env: env.grade(episode_id))) or {}
            score = graded.get("score")
            self.reward = float(score) if isinstance(score, (int, float)) else 0.0
            text += "\nThe episode is over."
        return text

    def __del__(self) -> None:
        env, loop = self._env, _loop
        if env is not None and loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(env.aclose(), loop)


def _desk_class(name: str, family: str, doc: str) -> type[_Desk]:
    tools = tools_for(family)
    namespace: dict[str, Any] = {
        "__doc__": doc,
        "__module__": __name__,
        "_family": family,
        "_tasks": tuple(t.id for t in TASKS.values() if (t.family == "store") == (family == "store")),
    }
    for tool in tools:
        method = _tool_method(tool.name, tool.description, tool.args)
        method.__qualname__ = f"{name}.{tool.name}"
        namespace[tool.name] = method
    return type(name, (_Desk,), namespace)


TicketDesk = _desk_class(
    "TicketDesk",
    "decision",
    "The six ticket tasks (decision-easy/medium/hard, workflow-triage/routing/resolution) for TRL: reset(task_id, "
    "seed, split) and the tools decide, reply, route, tag, lookup, close; ``reward`` is /grader's score at the end.",
)
StoreDesk = _desk_class(
    "StoreDesk",
    "store",
    "The store desk's tasks (store-easy/medium/hard) for TRL: reset(task_id, seed, split) and the store's eighteen "
    "tools; ``reward`` is /grader's score at the end.",
)


def dataset_rows(task_ids: list[str], seeds: range | list[int], split: str = "train") -> list[dict[str, Any]]:
    """Rows for a ``datasets.Dataset``: one per (task, seed), the prompt the task's instructions (as
    inference.py's tool-calling agent gets them), and the columns ``reset`` reads."""
    rows = []
    for task_id in task_ids:
        task = TASKS[task_id].model_dump(mode="json")
        prompt = [{"role": "user", "content": tool_instructions(task)}]
        rows += [{"prompt": prompt, "task_id": task_id, "seed": seed, "split": split} for seed in seeds]
    return rows


__all__ = ["EpisodeOver", "StoreDesk", "TicketDesk", "dataset_rows"]
