"""The benchmark's own endpoints beside OpenEnv's: the task catalogue, the grader and the baseline.
Thin: each handler calls a service and returns a model."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from service import env as core
from service.domain.benchmark.schemas import BaselineResponse, TasksResponse
from service.domain.benchmark.services import BaselineCache
from service.domain.episodes.controllers import GRADER_QUERY, EpisodeIdQuery, closed_query, implicit
from service.domain.episodes.credentials import episode_token
from service.domain.episodes.schemas import GraderResponse, wire_action_schema
from service.domain.episodes.services import EpisodeService
from service.domain.episodes.task_names import aliases_of
from service.domain.runs.schemas import RunGradeResponse
from service.lib.problems import bearer, problem_responses
from service.settings import Settings


class BenchmarkController(Controller):
    tags = ["benchmark"]

    @get("/tasks", summary="Every task with its grader description, its tools and the action schema")
    async def tasks(self) -> TasksResponse:
        action_schema = wire_action_schema()
        return TasksResponse(
            tasks=[
                {
                    **t.model_dump(mode="json"),
                    "action_schema": action_schema,
                    "aliases": aliases_of(t.id),
                    "tools": core.tool_specs(t.family),
                }
                for t in core.TASKS.values()
            ],
            action_schema=action_schema,
        )

    @get(
        "/grader",
        summary=(
            "Resolved, score in [0, 1] and breakdown of a finished episode (never a test episode), or a run's summary"
        ),
        responses=problem_responses(401, 403, 404, 409),
    )
    async def grader(
        self,
        request: Request[Any, Any, Any],
        episodes: NamedDependency[EpisodeService],
        episode_id: EpisodeIdQuery = None,
        run_id: Annotated[str | None, QueryParameter(max_length=64, description="From POST /runs.")] = None,
    ) -> GraderResponse | RunGradeResponse:
        # One dependency: Litestar resolves two or more in a task group, on every request.
        closed_query(request, GRADER_QUERY)
        if run_id is not None and episode_id is None and episodes.runs is not None:
            run = await episodes.runs.detail(run_id, token=bearer(request))
            return RunGradeResponse(**{k: run.get(k) for k in RunGradeResponse.model_fields})
        episode_id = implicit(request).resolve(request, episode_id)
        return await episodes.grade(episode_id, episode_token(request, episode_id=episode_id))

    @get("/baseline", summary="Server-side heuristic agent on every task, fixed dev seeds")
    async def baseline(self, state: State, settings: NamedDependency[Settings]) -> BaselineResponse:
        cache: BaselineCache = state.baseline
        return BaselineResponse(**await cache.get(settings))
