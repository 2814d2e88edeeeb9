"""This environment's types as OpenEnv declares them: the core's ``Action`` and ``Observation``
fields on openenv's base models (which add ``metadata``, and ``reward``/``done`` on observations), so
openenv's server and clients validate and serialise them themselves. Generated from the core's
models: one definition of every field (``service.env.models``)."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import create_model

from service import env as core

__all__ = ["SupportAction", "SupportObservation", "SupportState"]


def _fields(model: Any, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {name: (f.annotation, f) for name, f in model.model_fields.items() if name not in skip}


SupportAction = create_model("SupportAction", __base__=Action, **_fields(core.Action))
SupportObservation = create_model(
    "SupportObservation",
    __base__=Observation,
    episode_id=(str | None, None),
    **_fields(core.Observation, skip=frozenset({"reward", "done"})),
)
SupportState = State  # episode_id and step_count; the service's GET /state adds the ticket's visible state
