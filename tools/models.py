"""The model endpoint the model-backed tools use: an OpenAI-compatible API (--model-endpoint).

One `openai.AsyncOpenAI` client per daemon (`daemon.service(ModelEndpoint)`), the same code
against a real provider as against a local server: chat completions with tool calling and
streaming (Task's subagents, tools/subagents.py) and the images API (generate_image,
tools/images.py). The API key (--model-api-key or EXEC_DAEMON_MODEL_API_KEY) goes only into
the client's Authorization header: it is registered as a daemon secret at start (exec_daemon/cli.py),
so no child process sees it and redaction masks it; no error text built here contains it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_SECONDS = 300.0
# The openai client's default; a retry after a 429/5xx is what any provider expects.
MAX_RETRIES = 2


class ModelEndpoint:
    """The daemon's client of --model-endpoint (made on first use, closed at shutdown)."""

    def __init__(self, daemon: Daemon) -> None:
        self._config = daemon.config
        self._client: AsyncOpenAI | None = None

    def client(self, feature: str) -> AsyncOpenAI:
        """The client; `unavailable` naming --model-endpoint when none is configured."""
        endpoint = self._config.model_endpoint
        if not endpoint:
            raise CodedError(ErrorCode.UNAVAILABLE, off_without(feature, "--model-endpoint"))
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                base_url=endpoint,
                # Local OpenAI-compatible servers often need no key; the client insists on one.
                api_key=self._config.model_api_key or "none",
                timeout=REQUEST_TIMEOUT_SECONDS,
                max_retries=MAX_RETRIES,
            )
        return self._client

    def chat_model(self, which: str, feature: str) -> str:
        """The model of a Task asking for `which` ("fast" or "" for the default)."""
        if which == "fast" and self._config.fast_model:
            return self._config.fast_model
        if not self._config.model:
            raise CodedError(ErrorCode.UNAVAILABLE, off_without(feature, "--model"))
        if which not in ("", "fast"):
            raise CodedError(ErrorCode.INVALID_ARGUMENT, f'model {which!r}: give "fast" or nothing')
        return self._config.model

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


def model_failure(exc: Exception, what: str) -> CodedError:
    """The typed error of a failed request to the model endpoint (for the agent to read)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return CodedError(ErrorCode.TIMEOUT, f"{what}: the model endpoint did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return CodedError(ErrorCode.UNAVAILABLE, f"{what}: cannot reach the model endpoint")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return CodedError(
            ErrorCode.UNAUTHORIZED,
            f"{what}: the model endpoint refused the key (HTTP {exc.status_code}); "
            "check --model-api-key",
        )
    if isinstance(exc, openai.RateLimitError):
        return CodedError(
            ErrorCode.RESOURCE_EXHAUSTED, f"{what}: the model endpoint is rate limiting (HTTP 429)"
        )
    if isinstance(exc, openai.APIStatusError):
        return CodedError(
            ErrorCode.REQUEST_FAILED,
            f"{what}: the model endpoint answered HTTP {exc.status_code}: {_short(exc.message)}",
        )
    log.info("%s failed: %r", what, exc)
    return CodedError(
        ErrorCode.REQUEST_FAILED, f"{what}: the model endpoint's answer was not understood"
    )


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
