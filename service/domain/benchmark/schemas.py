"""Response bodies of the task catalogue and the baseline (the grader's are the episodes' and
the runs' own: ``GraderResponse``, ``RunGradeResponse``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class TasksResponse(BaseModel):
    tasks: list[dict[str, Any]]
    action_schema: dict[str, Any]


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
