"""The values a setting or a run option may take, shared by ``Settings`` (``config.py``) and
the run options (``options.py``): model and knowledge-base names, reasoning efforts, web
engines, parallel branches, the web scope."""

from __future__ import annotations

import re
from datetime import date
from importlib.metadata import entry_points
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from deep_research.core import scope
from deep_research.core.models import SEARCH_PROVIDERS

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
"""The openai SDK's ``ReasoningEffort`` (3.57). A model that lacks the one chosen gets the
nearest it takes (``adapters/llm/params.py``)."""


BUILTIN_WEB = ("openai", "search")
"""The built-in web sources (``deep_research/sources/``), known without loading any."""
SOURCE_ENTRY_POINTS = "deep_research.sources"
"""The entry point group of sources (``app/sources.py``); an entry point's name is its
source's."""


def known_engine(value: str) -> str:
    """``auto``, a built-in web source, or a plugin's source: its name is checked against
    the entry points' names, none of them loaded (whether it researches the web is
    ``sources.source``'s to say)."""
    if value == "auto" or value in BUILTIN_WEB:
        return value
    names = [*BUILTIN_WEB, *(point.name for point in entry_points(group=SOURCE_ENTRY_POINTS))]
    if value not in names:
        raise ValueError(f"should be one of auto, {', '.join(names)}")
    return value


SEARCH_PROVIDER_ENTRY_POINTS = "deep_research.search_providers"
"""The entry point group of search providers (``adapters/web/search``)."""


def known_providers() -> list[str]:
    """The built-in search providers, then the plugins' (their entry points' names, none
    loaded)."""
    plugins = (point.name for point in entry_points(group=SEARCH_PROVIDER_ENTRY_POINTS))
    return list(dict.fromkeys([*SEARCH_PROVIDERS, *plugins]))


def known_provider(value: str) -> str:
    if value not in SEARCH_PROVIDERS and value not in (names := known_providers()):
        raise ValueError(f"should be one of {', '.join(names)}")
    return value


WebEngineChoice = Annotated[str, AfterValidator(known_engine)]
SearchProviderChoice = Annotated[str, AfterValidator(known_provider)]
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


def _domain_list(value: str) -> str:
    return ",".join(scope.domains(value))


def _since(value: str) -> str:
    """A date or a window back from today, as given: a run resolves it to a date as it is
    prepared (``preparation.dated``)."""
    if value.strip():
        scope.parse_since(value, date.today())
    return value.strip()


def _location(value: str) -> str:
    return scope.location(value) if value.strip() else ""


# The web scope (``core/scope.py``), each as its parser reads it.
Domains = Annotated[str, AfterValidator(_domain_list)]
"""Comma-separated domains, normalised (``https://www.Example.com/x`` -> ``example.com``)."""
Since = Annotated[str, AfterValidator(_since)]
Location = Annotated[str, AfterValidator(_location)]
