"""Chat completions through ``openai.AsyncOpenAI``: a per-call timeout and bounded retries
(exponential backoff with jitter) on 429, 5xx, timeouts and connection errors."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from client.config import Config
from client.logformat import one_line

if TYPE_CHECKING:  # openai is imported when first used (see LLMClient)
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger("inference")

MAX_TOKENS = 600
# LLM calls in a row (over every worker) that fail after all their retries before the whole evaluation
# stops: an endpoint that cannot be reached would otherwise fail every episode of the split, one by one.
MAX_CONSECUTIVE_FAILURES = 3


class FatalAgentError(RuntimeError):
    """The agent cannot work at all (bad credentials, unknown model): stop the whole evaluation."""


class LLMUnavailable(RuntimeError):
    """The LLM did not answer after every retry: this episode is abandoned (resumable in a run)."""


@dataclass
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class LLMHealth:
    """Consecutive failed calls, shared by every worker's client: a success resets it; the
    ``MAX_CONSECUTIVE_FAILURES``-th failure in a row stops the evaluation (FatalAgentError)."""

    failures: int = 0

    def succeeded(self) -> None:
        self.failures = 0

    def failed(self, error: LLMUnavailable) -> LLMUnavailable:
        self.failures += 1
        if self.failures >= MAX_CONSECUTIVE_FAILURES:
            raise FatalAgentError(
                f"stopping: {self.failures} LLM calls in a row failed (the last: {error}); check API_BASE_URL, "
                "MODEL_NAME and the endpoint, then finish a run with --resume (finished episodes are kept)"
            ) from error
        return error


def first_line(exc: BaseException | None) -> str:
    """The error and its root cause, first line each: openai's "Connection error." says nothing of
    why; the innermost cause does ("ConnectionRefusedError: [Errno 111] Connect call failed ...")."""
    if exc is None:
        return "no error"
    text = f"{type(exc).__name__}: {one_line(str(exc).splitlines()[0] if str(exc) else '', 150)}"
    root, depth = exc, 0
    while (root.__cause__ or root.__context__) is not None and depth < 8:
        root, depth = (root.__cause__ or root.__context__), depth + 1  # type: ignore[assignment]
    if root is not exc and str(root):
        text += f" ({type(root).__name__}: {one_line(str(root).splitlines()[0], 150)})"
    return text


@dataclass(frozen=True)
class ToolCall:
    """One function call of an assistant message: its id, the tool and the arguments as the model wrote them."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """An assistant message: its text and the tools it called (in order)."""

    content: str
    tool_calls: tuple[ToolCall, ...] = field(default=())

    def message(self) -> dict[str, Any]:
        """The message as it goes back into the chat history (``role: assistant``, with its tool calls)."""
        # an assistant message needs text unless it calls tools (some APIs refuse null content otherwise)
        out: dict[str, Any] = {
            "role": "assistant",
            "content": (self.content or None) if self.tool_calls else self.content,
        }
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return out


class LLMClient:
    """One ``AsyncOpenAI`` client; ``usage`` accumulates the tokens of every call."""

    def __init__(self, cfg: Config, usage: TokenUsage, health: LLMHealth | None = None) -> None:
        from openai import AsyncOpenAI

        self.cfg, self.usage = cfg, usage
        self.health = health or LLMHealth()
        # max_retries=0: the retry policy below is the only one, so attempts stay bounded and visible.
        self.client = AsyncOpenAI(
            base_url=cfg.api_base_url, api_key=cfg.api_key, timeout=cfg.llm_timeout_s, max_retries=0
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def complete(self, messages: list[ChatCompletionMessageParam]) -> str:
        """The model's answer; LLMUnavailable after every retry failed (FatalAgentError once too many
        calls in a row have), FatalAgentError for an endpoint that refuses us or is not an LLM API."""
        return (await self.chat(messages)).content

    async def chat(
        self, messages: list[ChatCompletionMessageParam], tools: list[dict[str, Any]] | None = None
    ) -> Reply:
        """The model's assistant message — with ``tools`` (OpenAI function tools), the calls it makes; errors
        as :meth:`complete`."""
        try:
            reply = await self._complete(messages, tools)
        except LLMUnavailable as exc:
            raise self.health.failed(exc) from exc
        self.health.succeeded()
        return reply

    async def _complete(self, messages: list[ChatCompletionMessageParam], tools: list[dict[str, Any]] | None) -> Reply:
        import openai

        where = f"the LLM at {self.cfg.api_base_url} (model {self.cfg.model_name})"
        last: Exception | None = None
        for attempt in range(self.cfg.llm_max_attempts):
            try:
                extra: dict[str, Any] = {"tools": tools} if tools else {}
                resp = await self.client.chat.completions.create(
                    model=self.cfg.model_name,
                    messages=messages,
                    temperature=0.0,
                    max_tokens=MAX_TOKENS,
                    **extra,
                )
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                raise FatalAgentError(f"{where} refused the request: {one_line(exc, 200)}") from exc
            except (
                openai.RateLimitError,
                openai.APITimeoutError,
                openai.APIConnectionError,
                openai.InternalServerError,
            ) as exc:
                last = exc
            except openai.APIStatusError as exc:
                if exc.status_code < 500:
                    raise LLMUnavailable(f"{where} answered {exc.status_code}: {one_line(exc, 200)}") from exc
                last = exc
            else:
                if not hasattr(resp, "choices"):  # a 200 that is no JSON: openai hands back the body's text
                    raise FatalAgentError(
                        f"{where} answered HTTP 200 with something that is not a chat completion: "
                        f"{one_line(resp, 160)!r}; API_BASE_URL must be an OpenAI-compatible API's base URL "
                        "(usually ending in /v1)"
                    )
                if resp.usage is not None:
                    self.usage.prompt_tokens += resp.usage.prompt_tokens or 0
                    self.usage.completion_tokens += resp.usage.completion_tokens or 0
                if not resp.choices:
                    return Reply("")
                message = resp.choices[0].message
                calls = tuple(
                    ToolCall(c.id, c.function.name, c.function.arguments or "")
                    for c in message.tool_calls or ()
                    if getattr(c, "function", None) is not None
                )
                return Reply(message.content or "", calls)
            if attempt + 1 < self.cfg.llm_max_attempts:
                delay = self.cfg.llm_backoff_s * 2**attempt * (0.75 + 0.5 * random.random())
                log.debug("LLM attempt %d failed (%s); retrying in %.1fs", attempt + 1, type(last).__name__, delay)
                await asyncio.sleep(delay)
        raise LLMUnavailable(f"{where} did not answer after {self.cfg.llm_max_attempts} attempts: {first_line(last)}")
