"""What the service refuses, and why: the errors its services raise, knowing nothing of transports.

An error's kind is the base class it derives — :class:`MalformedRequest`, :class:`InvalidRequest`,
:class:`Unauthenticated`, :class:`NotAllowed`, :class:`NotFound`, :class:`Conflict`, :class:`QuotaSpent` —
and each concrete error has a stable machine ``slug``, a caller-facing ``detail`` that says what to do next,
and ``extra`` fields. :mod:`service.lib.problems` is the one module that maps them to each transport: an HTTP
status and RFC 9457 problem (its type ends in ``slug``), a WebSocket error frame, an MCP tool error.

A response never grows with the number (or length) of the mistakes in a request: an error lists at most
:data:`MAX_LISTED_ERRORS` field errors one by one (the rest are counted), and text echoed from the request is
cut short (:func:`clip`).
"""

from __future__ import annotations

from typing import Any, ClassVar

MAX_LISTED_ERRORS = 5
MAX_ECHOED_CHARS = 64  # of a field name or value the client sent, quoted back
MAX_MESSAGE_CHARS = 500


def clip(text: str, limit: int = MAX_ECHOED_CHARS) -> str:
    """``text`` cut to ``limit`` characters (the cut marked with …)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded_errors(errors: list[dict[str, Any]], key: str = "field") -> list[dict[str, Any]]:
    """At most :data:`MAX_LISTED_ERRORS` of ``errors``, their texts clipped, then one entry that says how many
    more there were (``key`` names the field of each error: ``field`` in our problems, ``key`` in Litestar's)."""
    counted = [e for e in errors if e.get("type") == "more_errors" or e.get(key) == "…"]  # already bounded
    listed_ = [e for e in errors if e not in counted]
    shown = [
        {
            name: clip(value, MAX_MESSAGE_CHARS if name == "message" else MAX_ECHOED_CHARS)
            if isinstance(value, str)
            else value
            for name, value in error.items()
        }
        for error in listed_[:MAX_LISTED_ERRORS]
    ]
    more = len(listed_) - MAX_LISTED_ERRORS
    if more > 0:
        shown.append({key: "…", "message": f"and {more} more not listed", "type": "more_errors", "more": more})
    return shown + counted[:1]


class DomainError(Exception):
    """A request the service refuses: ``slug`` says which refusal (for machines: it never changes), ``detail``
    what the caller should do; ``extra`` fields go along (some refusals carry a finer ``code`` among them)."""

    slug: ClassVar[str]

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


# The kinds: what went wrong, whatever the transport.


class MalformedRequest(DomainError):
    """The request is shaped in a way that is never accepted (not JSON, a secret in the URL)."""


class InvalidRequest(DomainError):
    """Fields are missing or invalid; ``errors`` lists them (bounded), ``detail`` is clipped."""

    slug = "validation-error"

    def __init__(self, detail: str, **extra: Any) -> None:
        if isinstance(extra.get("errors"), list):
            extra["errors"] = bounded_errors(extra["errors"])
        super().__init__(clip(detail, 2 * MAX_MESSAGE_CHARS + MAX_LISTED_ERRORS * MAX_ECHOED_CHARS), **extra)


class Unauthenticated(DomainError):
    """A credential the request needs is missing."""


class NotAllowed(DomainError):
    """The caller may not do this: a credential does not match, or the rules forbid it."""


class NotFound(DomainError):
    """What the request names does not exist."""


class Conflict(DomainError):
    """What the request names is in a state that does not allow this."""


class QuotaSpent(DomainError):
    """Too many of something for now; ``retry_after_s`` says when to try again."""

    def __init__(self, detail: str, retry_after_s: int, **extra: Any) -> None:
        super().__init__(detail, retry_after_s=retry_after_s, **extra)
        self.retry_after_s = retry_after_s


# Episodes


class MissingEpisodeId(InvalidRequest):
    slug = "episode-id-required"

    def __init__(self) -> None:
        super().__init__(
            "pass the episode_id returned by POST /reset (in observation.episode_id and metadata.episode_id); "
            "over HTTP, a client that sends back the ecomm_episode cookie /reset sets may leave it out. For a client "
            "that keeps no cookies and sends no id (seed A's inference.py and baseline.py), the operator starts a "
            "server for it alone with SINGLE_SESSION=1 DEFAULT_TASKS=easy,medium,hard (Docker: -e SINGLE_SESSION=1 "
            "-e DEFAULT_TASKS=easy,medium,hard): the first lets an id-less request mean the latest reset, the second "
            "makes a reset that names no task a refund decision, as seed A's were",
            errors=[{"field": "episode_id", "message": "field required"}],
        )


class EpisodeNotFound(NotFound):
    slug = "episode-not-found"

    def __init__(self, episode_id: str) -> None:
        super().__init__(
            f"no episode with id {episode_id!r}; call POST /reset to start an episode — it returns episode_id",
            episode_id=episode_id,
        )


class EpisodeConflict(Conflict):
    slug = "episode-conflict"


class EpisodeAlreadyExists(EpisodeConflict):
    slug = "episode-exists"


class EpisodeAlreadyFinished(EpisodeConflict):
    slug = "episode-finished"


class EpisodeNotFinished(EpisodeConflict):
    slug = "episode-not-finished"


class StepRaceLost(EpisodeConflict):
    slug = "step-conflict"


class EpisodeTokenMissing(Unauthenticated):
    slug = "episode-token-required"

    def __init__(self, episode_id: str) -> None:
        super().__init__(
            f"episode {episode_id!r} has a client-chosen id, so it needs the episode_token its reset returned "
            "(metadata.episode_token): send it in the `X-Episode-Token` header (or `Authorization: Bearer`, or "
            "`episode_token` in a POST body) — never in the URL",
            episode_id=episode_id,
        )


class EpisodeTokenInvalid(NotAllowed):
    slug = "episode-token-invalid"

    def __init__(self, episode_id: str) -> None:
        super().__init__(
            f"that is not the episode_token of episode {episode_id!r}; only the client whose reset created it may "
            "act on it — POST /reset without episode_id starts an episode of your own",
            episode_id=episode_id,
        )


class TokenInUrl(MalformedRequest):
    slug = "token-in-url"


class TestSplitNeedsRun(NotAllowed):
    slug = "test-split-needs-run"


class TestResultsPrivate(NotAllowed):
    slug = "test-results-private"


# Runs


class RunNotFound(NotFound):
    slug = "run-not-found"


class RunTokenMissing(Unauthenticated):
    slug = "run-token-required"


class RunTokenInvalid(NotAllowed):
    slug = "run-token-invalid"


class RunNotActive(Conflict):
    slug = "run-not-active"


class RunEpisodeIdTaken(Conflict):
    slug = "run-episode-id-taken"


class RunResultsPending(Conflict):
    """A run episode's per-episode results (grade, page, trajectory) wait for its run to complete."""

    slug = "run-in-progress"


class AgentNameTaken(Conflict):
    slug = "agent-name-taken"


class SubmitterKeyMissing(Unauthenticated):
    slug = "submitter-key-required"


class SubmitterKeyInvalid(NotAllowed):
    slug = "submitter-key-invalid"


class QuotaExceeded(QuotaSpent):
    """A submitter key's test runs per quota period."""

    slug = "quota-exceeded"


class TestRunBudgetSpent(NotAllowed):
    """A submitter key has completed (or holds open) its lifetime budget of test runs under this test key."""

    slug = "test-run-budget-spent"


__all__ = [
    "MAX_ECHOED_CHARS",
    "MAX_LISTED_ERRORS",
    "MAX_MESSAGE_CHARS",
    "AgentNameTaken",
    "Conflict",
    "DomainError",
    "EpisodeAlreadyExists",
    "EpisodeAlreadyFinished",
    "EpisodeConflict",
    "EpisodeNotFinished",
    "EpisodeNotFound",
    "EpisodeTokenInvalid",
    "EpisodeTokenMissing",
    "InvalidRequest",
    "MalformedRequest",
    "MissingEpisodeId",
    "NotAllowed",
    "NotFound",
    "QuotaExceeded",
    "QuotaSpent",
    "RunEpisodeIdTaken",
    "RunNotActive",
    "RunNotFound",
    "RunResultsPending",
    "RunTokenInvalid",
    "RunTokenMissing",
    "StepRaceLost",
    "SubmitterKeyInvalid",
    "SubmitterKeyMissing",
    "TestResultsPrivate",
    "TestRunBudgetSpent",
    "TestSplitNeedsRun",
    "TokenInUrl",
    "bounded_errors",
    "clip",
]
