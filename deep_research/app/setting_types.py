"""The values a setting or a run option may take, shared by ``Settings`` (``config.py``) and
the run options (``options.py``): presets, model and knowledge-base names, reasoning efforts, web
engines, parallel branches, the web scope; and the settings' own: host lists, prices, the
data directory, text that is unset when blank."""

from __future__ import annotations

import math
import re
from datetime import date
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr

from deep_research.app.home import home_from
from deep_research.core import scope

Preset = Literal["quick", "standard", "deep"]
"""How far a run goes (``app/presets.py``: what each changes of the settings' defaults)."""

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


SEARCH_PROVIDERS = ("duckduckgo", "searxng", "tavily", "brave", "exa")
"""The built-in search providers of search-and-read (``adapters/web/search``), the default
first; a plugin adds others."""
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


def _joined(value: object) -> object:
    """A list of domains (a JSON body's) as the comma-separated text the flags give."""
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return ",".join(value)
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
Domains = Annotated[str, BeforeValidator(_joined), AfterValidator(_domain_list)]
"""Comma-separated domains (a JSON body's list is taken too: its schema, as the flag's, says
text), normalised (``https://www.Example.com/x`` -> ``example.com``)."""
Since = Annotated[str, AfterValidator(_since)]
Location = Annotated[str, AfterValidator(_location)]


def _blank_is_none(value: object) -> object:
    """Set but blank is unset: `DEEP_RESEARCH_API_TOKEN=` must not be an empty token
    that an empty `Authorization: Bearer` header matches."""
    return None if isinstance(value, str) and not value.strip() else value


def _home(value: object) -> object:
    """As ``sessions list`` finds it (``home``): `~` expanded, blank is the default."""
    return home_from(str(value)) if isinstance(value, str | Path) else value


def _host_list(value: str) -> str:
    for entry in filter(None, (e.strip() for e in value.split(","))):
        host, _, port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if not host or (port and not port.isdigit()) or "/" in entry:
            raise ValueError(f"{entry!r} is not host or host:port")
    return value


def _by_provider(rate: bool) -> AfterValidator:
    """A figure per search provider: a price (>= 0), or a rate (> 0)."""

    def check(value: dict[str, float]) -> dict[str, float]:
        known = known_providers()
        for name, figure in value.items():
            if name not in known:
                raise ValueError(f"unknown search provider {name!r}: one of {', '.join(known)}")
            if not math.isfinite(figure) or figure < 0 or (rate and figure == 0):
                raise ValueError(
                    f"the figure for {name!r} must be a finite number {'>' if rate else '>='} 0"
                )
        return value

    return AfterValidator(check)


def _non_negative(
    value: dict[str, tuple[float, float, float]],
) -> dict[str, tuple[float, float, float]]:
    for model, figures in value.items():
        if any(f < 0 for f in figures):
            raise ValueError(f"prices of {model!r} must not be negative")
    return value


OptionalText = Annotated[str | None, BeforeValidator(_blank_is_none)]
OptionalSecret = Annotated[SecretStr | None, BeforeValidator(_blank_is_none)]
Home = Annotated[Path, BeforeValidator(_home)]
HostList = Annotated[str, AfterValidator(_host_list)]
"""Comma-separated ``host`` or ``host:port``."""
SearchPrices = Annotated[dict[str, float], _by_provider(rate=False)]
SearchRates = Annotated[dict[str, float], _by_provider(rate=True)]
ModelPrices = Annotated[dict[str, tuple[float, float, float]], AfterValidator(_non_negative)]
"""USD per 1M tokens (input, cached input, output) by model."""
