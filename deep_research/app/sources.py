"""Sources a run can research beyond the built-in two, registered by name.

Every run knows ``internal`` (the knowledge base) and ``web`` (the web engine of
``app/engines.py``). A source registered here (an arXiv search, a company wiki) is offered
to the planner under its name with its description (the plan schema lists both), its
nodes are routed to the executor it builds, and a ``mixed`` node merges what it found with
the others, under its title. Registered sources are offered when the run may use every
source (no ``--kb-only`` / ``--web-only``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from deep_research.adapters.llm.llm import ChatModel
from deep_research.app.config import Settings
from deep_research.core.models import ChatRole, SourceHint
from deep_research.core.ports import BUILTIN_SOURCES, BranchExecutor
from deep_research.persistence.cache import ResultCache

BUILTIN_TITLES: dict[SourceHint, str] = {"internal": "knowledge base", "web": "web"}
"""How the built-in sources name their part of a ``mixed`` node."""


@dataclass(frozen=True)
class SourceBuild:
    """What a source is built from: the run's settings and the resources it shares."""

    settings: Settings
    chat: Callable[[ChatRole], ChatModel] | None
    """A chat model for a role; None: no model is configured (extractive)."""
    cache: ResultCache
    resources: AsyncExitStack
    """Whatever the source opens is closed here when the run ends."""


@dataclass(frozen=True)
class SourceKind:
    name: SourceHint
    """The source hint the planner writes."""
    description: str
    """What it holds, as the planner reads it."""
    title: str
    """How its part of a ``mixed`` node is headed: "From the {title}"."""
    build: Callable[[SourceBuild], BranchExecutor]
    worst_case_usd: Callable[[Settings, float], float] = lambda settings, chat_call: chat_call
    """One branch's worst case in USD, from the settings and the worst chat call (what
    ``--estimate`` and the cost prompt count for a node of it); by default one chat call,
    a branch that writes its evidence with one call."""


SOURCES: dict[SourceHint, SourceKind] = {}


def register(kind: SourceKind) -> SourceKind:
    """Add (or replace) a source; reserved names (``web``, ``internal``, ``mixed``) are
    refused."""
    if kind.name in BUILTIN_SOURCES:
        raise ValueError(f"{kind.name!r} is a built-in source")
    SOURCES[kind.name] = kind
    return kind


def unregister(name: SourceHint) -> None:
    SOURCES.pop(name, None)
