"""Which request parameters a chat model takes, decided by its name (pure).

Like prices, the rules follow the model's name wherever it is served: a gateway serving
``openai/gpt-6-sol`` takes what OpenAI's ``gpt-6-sol`` takes. ``FAMILIES`` is the rule book,
one row per model family, first match wins. Checked 2026-11-26 against the pinned openai SDK
3.57 (``types/shared/reasoning_effort.py``: ``none, minimal, low, medium, high, xhigh, max``;
``types/shared/reasoning.py``: "not all reasoning models support every value"),
langchain-openai 1.7.4's model profiles (``langchain_openai/data/_profiles.py``,
``reasoning_effort_levels``) and OpenAI's model pages:
- o-series, gpt-5.x and GPT-6 models are reasoning models: they refuse ``temperature``
  (HTTP 400) unless their reasoning effort is ``none``, which only gpt-5.1+ and some GPT-6
  take (never astra, 6.1-sol or 6.2: they take low … max, so never a temperature);
- no model after gpt-5 (-mini/-nano) takes ``minimal``; ``xhigh`` came with gpt-5.2,
  ``max`` with gpt-5.6 and GPT-6.
- An effort a model does not take is moved to the nearest one it does (the higher of two
  equally near), rather than sent to be refused.
- Any other name (a local llama, qwen …) keeps a temperature and gets no effort.

Not encoded: LiteLLM's docs (2026-09-03) report that gpt-6-astra refuses ``max`` on Chat
Completions (Responses only), which the chat roles use; OpenAI's pages do not say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""Every reasoning effort, least to most (the SDK's ``ReasoningEffort``)."""

_NONE_TO_MAX = ("none", "low", "medium", "high", "xhigh", "max")
_LOW_TO_MAX = ("low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class Family:
    """Models whose name starts with ``pattern`` (up to the end or a ``-``), and the
    efforts they take."""

    pattern: str
    efforts: tuple[str, ...]

    def matches(self, name: str) -> bool:
        return re.match(rf"(?:{self.pattern})(?:$|-)", name) is not None


FAMILIES: tuple[Family, ...] = (
    # OpenAI's gpt-6-luna page (2026-11-26) and langchain-openai 1.7.4's profiles.
    Family(r"gpt-6-(?:sol|luna)", _NONE_TO_MAX),
    # OpenAI's gpt-6.1-terra page (2026-11-26): none, low, medium (default), high, xhigh, max.
    Family(r"gpt-6\.1-terra", _NONE_TO_MAX),
    # gpt-6-astra (langchain-openai profile), gpt-6.2-sol (OpenAI's page: "The API rejects
    # requests that set reasoning effort to none"), gpt-6.1-sol and gpt-6.2-astra (issue 35's
    # facts; gateways' model pages agree): low … max. Assumed (2026-11-26) for any other
    # GPT-6 name too: the safe rule, since every GPT-6 takes low.
    Family(r"gpt-6(?:\.\d+)?", _LOW_TO_MAX),
    # gpt-5.6 sol/terra/luna: langchain-openai profiles (and OpenAI's 400 quoting them).
    Family(r"gpt-5\.(?:[6-9]|\d{2,})", _NONE_TO_MAX),
    # gpt-5.2 … 5.5 pro: assumed (2026-11-26) medium/high/xhigh, a subset safe whichever is
    # true: langchain-openai's profiles say none … xhigh, but the same data says so of
    # gpt-5-pro, which takes only high; OpenAI's pro pages were not found.
    Family(r"gpt-5\.\d+-pro", ("medium", "high", "xhigh")),
    # langchain-openai profiles; for gpt-5.1 also OpenAI's own 400 ("Supported values are:
    # 'none', 'low', 'medium', and 'high'", quoted in sst/opencode#4451).
    Family(r"gpt-5\.[2-5]", ("none", "low", "medium", "high", "xhigh")),
    Family(r"gpt-5\.1", ("none", "low", "medium", "high")),
    # gpt-5-pro "defaults to (and only supports) high": OpenAI's ReasoningEffort reference
    # as Azure's SDK docs copy it (3.57's docstring no longer lists models).
    Family(r"gpt-5-pro", ("high",)),
    Family(r"gpt-5", ("minimal", "low", "medium", "high")),  # langchain-openai profiles
    Family(r"o\d", ("low", "medium", "high")),  # OpenAI's reasoning guide
)


@dataclass(frozen=True)
class ModelParams:
    temperature: float | None
    reasoning_effort: str | None


def base_name(model: str) -> str:
    """``openai/gpt-6-sol`` -> ``gpt-6-sol``: the name a model's rules and prices follow."""
    return model.rsplit("/", 1)[-1].strip().lower()


def accepted_efforts(model: str) -> tuple[str, ...]:
    """The reasoning efforts ``model`` takes; empty for a model that is not a reasoning one."""
    name = base_name(model)
    return next((f.efforts for f in FAMILIES if f.matches(name)), ())


def is_reasoning_model(model: str) -> bool:
    return bool(accepted_efforts(model))


def nearest_effort(model: str, effort: str) -> str:
    accepted = accepted_efforts(model)
    if effort in accepted or not accepted:
        return effort
    rank = EFFORTS.index(effort) if effort in EFFORTS else EFFORTS.index("medium")
    return min(accepted, key=lambda e: (abs(EFFORTS.index(e) - rank), -EFFORTS.index(e)))


def model_params(model: str, effort: str | None, temperature: float) -> ModelParams:
    """What to send to ``model`` for a configured ``effort`` (None: the model's default)."""
    if not is_reasoning_model(model):
        return ModelParams(temperature=temperature, reasoning_effort=None)
    chosen = nearest_effort(model, effort) if effort else None
    return ModelParams(
        temperature=temperature if chosen == "none" else None, reasoning_effort=chosen
    )


REASONING_ROOM = {
    "none": 0,
    "minimal": 1_000,
    "low": 3_000,
    "medium": 8_000,
    "high": 16_000,
    "xhigh": 32_000,
    "max": 64_000,
}
"""Tokens a reasoning model may think before it answers, by effort: what a call's cap adds
to the reply it expects (the cap counts reasoning). Generous: a cut-off is retried once with
twice the room, and billed either way."""


def reasoning_room(model: str, effort: str | None) -> int:
    """The room ``model`` at ``effort`` (None: its default, medium) needs for reasoning."""
    if not is_reasoning_model(model):
        return 0
    return REASONING_ROOM.get(effort or "medium", REASONING_ROOM["medium"])
