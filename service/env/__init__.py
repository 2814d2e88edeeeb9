"""The environment core: pure, synchronous, deterministic. No web, no database, no I/O at step time.

Public surface (read this, nothing else is needed to drive an episode)::

    state, obs = reset(task_id, seed, split)        # a new episode (pass dataset=Dataset(test_key) for test)
    result = step(state, action)                     # StepResult(state, observation, reward, done, grade)
    grade = grade_episode(result.state)              # Grade(resolved, score in [0, 1], components) == result.grade

Tasks live in :data:`TASKS`; the store policy document is :func:`render_policy_markdown`.
"""

from service.env.about import ENV_NAME, ENV_VERSION
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
from service.env.dataset import (
    DATASET_VERSION,
    HIDDEN_SPLIT,
    PUBLIC,
    PUBLIC_SPLITS,
    Dataset,
    MissingTestKey,
    UnknownTicket,
    derive_test_key,
    key_fingerprint,
)
from service.env.grading import GRADER_VERSION, grade_episode
from service.env.models import (
    ACTION_FIELDS,
    ACTION_TYPE,
    ACTION_TYPE_CONFLICT,
    Action,
    EpisodeState,
    Grade,
    GradeComponent,
    Observation,
    StepResult,
)
from service.env.policy import render_policy_markdown
from service.env.tasks import (
    MAX_SEED,
    MAX_TRIALS,
    TASKS,
    TICKET_TASKS,
    ManifestEntry,
    TaskSpec,
    choose_task,
    get_task,
    run_manifest,
)
from service.env.toolbox import tool_specs, tools_for
from service.env.visibility import Feedback, feedback
from service.env.world import DEFAULT_SPLIT, SPLITS, Split

__all__ = [
    "ACTION_FIELDS",
    "ACTION_TYPE",
    "ACTION_TYPE_CONFLICT",
    "DATASET_VERSION",
    "DEFAULT_SPLIT",
    "ENV_NAME",
    "ENV_VERSION",
    "GRADER_VERSION",
    "HIDDEN_SPLIT",
    "MAX_SEED",
    "MAX_TRIALS",
    "PUBLIC",
    "PUBLIC_SPLITS",
    "SPLITS",
    "TASKS",
    "TICKET_TASKS",
    "Action",
    "Dataset",
    "EnvError",
    "EpisodeFinished",
    "EpisodeState",
    "Feedback",
    "Grade",
    "GradeComponent",
    "ManifestEntry",
    "MissingTestKey",
    "Observation",
    "Split",
    "StepResult",
    "TaskSpec",
    "UnknownTask",
    "UnknownTicket",
    "choose_task",
    "derive_test_key",
    "feedback",
    "get_task",
    "grade_episode",
    "key_fingerprint",
    "observe",
    "public_state",
    "render_policy_markdown",
    "replay",
    "reset",
    "run_manifest",
    "step",
    "tool_specs",
    "tools_for",
]
