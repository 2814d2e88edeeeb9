"""What the evaluation client reads from the environment (once), and its defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_API_BASE_URL = "https://router.huggingface.co/v1"
DEFAULT_MODEL_NAME = "Qwen/Qwen2.5-72B-Instruct"
DEFAULT_ENV_URL = "http://localhost:7860"
DEFAULT_BENCHMARK = "ecomm-support-env"


@dataclass(frozen=True)
class Config:
    """Everything read from the environment, once."""

    api_base_url: str
    model_name: str
    api_key: str | None
    env_url: str
    benchmark: str
    env_url_given: bool
    run_token: str | None
    submitter_key: str | None  # SUBMITTER_KEY: test-split runs need one, issued by the service's operator
    llm_timeout_s: float
    llm_max_attempts: int
    llm_backoff_s: float
    state_dir: Path
    action_format: str = "tools"  # ACTION_FORMAT: how the llm agent acts (tools, or json for models without tool calls)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Config:
        env = dict(os.environ if environ is None else environ)
        return cls(
            api_base_url=env.get("API_BASE_URL") or DEFAULT_API_BASE_URL,
            model_name=env.get("MODEL_NAME") or DEFAULT_MODEL_NAME,
            api_key=env.get("HF_TOKEN") or env.get("API_KEY") or None,
            env_url=(env.get("ENV_URL") or DEFAULT_ENV_URL).rstrip("/"),
            benchmark=env.get("BENCHMARK") or DEFAULT_BENCHMARK,
            env_url_given=bool(env.get("ENV_URL")),
            run_token=env.get("RUN_TOKEN") or None,
            submitter_key=env.get("SUBMITTER_KEY") or None,
            llm_timeout_s=float(env.get("LLM_TIMEOUT_S") or 15.0),
            llm_max_attempts=max(1, int(env.get("LLM_MAX_ATTEMPTS") or 4)),
            llm_backoff_s=float(env.get("LLM_BACKOFF_S") or 1.0),
            state_dir=Path(env.get("INFERENCE_STATE_DIR") or ".inference_runs"),
            action_format=(env.get("ACTION_FORMAT") or "tools").strip().lower(),
        )
