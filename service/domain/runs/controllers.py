"""Runs, leaderboard and HTML pages. Thin: parse, call :class:`RunService`, return a model or a page.

``/leaderboard``, ``/runs/{id}`` and ``/episodes/{id}`` answer JSON by default and an HTML page
to clients that ask for ``text/html`` (browsers), or with ``?format=html``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Annotated, Any

from litestar import Controller, MediaType, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.response import Stream, Template

from service import env as core
from service.domain.episodes.credentials import episode_token
from service.domain.episodes.schemas import EpisodeView, ObservationResponse
from service.domain.episodes.services import EpisodeService
from service.domain.runs.pages import conditional_page, page_spec, wants_html
from service.domain.runs.schemas import (
    BOARD_PAGE_DEFAULT,
    BOARD_PAGE_MAX,
    MANIFEST_PAGE_MAX,
    RUN_PAGE_ASKED_MAX,
    RUN_PAGE_DEFAULT,
    RUN_PAGE_MAX,
    CreateRun,
    Leaderboard,
    ManifestPage,
    RunCreated,
    RunPage,
    RunView,
    TrajectoryLine,
    Usage,
)
from service.domain.runs.services import RunService
from service.lib.limits import counted_address
from service.lib.problems import bearer, problem_responses

SplitQuery = Annotated[
    core.Split,
    QueryParameter(
        description="The split whose leaderboard to show: test (the benchmark, the default) or a practice board "
        "(dev, train: their labels are public)."
    ),
]
VerifiedQuery = Annotated[
    bool, QueryParameter(description="Only rows whose run an operator verified (ranked among themselves).")
]


class RunController(Controller):
    tags = ["runs"]

    @post(
        "/runs",
        status_code=201,
        summary="Create a run: the server fixes its manifest and returns a run token "
        "(test split: Authorization: Bearer <submitter key>)",
        responses=problem_responses(401, 403, 429),
    )
    async def create(
        self, request: Request[Any, Any, Any], runs: NamedDependency[RunService], data: JSONBody[CreateRun]
    ) -> RunCreated:
        return await runs.create(data, submitter_key=bearer(request))

    @post(
        "/runs/{run_id:str}/next",
        status_code=200,
        summary="Start the run's next episode (Bearer run token)",
        responses=problem_responses(401, 403, 404, 409),
    )
    async def next_episode(
        self, request: Request[Any, Any, Any], runs: NamedDependency[RunService], run_id: FromPath[str]
    ) -> ObservationResponse:
        return ObservationResponse.of(await runs.next_episode(run_id, bearer(request), counted_address(request)))

    @post(
        "/runs/{run_id:str}/usage",
        status_code=200,
        summary="Self-reported token usage (shown as such)",
        responses=problem_responses(401, 403, 404),
    )
    async def usage(
        self,
        request: Request[Any, Any, Any],
        runs: NamedDependency[RunService],
        run_id: FromPath[str],
        data: JSONBody[Usage],
    ) -> RunView:
        return await runs.set_usage(run_id, bearer(request), data)

    @get(
        "/runs/{run_id:str}",
        summary="A run: status, summary and one page of its episodes (ETag; If-None-Match answers 304)",
        responses={
            200: page_spec(RunPage, "the run page (JSON; an HTML page for browsers or ?format=html)"),
            **problem_responses(404),
        },
    )
    async def detail(
        self,
        request: Request[Any, Any, Any],
        runs: NamedDependency[RunService],
        run_id: FromPath[str],
        page: Annotated[int, QueryParameter(ge=1, le=1_000_000, description="1-based page of the run's episodes.")] = 1,
        per_page: Annotated[
            int,
            QueryParameter(
                ge=1,
                le=RUN_PAGE_ASKED_MAX,
                description=(
                    f"Episodes per page; more than {RUN_PAGE_MAX} is served as {RUN_PAGE_MAX} (the page object says "
                    "how many)."
                ),
            ),
        ] = RUN_PAGE_DEFAULT,
    ) -> Response[Any]:  # JSON (or HTML) bytes built once per version of the page
        per_page = min(per_page, RUN_PAGE_MAX)
        token = bearer(request)  # a test run lists its episodes to its holder only, while it is active
        version = await runs.page_version(run_id, page, per_page, token)
        return await conditional_page(
            request,
            version,
            lambda: runs.detail(run_id, page, per_page, token),
            "run.html",
            lambda run: {"run": run, "tasks": core.TASKS},
        )

    @get(
        "/runs/{run_id:str}/manifest",
        summary="The run's manifest, paged: the ticket (task, seed, trial) of each episode index",
        responses=problem_responses(404),
    )
    async def manifest(
        self,
        runs: NamedDependency[RunService],
        run_id: FromPath[str],
        offset: Annotated[int, QueryParameter(ge=0, le=10_000_000)] = 0,
        limit: Annotated[int, QueryParameter(ge=1, le=MANIFEST_PAGE_MAX)] = MANIFEST_PAGE_MAX,
    ) -> ManifestPage:
        return await runs.manifest_page(run_id, offset, limit)

    @get(
        "/runs/{run_id:str}/trajectories.jsonl",
        summary="Finished episodes, one JSON object a line (never on test)",
        media_type="application/x-ndjson",
        responses={
            200: ResponseSpec(
                data_container=TrajectoryLine,
                media_type="application/x-ndjson",
                description="one TrajectoryLine per finished episode, a JSON object a line",
            ),
            **problem_responses(401, 403, 404, 409),
        },
    )
    async def trajectories(
        self, request: Request[Any, Any, Any], runs: NamedDependency[RunService], run_id: FromPath[str]
    ) -> Stream:
        lines = runs.trajectories(run_id, bearer(request))
        first = await anext(lines, None)  # surface 4xx problems before the stream starts

        async def body() -> AsyncIterator[str]:
            if first is not None:
                yield first
                async for line in lines:
                    yield line

        return Stream(body(), media_type="application/x-ndjson")

    @get(
        "/leaderboard",
        summary="Ranked finished runs of a split: the test board (the benchmark) or a practice board, with tie "
        "groups, paged (ETag; If-None-Match answers 304)",
        responses={
            200: page_spec(Leaderboard, "the leaderboard (JSON; an HTML page for browsers or ?format=html)"),
            **problem_responses(),
        },
    )
    async def leaderboard(
        self,
        request: Request[Any, Any, Any],
        runs: NamedDependency[RunService],
        split: SplitQuery = core.HIDDEN_SPLIT,
        verified: VerifiedQuery = False,
        page: Annotated[int, QueryParameter(ge=1, le=1_000_000, description="1-based page of the ranked rows.")] = 1,
        per_page: Annotated[
            int, QueryParameter(ge=1, le=BOARD_PAGE_MAX, description="Ranked rows per page.")
        ] = BOARD_PAGE_DEFAULT,
    ) -> Response[Any]:  # JSON (or HTML) bytes built once per version of the page
        version = await runs.board_version(split, page, per_page, verified)
        return await conditional_page(
            request,
            version,
            lambda: runs.leaderboard_page(split, page, per_page, verified),
            "leaderboard.html",
            lambda board: {"board": board, "chart": chart(board["rows"])},
        )

    @get(
        "/episodes/{episode_id:str}",
        summary="One episode: ticket, every step, grade breakdown (never a test episode; "
        "a client-chosen id needs X-Episode-Token)",
        responses={
            200: page_spec(EpisodeView, "the episode (JSON; an HTML page for browsers or ?format=html)"),
            **problem_responses(401, 403, 404),
        },
    )
    async def episode(
        self, request: Request[Any, Any, Any], episodes: NamedDependency[EpisodeService], episode_id: FromPath[str]
    ) -> Any:
        view = await episodes.view(episode_id, episode_token(request, episode_id=episode_id))
        if wants_html(request):
            return Template(template_name="episode.html", context={"ep": view}, media_type=MediaType.HTML)
        return view


def chart(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Geometry of the inline SVG: one bar per ranked run (its resolved rate), with its 95% CI as an error bar."""
    width, bar_h, gap, left = 640, 22, 10, 220
    scale = width - left - 20
    bars = []
    for i, row in enumerate(rows):
        lo, hi = row["resolved_ci95"]
        y = i * (bar_h + gap) + 10
        bars.append(
            {
                "label": f"{row['agent']} {row['model']}".strip()[:32],
                "y": y,
                "text_y": y + bar_h * 0.7,
                "width": round(row["resolved"] * scale, 1),
                "lo": round(left + lo * scale, 1),
                "hi": round(left + hi * scale, 1),
                "mid": y + bar_h / 2,
                "resolved": row["resolved"],
            }
        )
    return {
        "width": width,
        "height": len(rows) * (bar_h + gap) + 30,
        "left": left,
        "scale": scale,
        "bar_h": bar_h,
        "bars": bars,
        "axis_y": len(rows) * (bar_h + gap) + 12,
    }


__all__ = ["RunController"]
