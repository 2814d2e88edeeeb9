"""A typed OpenEnv client of this environment: ``SupportEnv`` is openenv's ``EnvClient`` with this
environment's ``SupportAction`` and ``SupportObservation`` (``server.models``), over ``/ws``.

    from client.openenv import SupportEnv
    from server.models import SupportAction

    with SupportEnv(base_url="http://localhost:7860").sync() as env:
        result = env.reset(task_id="decision-easy", seed=3, split="dev")
        result = env.step(SupportAction(decision="approve_refund"))
        print(result.observation.ticket_id, result.reward, result.done, env.state().step_count)

(``GenericEnvClient`` plays the same episodes with plain dicts.) The evaluation runner does not use
it: it speaks HTTP (:mod:`client.wire`) so a run's episodes can be resumed by id after a crash.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from server.models import SupportAction, SupportObservation, SupportState


class SupportEnv(EnvClient[SupportAction, SupportObservation, SupportState]):
    def _step_payload(self, action: SupportAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SupportObservation]:
        observation = SupportObservation.model_validate(
            {**payload.get("observation", {}), "reward": payload.get("reward"), "done": payload.get("done", False)}
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> SupportState:
        return SupportState.model_validate(payload)
