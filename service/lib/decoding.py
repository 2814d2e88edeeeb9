"""Request decoding shared by every surface: HTTP JSON bodies, ``POST /mcp``, WebSocket frames, and the
text of query and path parameters.

Two rules hold wherever input enters:

- **Text is storable.** A string (object keys included) with NUL (``\\u0000``) or a lone surrogate
  (``\\ud800``) is refused with a 422 naming the field. PostgreSQL cannot store NUL in text and no
  driver can encode a lone surrogate; SQLite stores both, so without this rule the backends disagree.
- **Bodies are closed.** ``ClosedBody`` models reject fields they do not know, by name, except the
  few OpenEnv clients are known to send (listed once below).

Valid JSON escapes are the only way either character reaches us (raw control characters and
surrogate bytes are invalid JSON / UTF-8), so a body without a ``\\u`` escape is never walked: the
step path pays one substring search.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from typing import Any, ClassVar

import msgspec
from litestar import Request
from litestar.types import Empty
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from service.errors import MAX_LISTED_ERRORS, InvalidRequest, MalformedRequest, bounded_errors, clip

# Top-level body fields that OpenEnv clients and the reference server's documented examples send,
# accepted and ignored (openenv 0.10 ``core/env_server/types.py``: ResetRequest has seed and
# episode_id, both ours too; StepRequest's examples add render and verbose to timeout_s/request_id).
OPENENV_TOLERATED_RESET_FIELDS: frozenset[str] = frozenset()
OPENENV_TOLERATED_STEP_FIELDS: frozenset[str] = frozenset({"render", "verbose"})


class BodyNotJson(MalformedRequest):
    slug = "not-json"


class UnstorableText(InvalidRequest):
    """A string holding NUL or a lone surrogate (422, the field named in ``errors``)."""

    def __init__(self, field: str) -> None:
        super().__init__(
            f"{field} holds a NUL character or a lone UTF-16 surrogate; send plain Unicode text without them",
            errors=[
                {
                    "field": field,
                    "message": "NUL and lone surrogates are not allowed in text",
                    "type": "unstorable_text",
                }
            ],
        )
        self.field = field


def unstorable(text: str) -> bool:
    """True when ``text`` holds NUL or a lone surrogate (cheap for ASCII, the usual case)."""
    if "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _path(parent: str, key: object) -> str:
    return f"{parent}.{key}" if parent else str(key)


def check_text(value: Any, prefix: str = "") -> None:
    """Raise :class:`UnstorableText` for the first unstorable string in a decoded JSON value."""
    stack: list[tuple[str, Any]] = [(prefix, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if unstorable(item):
                raise UnstorableText(where or "body")
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and unstorable(key):
                    raise UnstorableText(_path(where, json.dumps(key)[1:-1]))  # named as JSON escapes it
                stack.append((_path(where, key), child))
        elif isinstance(item, list):
            stack.extend((_path(where, i), child) for i, child in enumerate(item))


def check_params(params: Iterable[tuple[str, Any]]) -> None:
    """Query or path parameters: the same text rule."""
    for name, value in params:
        if isinstance(value, str) and unstorable(value):
            raise UnstorableText(name)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json(raw: bytes | str) -> Any:
    """Decode JSON text for any surface; raises :class:`BodyNotJson` (400) or :class:`UnstorableText` (422).

    ``RecursionError`` (absurd nesting) propagates: each surface already answers it.
    """
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        # msgspec refuses lone-surrogate escapes as undecodable; the standard library reads them, so the
        # caller learns which field to fix (a 422) rather than that the JSON is broken.
        escaped = (b"\\u" in raw) if isinstance(raw, bytes) else ("\\u" in raw)
        if escaped:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                check_text(json.loads(raw, parse_constant=_no_constants))
        raise BodyNotJson(
            f"the body is not valid JSON ({exc}); send a JSON object with Content-Type: application/json"
        ) from exc
    if (b"\\u" in raw) if isinstance(raw, bytes) else ("\\u" in raw):
        check_text(value)
    return value


class DecodedRequest(Request[Any, Any, Any]):
    """Litestar's request with :func:`decode_json` for JSON bodies (``app.request_class``)."""

    async def json(self) -> Any:
        if self._json is Empty:
            if (cached := self._connection_state.json) is not Empty:
                self._json = cached
            else:
                body = await self.body()
                self._json = self._connection_state.json = decode_json(body) if body.strip() else None
        return self._json


async def check_request_params(request: Request[Any, Any, Any]) -> None:
    """``before_request`` hook: path and query text follows the same rule as bodies."""
    scope = request.scope
    if path_params := scope.get("path_params"):
        check_params(path_params.items())
    if scope.get("query_string"):
        check_params(request.query_params.items())


def _json_integer(value: Any) -> Any:
    if value is not None and type(value) is not int:  # bool is an int subclass; "5" and 5.0 are not integers
        raise PydanticCustomError("int_type", "must be a JSON integer (not a boolean, string or float)")
    return value


def _json_number(value: Any) -> Any:
    if value is not None and type(value) not in (int, float):  # not a boolean, not a string
        raise PydanticCustomError("float_type", "must be a JSON number (not a boolean or string)")
    return value


def _json_boolean(value: Any) -> Any:
    if type(value) is not bool:
        raise PydanticCustomError("bool_type", "must be true or false")
    return value


# Strict types that hold however the body is validated (Litestar calls model_validate(strict=False),
# which overrides a field's own strict=True).
JsonInt = BeforeValidator(_json_integer)
JsonNumber = BeforeValidator(_json_number)
JsonBool = BeforeValidator(_json_boolean)


def _closed_schema(schema: dict[str, Any], cls: Any) -> None:
    """The document says what the validator does: no other properties; tolerated ones accepted and ignored."""
    schema["additionalProperties"] = False
    declared = getattr(cls, "tolerated_schemas", {})
    for name in sorted(getattr(cls, "tolerated_fields", ())):
        schema.setdefault("properties", {})[name] = declared.get(
            name, {"description": "Accepted and ignored (sent by some OpenEnv clients)."}
        )


class ClosedBody(BaseModel):
    """A request body that rejects unknown fields by name. Fields in ``tolerated_fields`` are accepted
    and ignored (kept in ``model_extra``); to accept more top-level fields, add them there."""

    model_config = ConfigDict(extra="allow", json_schema_extra=lambda schema, cls: _closed_schema(schema, cls))
    tolerated_fields: ClassVar[frozenset[str]] = frozenset()
    # The OpenAPI schema of a tolerated field that is not simply ignored (name → property schema).
    tolerated_schemas: ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def accepted_fields(cls) -> list[str]:
        return [*cls.model_fields, *sorted(cls.tolerated_fields)]

    @model_validator(mode="wrap")
    @classmethod
    def _reject_unknown_fields(cls, data: Any, handler: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields and k not in cls.tolerated_fields]
            if unknown:
                raise ValidationError.from_exception_data(cls.__name__, cls._unknown_field_errors(unknown))
        return handler(data)

    @classmethod
    def _unknown_field_errors(cls, unknown: list[Any]) -> list[InitErrorDetails]:
        """The first few unknown fields by name (the accepted ones listed once, with the first), then how
        many more: the answer stays small however many fields a body invents."""
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "unknown_field",
                    "unknown field '{field}'" + ("; this body accepts: {accepted}" if i == 0 else ""),
                    {"field": clip(str(k)), "accepted": ", ".join(cls.accepted_fields())},
                ),
                loc=(clip(str(k)),),
                input=None,
            )
            for i, k in enumerate(unknown[:MAX_LISTED_ERRORS])
        ]
        if len(unknown) > MAX_LISTED_ERRORS:
            more = len(unknown) - MAX_LISTED_ERRORS
            errors.append(
                InitErrorDetails(
                    type=PydanticCustomError(
                        "more_errors", "and {more} more unknown fields not listed", {"more": more}
                    ),
                    loc=("…",),
                    input=None,
                )
            )
        return errors


def _closed_models() -> list[type[ClosedBody]]:
    found, todo = [], list(ClosedBody.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def close_openapi_bodies(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document (a dict) with every ``ClosedBody`` component marked closed, its tolerated
    fields listed. Litestar builds component schemas from the fields alone (not ``json_schema_extra``),
    so without this the document would allow any extra property that the validator refuses."""
    components = document.get("components", {}).get("schemas", {})
    for cls in _closed_models():
        component = components.get(cls.__name__)
        if component is not None:
            _closed_schema(component, cls)
    return document


def validation_errors(exc: ValidationError, prefix: str = "") -> list[dict[str, Any]]:
    """The errors of ``exc`` as problem ``errors`` entries, bounded (:func:`~service.lib.problems.bounded_errors`)."""
    out: list[dict[str, Any]] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err["loc"] if p != "__root__")
        field = ".".join(p for p in (prefix, loc) if p)
        entry: dict[str, Any] = {"field": field or prefix or "body", "message": err["msg"], "type": err["type"]}
        if err["type"] == "more_errors":
            entry.update(field="…", more=err.get("ctx", {}).get("more"))
        out.append(entry)
    return bounded_errors(out)


__all__ = [
    "OPENENV_TOLERATED_RESET_FIELDS",
    "OPENENV_TOLERATED_STEP_FIELDS",
    "BodyNotJson",
    "ClosedBody",
    "DecodedRequest",
    "JsonBool",
    "JsonInt",
    "JsonNumber",
    "UnstorableText",
    "check_params",
    "check_request_params",
    "check_text",
    "close_openapi_bodies",
    "decode_json",
]
