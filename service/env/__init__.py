"""The environment core: pure, synchronous, deterministic. No web, no database, no I/O at step time.

Public surface (read this, nothing else is needed to drive an episode)::

    state, obs = reset(task_id, seed, split)        # a new episode
    result = step(state, action)                     # StepResult(state, observation, reward, done, grade)
    grade = grade_episode(result.state)              # Grade(score in [0, 1], components, clauses) == result.grade

Tasks live in :data:`TASKS`; the store policy document is :func:`render_policy_markdown`.
"""

from service.env.core import (
    EnvError,
    EpisodeFinished,
    UnknownTask,
    observe,
    public_state,
    replay,
    reset,
    step,
)
from service.env.dataset import DATASET_VERSION, load_ticket, tickets_for
from service.env.grading import GRADER_VERSION, HIDDEN_SPLIT, grade_episode, redact_grade, results_hidden
from service.env.models import (
    ACTION_FIELDS,
    Action,
    EpisodeState,
    Grade,
    GradeComponent,
    Observation,
    StepResult,
)
from service.env.policy import render_policy_markdown
from service.env.tasks import MAX_TRIALS, TASKS, ManifestEntry, TaskSpec, get_task, run_manifest

__all__ = [
    "ACTION_FIELDS",
    "DATASET_VERSION",
    "GRADER_VERSION",
    "HIDDEN_SPLIT",
    "TASKS",
    "Action",
    "EnvError",
    "EpisodeFinished",
    "EpisodeState",
    "Grade",
    "GradeComponent",
    "MAX_TRIALS",
    "ManifestEntry",
    "Observation",
    "StepResult",
    "TaskSpec",
    "UnknownTask",
    "get_task",
    "grade_episode",
    "load_ticket",
    "observe",
    "public_state",
    "redact_grade",
    "render_policy_markdown",
    "replay",
    "reset",
    "results_hidden",
    "run_manifest",
    "step",
    "tickets_for",
]
