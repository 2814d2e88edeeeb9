"""Which task a reset or a run means: task ids, the seeds' aliases (``service.env.tasks.TASK_ALIASES``:
seed A's ``easy|medium|hard``, seed B's workflow names), and the choice of a task for a reset that
names none."""

from __future__ import annotations

from service import env as core
from service.env.errors import UnknownTask
from service.env.tasks import TASK_ALIASES
from service.lib.problems import InvalidInput


def canonical_task_id(task_id: str) -> str:
    """A task id, with an alias replaced by the task it names (unknown ids are returned as given)."""
    try:
        return core.get_task(task_id).id
    except UnknownTask:
        return task_id


def aliases_of(task_id: str) -> list[str]:
    return [alias for alias, task in TASK_ALIASES.items() if task == task_id]


def unknown_task(task_id: str) -> InvalidInput:
    aliases = ", ".join(f"{a} ({t})" for a, t in TASK_ALIASES.items())
    return InvalidInput(
        f"unknown task_id {task_id!r}; choose one of: {', '.join(core.TASKS)}, or an alias: {aliases} (GET /tasks)",
        errors=[{"field": "task_id", "message": "unknown task", "type": "unknown_task"}],
    )


def default_task_pool(names: tuple[str, ...]) -> tuple[str, ...]:
    """The task ids of the DEFAULT_TASKS setting (ids or aliases); the six ticket tasks when empty."""
    ids = tuple(dict.fromkeys(canonical_task_id(n) for n in names))
    unknown = [i for i in ids if i not in core.TASKS]
    if unknown:
        raise ValueError(
            f"DEFAULT_TASKS names unknown tasks {unknown}; use ids ({', '.join(core.TASKS)}) or aliases "
            f"({', '.join(TASK_ALIASES)})"
        )
    return ids or tuple(core.TICKET_TASKS)  # the store desk is played by name: its tools are another protocol


def choose_task(task_id: str | None, difficulty: str | None, seed: int, pool: tuple[str, ...] | None = None) -> str:
    """The task for a reset: the one asked for, else one of the asked difficulty, else one of
    ``pool`` (the ticket tasks by default) by seed."""
    tasks = list(core.TASKS.values())
    if task_id is not None:
        task_id = canonical_task_id(task_id)
        if task_id not in core.TASKS:
            raise unknown_task(task_id)
        spec = core.TASKS[task_id]
        if difficulty is not None and spec.difficulty != difficulty:
            raise InvalidInput(
                f"task {task_id!r} has difficulty {spec.difficulty!r}, not {difficulty!r}; pass one of them only",
                errors=[{"field": "difficulty", "message": "does not match task_id", "type": "mismatch"}],
            )
        return task_id
    if difficulty is not None:
        matching = [t for t in tasks if t.difficulty == difficulty]
        if not matching:
            known = sorted({t.difficulty for t in tasks})
            raise InvalidInput(
                f"no task has difficulty {difficulty!r}; use one of: {', '.join(known)}",
                errors=[{"field": "difficulty", "message": "unknown difficulty", "type": "unknown_difficulty"}],
            )
        preferred = [t for t in matching if t.family == "decision"] or matching
        return preferred[seed % len(preferred)].id
    ids = pool or tuple(core.TICKET_TASKS)
    return ids[seed % len(ids)]
