"""Which task a reset or a run means: task ids, the seeds' aliases (``service.env.tasks.TASK_ALIASES``:
seed A's ``easy|medium|hard``, seed B's workflow names), and the choice of a task for a reset that
names none."""

from __future__ import annotations

from service import env as core
from service.env.errors import DifficultyMismatch, UnknownDifficulty, UnknownTask
from service.env.tasks import TASK_ALIASES
from service.errors import InvalidRequest


def canonical_task_id(task_id: str) -> str:
    """A task id, with an alias replaced by the task it names (unknown ids are returned as given)."""
    try:
        return core.get_task(task_id).id
    except UnknownTask:
        return task_id


def aliases_of(task_id: str) -> list[str]:
    return [alias for alias, task in TASK_ALIASES.items() if task == task_id]


def unknown_task(task_id: str) -> InvalidRequest:
    aliases = ", ".join(f"{a} ({t})" for a, t in TASK_ALIASES.items())
    return InvalidRequest(
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
    """The task id for a reset (:func:`service.env.tasks.choose_task`), its refusals as problems."""
    try:
        return core.choose_task(task_id, difficulty, seed, pool).id
    except UnknownTask:
        raise unknown_task(canonical_task_id(task_id or "")) from None
    except DifficultyMismatch as exc:
        raise InvalidRequest(
            str(exc), errors=[{"field": "difficulty", "message": "does not match task_id", "type": "mismatch"}]
        ) from None
    except UnknownDifficulty as exc:
        raise InvalidRequest(
            str(exc), errors=[{"field": "difficulty", "message": "unknown difficulty", "type": "unknown_difficulty"}]
        ) from None
