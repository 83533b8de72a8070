"""Which request parameters a chat model takes, decided by its name (pure).

Like prices, the rules follow the model's name wherever it is served: a gateway serving
``openai/gpt-6-sol`` takes what OpenAI's ``gpt-6-sol`` takes. Checked 2026-11-23 against
OpenAI's reasoning guide and the pinned SDK:
- o-series, gpt-5.x and GPT-6 models are reasoning models: they refuse ``temperature``
  (HTTP 400) unless their reasoning effort is ``none``, which only gpt-5.1+ and GPT-6 take;
- o-series take efforts low/medium/high; gpt-5 (and -mini/-nano) add minimal; gpt-5.1 and
  later, and GPT-6, take none … xhigh. An effort a model does not take is moved to the
  nearest one it does, rather than sent to be refused.
- Any other name (a local llama, qwen …) keeps a temperature and gets no effort.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_O_SERIES = re.compile(r"^o\d")
_GPT5_BASE = re.compile(r"^gpt-5(-mini|-nano|-pro)?(-\d{4}-\d{2}-\d{2})?$")
_NEW_REASONING = re.compile(r"^gpt-(5\.\d+|6(\.\d+)?)(\b|-)")


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
    if _NEW_REASONING.match(name):
        return EFFORTS
    if _GPT5_BASE.match(name) or name.startswith("gpt-5-"):
        return ("minimal", "low", "medium", "high")
    if _O_SERIES.match(name):
        return ("low", "medium", "high")
    return ()


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
