"""The one table that turns an openai exception into a one-line ``ProviderError`` with a
hint for the user."""

from __future__ import annotations

import openai

from deep_research.core.errors import ProviderError

_HINTS: list[tuple[type[openai.OpenAIError], str]] = [
    (openai.AuthenticationError, "authentication failed: check OPENAI_API_KEY"),
    (openai.PermissionDeniedError, "permission denied for this model or key"),
    (
        openai.NotFoundError,
        "model or endpoint not found: check the model names and OPENAI_BASE_URL",
    ),
    (openai.RateLimitError, "rate limited or out of quota (HTTP 429), even after retries"),
    (openai.APITimeoutError, "the provider timed out"),
    (openai.APIConnectionError, "cannot reach the provider: check OPENAI_BASE_URL and the network"),
    (openai.BadRequestError, "the provider rejected the request"),
    (openai.InternalServerError, "the provider failed (HTTP 5xx), even after retries"),
]


def provider_error(exc: openai.OpenAIError, model: str) -> ProviderError:
    """``exc`` as one line: the model, the first hint whose exception it is, its message."""
    for kind, hint in _HINTS:
        if isinstance(exc, kind):
            detail = getattr(exc, "message", "") or str(exc)
            return ProviderError(f"{model}: {hint} ({detail[:160]})")
    return ProviderError(f"{model}: {type(exc).__name__}: {str(exc)[:160]}")
