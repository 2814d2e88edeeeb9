"""Chat completions through ``openai.AsyncOpenAI``: a per-call timeout and bounded retries
(exponential backoff with jitter) on 429, 5xx, timeouts and connection errors."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from client.config import Config
from client.logformat import one_line

if TYPE_CHECKING:  # openai is imported when first used (see LLMClient)
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger("inference")

MAX_TOKENS = 600


class FatalAgentError(RuntimeError):
    """The agent cannot work at all (bad credentials, unknown model): stop the whole evaluation."""


class LLMUnavailable(RuntimeError):
    """The LLM did not answer after every retry: this episode is abandoned (resumable in a run)."""


@dataclass
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMClient:
    """One ``AsyncOpenAI`` client; ``usage`` accumulates the tokens of every call."""

    def __init__(self, cfg: Config, usage: TokenUsage) -> None:
        from openai import AsyncOpenAI

        self.cfg, self.usage = cfg, usage
        # max_retries=0: the retry policy below is the only one, so attempts stay bounded and visible.
        self.client = AsyncOpenAI(
            base_url=cfg.api_base_url, api_key=cfg.api_key, timeout=cfg.llm_timeout_s, max_retries=0
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def complete(self, messages: list[ChatCompletionMessageParam]) -> str:
        import openai

        last: Exception | None = None
        for attempt in range(self.cfg.llm_max_attempts):
            try:
                resp = await self.client.chat.completions.create(
                    model=self.cfg.model_name,
                    messages=messages,
                    temperature=0.0,
                    max_tokens=MAX_TOKENS,
                )
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                raise FatalAgentError(f"the LLM endpoint refused the request: {one_line(exc, 200)}") from exc
            except (
                openai.RateLimitError,
                openai.APITimeoutError,
                openai.APIConnectionError,
                openai.InternalServerError,
            ) as exc:
                last = exc
            except openai.APIStatusError as exc:
                if exc.status_code < 500:
                    raise LLMUnavailable(f"LLM call failed: {one_line(exc, 200)}") from exc
                last = exc
            else:
                if resp.usage is not None:
                    self.usage.prompt_tokens += resp.usage.prompt_tokens or 0
                    self.usage.completion_tokens += resp.usage.completion_tokens or 0
                return (resp.choices[0].message.content or "") if resp.choices else ""
            if attempt + 1 < self.cfg.llm_max_attempts:
                delay = self.cfg.llm_backoff_s * 2**attempt * (0.75 + 0.5 * random.random())
                log.debug("LLM attempt %d failed (%s); retrying in %.1fs", attempt + 1, type(last).__name__, delay)
                await asyncio.sleep(delay)
        raise LLMUnavailable(
            f"LLM failed after {self.cfg.llm_max_attempts} attempts: {type(last).__name__}: {one_line(last, 150)}"
        )
