"""OpenEnv's HTTP endpoints: reset, step, state, health, metadata, schema. Thin: each handler parses,
calls :class:`~service.domain.episodes.services.EpisodeService` (or the core), and returns a model."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, QueryParameter
from pydantic import ValidationError

from service import env as core
from service.domain.episodes.cookies import (
    COOKIE_DOC,
    TOKEN_COOKIE_DOC,
    ImplicitEpisode,
    cookie_token,
    served_over_https,
)
from service.domain.episodes.credentials import episode_token, explicit_episode_token
from service.domain.episodes.schemas import (
    CHOICE_MAX,
    EPISODE_ID_MAX,
    MAX_SEED,
    RUN_ID_MAX,
    TASK_ID_MAX,
    EpisodeResult,
    HealthResponse,
    MetadataResponse,
    ObservationResponse,
    ResetParams,
    SchemaResponse,
    StateResponse,
    StepRequest,
    wire_action_schema,
    wire_observation_schema,
)
from service.domain.episodes.services import EpisodeService
from service.errors import MAX_LISTED_ERRORS, InvalidRequest, clip
from service.lib.decoding import validation_errors
from service.lib.limits import counted_address
from service.lib.problems import bearer, listed, problem_responses
from service.settings import Settings

ENV_DESCRIPTION = (
    "E-commerce customer-support decisions: each episode is one support ticket; the agent decides, "
    "replies, tags, routes and closes it under an executable store policy, and is graded."
)

EpisodeIdQuery = Annotated[
    str | None,
    QueryParameter(
        max_length=EPISODE_ID_MAX, description="From POST /reset; without it, the episode of the ecomm_episode cookie."
    ),
]


# The query parameters of each GET whose parameters matter (the handlers' own): anything else is
# refused by name, as POST /reset's closed body refuses unknown fields — never silently ignored.
RESET_QUERY = ("seed", "episode_id", "task_id", "split", "difficulty", "run_id")
STATE_QUERY = ("episode_id",)
GRADER_QUERY = ("episode_id", "run_id")


def closed_query(request: Request[Any, Any, Any], accepted: tuple[str, ...]) -> None:
    """422 naming every query key not in ``accepted`` (one scope lookup when there is no query)."""
    if not request.scope.get("query_string"):
        return
    unknown = [k for k in dict.fromkeys(request.query_params) if k not in accepted]
    if not unknown:
        return
    named = ", ".join(repr(clip(k)) for k in unknown[:MAX_LISTED_ERRORS])
    more = f" and {len(unknown) - MAX_LISTED_ERRORS} more" if len(unknown) > MAX_LISTED_ERRORS else ""
    raise InvalidRequest(
        f"unknown query parameter {named}{more}; GET {request.url.path} accepts: {', '.join(accepted)}",
        errors=[{"field": k, "message": "unknown query parameter", "type": "unknown_field"} for k in unknown],
    )


def service(request: Request[Any, Any, Any]) -> EpisodeService:
    """The episode service of the hot routes (reset, step), from app state rather than a dependency: Litestar
    resolves a dependency on every request and opens a cleanup group for it (~9 µs of a step's ~70 µs of
    framework time)."""
    episodes: EpisodeService = request.app.state.episodes
    return episodes


def implicit(request: Request[Any, Any, Any]) -> ImplicitEpisode:
    # app state, not a dependency: a second dependency costs every request a task group
    fallback: ImplicitEpisode = request.app.state.implicit_episode
    return fallback


def started(
    request: Request[Any, Any, Any], params: ResetParams, result: EpisodeResult
) -> Response[ObservationResponse]:
    """The reset's answer, with the cookies naming its episode and, for a client-chosen id, its episode
    token (see service.domain.episodes.cookies): a client that only keeps cookies can act on it."""
    token = result.metadata.get("episode_token")  # a new client-chosen id: the token its reset made or took
    if token is None and params.resume:  # re-attached with a token sent as one (never a bearer run token)
        token = explicit_episode_token(request, params.episode_token) or cookie_token(request, params.episode_id)
    cookies = implicit(request).started(params, result.episode_id, token, secure=served_over_https(request))
    return Response(ObservationResponse.of(result), cookies=cookies)


class OpenEnvController(Controller):
    tags = ["openenv"]

    @post(
        "/reset",
        status_code=200,
        summary="Start a persisted episode",
        responses=problem_responses(401, 403, 404, 409),
        response_cookies=[COOKIE_DOC, TOKEN_COOKIE_DOC],
    )
    async def reset_post(
        self, request: Request[Any, Any, Any], data: JSONBody[ResetParams | None] = None
    ) -> Response[ObservationResponse]:
        episodes = service(request)
        params = data or ResetParams()
        token = episode_token(
            request, params.episode_token, params.episode_id
        )  # a resume's; a new episode's is in params
        return started(request, params, await episodes.reset(params, bearer(request), token, counted_address(request)))

    @get(
        "/reset",
        summary="Start a persisted episode (query parameters)",
        responses=problem_responses(401, 403, 404, 409),
        response_cookies=[COOKIE_DOC, TOKEN_COOKIE_DOC],
    )
    async def reset_get(
        self,
        request: Request[Any, Any, Any],
        episodes: NamedDependency[EpisodeService],
        seed: Annotated[int | None, QueryParameter(ge=0, le=MAX_SEED)] = None,
        episode_id: Annotated[str | None, QueryParameter(min_length=1, max_length=EPISODE_ID_MAX)] = None,
        task_id: Annotated[str | None, QueryParameter(max_length=TASK_ID_MAX)] = None,
        split: Annotated[str | None, QueryParameter(max_length=CHOICE_MAX)] = None,
        difficulty: Annotated[str | None, QueryParameter(max_length=CHOICE_MAX)] = None,
        run_id: Annotated[
            str | None,
            QueryParameter(max_length=RUN_ID_MAX, description="Its token goes in `Authorization: Bearer`, never here."),
        ] = None,
    ) -> Response[ObservationResponse]:
        closed_query(request, RESET_QUERY)
        params = _validated_reset(
            seed=seed, episode_id=episode_id, task_id=task_id, split=split, difficulty=difficulty, run_id=run_id
        )
        token = episode_token(request, episode_id=params.episode_id)
        return started(request, params, await episodes.reset(params, bearer(request), token, counted_address(request)))

    @post(
        "/step",
        status_code=200,
        summary="Apply an action to an episode",
        responses=problem_responses(401, 403, 404, 409),
    )
    async def step(self, request: Request[Any, Any, Any], data: JSONBody[StepRequest]) -> ObservationResponse:
        episodes = service(request)
        token = bearer(request) or data.run_token
        action = data.the_action()
        episode_id = implicit(request).resolve(request, data.episode_id)
        return ObservationResponse.of(
            await episodes.step(
                episode_id, action, data.request_id, token, episode_token(request, data.episode_token, episode_id)
            )
        )

    @get(
        "/state",
        summary="Episode id, step count, status and ticket state (a client-chosen id: X-Episode-Token); "
        "a test episode, or a run's episode while the run is in progress: its progress only",
        responses=problem_responses(401, 403, 404),
    )
    async def state(
        self,
        request: Request[Any, Any, Any],
        episodes: NamedDependency[EpisodeService],
        episode_id: EpisodeIdQuery = None,
    ) -> StateResponse:
        closed_query(request, STATE_QUERY)
        episode_id = implicit(request).resolve(request, episode_id)
        if episode_id is None:
            # The stateless OpenEnv subset asks without an id: answer in its shape, with a hint.
            return StateResponse(
                episode_id=None,
                step_count=0,
                episode_status="no_episode",
                hint="pass ?episode_id=… (returned by POST /reset) to read a persisted episode",
            )
        return StateResponse(
            **await episodes.state(episode_id, episode_token(request, episode_id=episode_id), bearer(request))
        )

    @get("/health", summary="Liveness")
    async def health(self) -> HealthResponse:
        return HealthResponse(status="healthy")

    @get("/metadata", summary="Environment name, description and versions")
    async def metadata(self, settings: NamedDependency[Settings]) -> MetadataResponse:
        return MetadataResponse(
            name=core.ENV_NAME,
            description=ENV_DESCRIPTION,
            version=settings.app_version,
            readme_content=core.render_policy_markdown(),
            dataset_version=core.DATASET_VERSION,
            grader_version=core.GRADER_VERSION,
            tasks=list(core.TASKS),
        )

    @get("/schema", summary="JSON schemas of action, observation and state")
    async def schema(self) -> SchemaResponse:
        return SchemaResponse(
            action=wire_action_schema(),
            observation=wire_observation_schema(),
            state=StateResponse.model_json_schema(),
        )


def _validated_reset(**query: Any) -> ResetParams:
    try:
        return ResetParams(**{k: v for k, v in query.items() if v is not None})
    except ValidationError as exc:
        errors = validation_errors(exc)
        raise InvalidRequest("fix these query parameters: " + listed(errors), errors=errors) from exc


__all__ = ["OpenEnvController"]
