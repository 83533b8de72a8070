"""The values a setting or a run option may take, shared by ``Settings`` (``config.py``) and
the run options (``options.py``): model and knowledge-base names, reasoning efforts, web
engines, parallel branches."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


ENGINE_NAMES: list[str] = ["openai", "search"]
"""The web engines a setting or a run option may name besides ``auto``: the built-ins, and
every engine registered since (``engines.register`` adds its name, ``engines.unregister``
removes it). Plain data, so the settings check a name without loading the registry, which
imports the settings."""


def known_engine(value: str) -> str:
    """``auto`` or a registered web engine (``ENGINE_NAMES``)."""
    if value != "auto" and value not in ENGINE_NAMES:
        raise ValueError(f"should be one of auto, {', '.join(ENGINE_NAMES)}")
    return value


WebEngineChoice = Annotated[str, AfterValidator(known_engine)]
ParallelBranches = Annotated[int, Field(ge=1, le=64)]
MAX_MODEL_NAME = 200

KB_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
_KB_NAME = re.compile(KB_NAME_PATTERN)


def model_name(value: str) -> str:
    """``value``, if it can name a model (a setting's, a run option's); else ValueError."""
    if not value.strip():
        raise ValueError("must name a model")
    if len(value) > MAX_MODEL_NAME or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"is not a model name (no spaces, at most {MAX_MODEL_NAME} characters)")
    return value


def kb_name(value: str) -> str:
    """``value``, if it can name a knowledge base; else ValueError."""
    if not _KB_NAME.fullmatch(value):
        raise ValueError(
            "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value
