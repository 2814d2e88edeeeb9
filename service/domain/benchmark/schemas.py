"""Response bodies of the task catalogue, the grader and the baseline.

``GraderResponse`` (every finished episode) is a msgspec struct: Litestar encodes it natively,
without a pydantic validation and dump on the hot path. The rest are pydantic models.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from pydantic import BaseModel, ConfigDict


class TasksResponse(BaseModel):
    tasks: list[dict[str, Any]]
    action_schema: dict[str, Any]


class GraderResponse(msgspec.Struct, omit_defaults=True):
    """``GET /grader?episode_id=…``: the stored grade of a finished episode (once per episode: a struct)."""

    episode_id: str
    task_id: str
    score: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    resolved: bool
    grader_version: str
    components: list[dict[str, Any]]
    clauses: list[str]
    raw: float | None
    finished: bool
    step_count: int
    graded_at: str


class BaselineTaskScore(BaseModel):
    mean: float
    episodes: int


class BaselineResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    agent: str
    split: str
    seeds_per_task: int
    tasks: dict[str, BaselineTaskScore]
    overall: float
