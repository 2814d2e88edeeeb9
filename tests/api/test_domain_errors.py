"""The services raise domain errors that know nothing of HTTP, and one module maps every one of them to every
transport (issue 23: layers that know too much).

- Every domain error the service defines (``service.errors`` and the few beside the code that raises them)
  has a kind with an HTTP status and a WebSocket frame code, and a title for its problem document; a new
  error without them fails here, before any client sees a 500.
- The services and the errors import nothing of the web (litestar, ``service.lib.problems``) and write no
  HTTP status number.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
from pathlib import Path

import pytest

import service
from service import errors
from service.domain.episodes import mcp, websocket
from service.errors import DomainError
from service.lib import problems

ROOT = Path(__file__).resolve().parents[2]
SERVICES = sorted((ROOT / "service" / "domain").glob("*/services.py"))


def _service_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(service.__path__, "service."):
        if not info.name.endswith("__main__"):  # `python -m` entry points run on import
            importlib.import_module(info.name)
            names.append(info.name)
    return names


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def _domain_errors() -> list[type[DomainError]]:
    """Every concrete domain error the installed package defines (each module imported first)."""
    _service_modules()
    found = {c for c in _subclasses(DomainError) if c.__module__.startswith("service.")}
    return sorted((c for c in found if hasattr(c, "slug")), key=lambda c: c.__qualname__)  # the kinds have none


def _unmapped(classes: list[type[DomainError]]) -> list[str]:
    """What the transports would not know how to answer, one line per gap."""
    gaps = []
    for cls in classes:
        kinds = [k for k in cls.__mro__ if k in problems.KINDS]
        if not kinds:
            gaps.append(f"{cls.__qualname__}: no kind of service.errors with an HTTP status and a WebSocket code")
        if getattr(cls, "slug", None) not in problems.TITLES:
            gaps.append(f"{cls.__qualname__}: slug {getattr(cls, 'slug', None)!r} has no title in TITLES")
    return gaps


def _instance(cls: type[DomainError]) -> DomainError:
    """An instance of ``cls`` with sample arguments (each error's own signature)."""
    from service.lib.limits import Refusal

    samples = {"detail": "do this instead", "episode_id": "ep-1", "retry_after_s": 7, "field": "action.x"}
    samples["refused"] = Refusal("this address", "RATE_LIMIT_X", 3, 9)
    wanted = inspect.signature(cls).parameters.values()
    return cls(**{p.name: samples[p.name] for p in wanted if p.kind is not p.VAR_KEYWORD})


def test_every_domain_error_has_a_status_a_frame_code_and_a_title() -> None:
    classes = _domain_errors()
    assert len(classes) >= 29, [c.__name__ for c in classes]  # every problem of before the split, at least
    assert _unmapped(classes) == []


def test_an_error_without_a_mapping_is_caught() -> None:
    class Unkinded(DomainError):
        slug = "episode-not-found"

    class Untitled(errors.Conflict):
        slug = "a-new-refusal"

    gaps = _unmapped([Unkinded, Untitled, errors.EpisodeNotFound])
    assert len(gaps) == 2
    assert "Unkinded: no kind" in gaps[0] and "Untitled: slug 'a-new-refusal' has no title" in gaps[1]


def test_each_slug_is_defined_once_and_every_title_is_used() -> None:
    classes = _domain_errors()
    defined = [vars(c)["slug"] for c in classes if "slug" in vars(c)]
    assert sorted(defined) == sorted(set(defined))
    assert set(problems.TITLES) == set(defined)


def test_every_kind_is_mapped_and_documented_in_openapi() -> None:
    kinds = [c for c in DomainError.__subclasses__() if c.__module__ == "service.errors"]
    assert set(kinds) == set(problems.KINDS)
    documented = problems.problem_responses(*(wire.status for wire in problems.KINDS.values()))
    assert {wire.status for wire in problems.KINDS.values()} <= set(documented)


@pytest.mark.parametrize("cls", _domain_errors(), ids=lambda c: c.__qualname__)
def test_each_error_answers_the_same_on_every_transport(cls: type[DomainError]) -> None:
    exc = _instance(cls)
    status = problems.wire_of(exc).status
    body = problems.problem_body(exc)
    assert body["type"] == problems.TYPE_BASE + cls.slug and body["title"] == problems.TITLES[cls.slug]
    assert body["status"] == status and body["detail"] == exc.detail

    response = problems.exception_handlers[DomainError](None, exc)
    assert response.status_code == status and response.content == body
    assert (response.headers or {}).get("Retry-After") == (
        str(exc.extra["retry_after_s"]) if isinstance(exc, errors.QuotaSpent) else None
    )

    frame = json.loads(websocket._frame("error", problems.ws_error_data(exc)))
    assert frame["type"] == "error" and frame["data"]["message"] == exc.detail
    if isinstance(exc, errors.InvalidRequest):
        assert frame["data"]["code"] == "VALIDATION_ERROR" and frame["data"]["errors"] == exc.extra.get("errors", [])
    else:
        assert frame["data"]["code"] == "EXECUTION_ERROR" and frame["data"]["status"] == status

    result = mcp._tool_result(problems.mcp_tool_error(exc), is_error=True)
    assert result["isError"] is True and result["structuredContent"] == body
    assert json.loads(result["content"][0]["text"]) == body


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


WEB = {"litestar", "starlette", "http", "service.lib.problems"}
HTTP_STATUSES = set(range(400, 600))


@pytest.mark.parametrize("path", [*SERVICES, ROOT / "service" / "errors.py"], ids=lambda p: str(p.relative_to(ROOT)))
def test_services_and_errors_know_nothing_of_http(path: Path) -> None:
    tree = ast.parse(path.read_text())
    web = sorted(m for m in _imports(tree) if m.split(".")[0] in WEB or m in WEB)
    assert web == [], f"{path.name} imports the web layer"
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not {n for n in names if n.startswith("HTTP_") or n in ("status_code", "HTTPException")}
    if path.name == "services.py":  # (service/errors.py has its text bounds, 500 characters among them)
        numbers = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int}
        assert not numbers & HTTP_STATUSES, f"{path.name} writes an HTTP status"


def test_the_check_sees_a_status_in_a_service() -> None:
    tree = ast.parse("from litestar.exceptions import HTTPException\nraise HTTPException(status_code=409)\n")
    assert _imports(tree) == {"litestar.exceptions"}
    numbers = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int}
    assert numbers & HTTP_STATUSES == {409}
