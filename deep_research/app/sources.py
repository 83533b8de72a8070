"""Sources: the ways a run researches a branch, one seam for all of them.

A source is a ``Source`` value in a module of its own, found the way a plugin is: the
built-ins (``deep_research/sources/``: the knowledge base, OpenAI research jobs, search and
read) are named in ``DEFAULT``; any other package adds one with an entry point::

    [project.entry-points."deep_research.sources"]
    echo = "my_package.echo:SOURCE"

Both are read the first time a run asks (``available``), never by ``--help`` or ``sessions
list``. A source serves one of the planner's hints: ``internal`` (the knowledge base),
``web`` (the one web source ``--web-engine`` names, or ``auto`` picks), or a hint of its own,
which the planner is offered with the source's description. ``resolve`` decides which
sources a run uses, from the settings, the model, the knowledge base and the flags, and
says which it leaves out and why; nothing else decides it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deep_research.adapters.llm.params import nearest_effort
from deep_research.app.config import Settings
from deep_research.app.setting_types import SOURCE_ENTRY_POINTS
from deep_research.core.errors import ConfigError, KBMissing, KnowledgeBaseError
from deep_research.core.models import MIXED, ChatRole, SourceHint, SourcePolicy
from deep_research.core.plugins import installed, load
from deep_research.core.ports import BUILTIN_SOURCES, BranchExecutor, JobControl

if TYPE_CHECKING:  # what a source builds loads when a run builds it, never with a server
    import openai

    from deep_research.adapters.llm.llm import ChatModel
    from deep_research.adapters.prices import PriceTable
    from deep_research.adapters.web.openai_jobs import JobSpec, KbTool
    from deep_research.kb.store import KBStore
    from deep_research.persistence.cache import ResultCache

log = logging.getLogger(__name__)

ENTRY_POINTS = SOURCE_ENTRY_POINTS
DEFAULT = (
    "deep_research.sources.kb:SOURCE",
    "deep_research.sources.openai_jobs:SOURCE",
    "deep_research.sources.search:SOURCE",
)
"""The built-in sources, loaded as an entry point is: ``module:attribute``."""


@dataclass(frozen=True)
class SourceRun:
    """What a source is built from: the run's settings and what it shares with the run."""

    settings: Settings
    chat: Callable[[ChatRole], ChatModel] | None
    """A chat model for a role; None: no model is configured (extractive)."""
    http: openai.DefaultAsyncHttpxClient | None
    """The run's connection pool for OpenAI clients (None without a model)."""
    cache: ResultCache
    resources: AsyncExitStack
    """Whatever the source opens is closed here when the run ends."""
    prices: PriceTable
    spec: JobSpec | None
    """The research job a branch starts (sources that run jobs; replayed on resume)."""
    kb: KBStore | None
    kb_tool: KbTool | None
    """The knowledge base as an MCP tool of research jobs, when its public URL is set."""


@dataclass(frozen=True)
class Executor:
    """A built source: what researches its branches, and control of the jobs it leaves
    running at a provider (cancel), when it starts any."""

    executor: BranchExecutor
    jobs: JobControl | None = None


@dataclass(frozen=True)
class WorstCase:
    per_branch_usd: float
    description: str
    unit: str
    """What one branch is called in the estimate: "web research job", "web branch"."""


def _one_chat_call(
    settings: Settings, prices: PriceTable, chat_usd: float, spec: JobSpec | None
) -> WorstCase:
    return WorstCase(chat_usd, "one chat call a branch", "branch")


@dataclass(frozen=True)
class Source:
    name: str
    """What ``--web-engine``, ``doctor`` and the session's run spec call it."""
    serves: SourceHint
    """The planner's hint it researches: ``internal``, ``web``, or one of its own."""
    title: str
    """How its part of a ``mixed`` node is headed: "From the {title}"."""
    build: Callable[[SourceRun], Executor]
    description: str = ""
    """What it holds, as the planner reads it (a hint of its own only)."""
    needs_model: bool = False
    needs_kb: bool = False
    worst_case: Callable[[Settings, PriceTable, float, JobSpec | None], WorstCase] = _one_chat_call
    """(settings, prices, worst chat call in USD, the job spec) -> one branch's worst case
    (``--estimate`` and the cost prompt); by default one chat call."""
    describe: Callable[[Settings, JobSpec | None], str] | None = None
    """How the run names it: the live view, the run spec, the report footer (its title)."""
    runs_jobs: bool = False
    """Starts research jobs at the provider: its ``JobSpec`` is saved and replayed."""
    searches: bool = False
    """Searches through ``DEEP_RESEARCH_SEARCH_PROVIDER``: the provider is saved and replayed."""
    warm_modules: tuple[str, ...] = ()
    """Modules its build imports, which a server imports at start."""
    problem: Callable[[Settings], tuple[str, str] | None] | None = None
    """What keeps it from working with these settings, and the fix."""

    def shown(self, settings: Settings, spec: JobSpec | None = None) -> str:
        return self.describe(settings, spec) if self.describe else self.title

    def trouble(self, settings: Settings) -> tuple[str, str] | None:
        return self.problem(settings) if self.problem else None


@functools.cache
def _catalog() -> tuple[dict[str, Source], dict[str, str]]:
    """The sources there are, by name (the built-ins first), and the plugins left out, with
    why (``resolve`` says it on the run's first lines)."""
    found = {source.name: source for source in (load(t, Source) for t in DEFAULT)}
    plugins, broken = installed(ENTRY_POINTS, Source)
    for name, source in plugins.items():
        if source.serves in BUILTIN_SOURCES and source.serves != "web":
            broken[name] = f"it would research {source.serves!r}, a built-in hint"
        elif source.name != name:  # the settings check --web-engine by the entry's name
            broken[name] = f"its entry point names it {name!r}, the source {source.name!r}"
        else:
            found.setdefault(name, source)
    for name, why in broken.items():
        log.warning("source %s left out: %s", name, why)
    return found, broken


def available() -> Mapping[str, Source]:
    """Every source there is: the built-ins, then each entry point of ``ENTRY_POINTS`` (a
    plugin that cannot be used is left out and said; it never stops a run)."""
    return _catalog()[0]


def source(name: str) -> Source:
    """The source named ``name``: a web source when ``--web-engine`` names it."""
    try:
        return available()[name]
    except KeyError:
        known = ", ".join(web_names())
        raise ConfigError(f"unknown web engine {name!r}: use one of auto, {known}") from None


def web_source(name: str) -> Source:
    found = source(name)
    if found.serves != "web":
        known = ", ".join(web_names())
        raise ConfigError(f"{name!r} does not research the web: --web-engine takes auto, {known}")
    return found


def web_names() -> list[str]:
    """What ``--web-engine`` takes besides ``auto``: the sources that serve ``web``."""
    return [name for name, found in available().items() if found.serves == "web"]


def job_spec(settings: Settings) -> JobSpec:
    from deep_research.adapters.web.openai_jobs import JobSpec  # lazy: openai

    summary = settings.web_reasoning_summary
    return JobSpec(
        model=settings.web_model,
        # The nearest effort the web model takes: `--web-effort minimal` on gpt-6-astra is low.
        reasoning_effort=nearest_effort(settings.web_model, settings.web_effort),
        max_tool_calls=settings.web_max_tool_calls,
        max_output_tokens=settings.web_max_output_tokens,
        reasoning_summary=None if summary == "off" else summary,
        scope=settings.web_scope(),
        service_tier=settings.web_tier,
    )


def spec_for(settings: Settings, web: str | None) -> JobSpec | None:
    """The research job a web source's branches start (saved in the run spec and replayed on
    resume); None for a source that starts none, or no web research."""
    return job_spec(settings) if web is not None and source(web).runs_jobs else None


def default_web(settings: Settings, policy: SourcePolicy) -> str | None:
    """The web source a run uses before ``preparation.choose_engine`` has asked the server:
    the one named, else (``auto``, with a model) OpenAI research jobs on OpenAI's own API and
    search-and-read on any other server; None when the run does not search the web."""
    if policy == "kb_only":
        return None
    if settings.web_engine != "auto":
        return web_source(settings.web_engine).name
    if not settings.has_model:
        return None
    return "openai" if settings.on_openai else "search"


@dataclass(frozen=True)
class Resolution:
    """The sources a run uses, in the order a ``mixed`` node runs them, and the ones it
    leaves out, each with why."""

    used: tuple[Source, ...]
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def web(self) -> str | None:
        """The web source's name; None: the run does not search the web."""
        return next((s.name for s in self.used if s.serves == "web"), None)

    @property
    def hints(self) -> tuple[SourceHint, ...]:
        """What the planner may write: each source's hint (the web's first, as the plan's
        schema has always listed it), then ``mixed`` when there are several."""
        served = sorted(dict.fromkeys(s.serves for s in self.used), key=lambda h: h != "web")
        return (*served, *(MIXED,) * (len(served) > 1))

    @property
    def descriptions(self) -> dict[SourceHint, str]:
        """What the planner reads of each hint."""
        own = {s.serves: s.description for s in self.used if s.serves not in BUILTIN_SOURCES}
        return {**BUILTIN_SOURCES, **own}

    def said(self) -> list[str]:
        """One line a source left out: "echo: off — no model configured"."""
        return [f"{name}: off — {why}" for name, why in self.left_out]


_NO_KB_NOR_MODEL = (
    "no model is configured and there is no knowledge base: set OPENAI_API_KEY or "
    "OPENAI_BASE_URL, run `deep-research kb ingest PATH`, or search the web without a model: "
    "--web-engine search"
)
ADD_KB = "add one with `deep-research kb ingest DIR`"


def resolve(settings: Settings, policy: SourcePolicy, *, kb: bool, web: str | None) -> Resolution:
    """The sources a run uses. ``policy`` is the user's (``--kb-only``, ``--web-only``, or a
    saved session's), ``kb`` whether the run's knowledge base is there, ``web`` the web source
    chosen (``default_web``, or ``choose_engine``'s; None: none). Every source left out is
    named with why (what it lacks before the flag that turned it off, but for ``--web-only``,
    which never asks whether there is a KB). A run nothing can research is refused here,
    before anything is spent."""
    chosen = source(web) if web is not None else None
    if chosen is not None and (trouble := chosen.trouble(settings)):
        raise ConfigError(f"{trouble[0]}: {trouble[1]}")  # the web source asked for cannot work
    candidates = [s for s in available().values() if s.serves != "web"]
    candidates += [chosen] if chosen else []
    candidates.sort(key=lambda s: _ORDER.get(s.serves, len(_ORDER)))
    used: list[Source] = []
    left_out: list[tuple[str, str]] = []
    for found in candidates:
        why = _why_not(found, settings, policy, kb=kb)
        if why is None and (first := next((u for u in used if u.serves == found.serves), None)):
            why = f"{first.name} researches {found.serves!r}"
        if why is None:
            used.append(found)
        else:
            left_out.append((found.name, why))
    left_out += _catalog()[1].items()
    if chosen is None:
        why = (
            f"no model configured ({_QUOTES_PAGES})"
            if not settings.has_model
            else "--kb-only"
            if policy == "kb_only"
            else "no web source chosen"
        )
        left_out.append(("web", why))
    if not used:
        raise _nothing_to_use(settings, policy, kb=kb, left_out=left_out)
    return Resolution(tuple(used), tuple(left_out))


_ORDER: dict[SourceHint, int] = {"internal": 0, "web": 1}
"""The order a ``mixed`` node runs its sources in: the KB, the web, then the others."""
_QUOTES_PAGES = "--web-engine search quotes pages without one"


def _why_not(found: Source, settings: Settings, policy: SourcePolicy, *, kb: bool) -> str | None:
    if found.serves != "web" and policy == "web_only":
        return "--web-only"
    if found.needs_kb and not kb:
        return f"no knowledge base {settings.kb_name!r} ({ADD_KB})"
    if found.needs_model and not settings.has_model:
        return "no model configured" + (f" ({_QUOTES_PAGES})" if found.serves == "web" else "")
    if found.serves != "internal" and policy == "kb_only":
        return "--kb-only"
    if found.serves not in BUILTIN_SOURCES and (trouble := found.trouble(settings)):
        return f"{trouble[0]} ({trouble[1]})"
    return None


def _nothing_to_use(
    settings: Settings, policy: SourcePolicy, *, kb: bool, left_out: list[tuple[str, str]]
) -> Exception:
    """Why no source can research the run, as the user can act on it."""
    if policy == "web_only" and not settings.has_model:
        return ConfigError(
            "web research needs a model (set OPENAI_API_KEY or OPENAI_BASE_URL), or "
            f"{_QUOTES_PAGES.replace(' quotes', ' to quote')}"
        )
    if not kb and not settings.has_model:
        return KnowledgeBaseError(_NO_KB_NOR_MODEL)
    if not kb and policy == "kb_only":
        name = settings.kb_name
        return KBMissing(f"--kb-only, but there is no knowledge base {name!r}: {ADD_KB}")
    said = "; ".join(f"{name}: {why}" for name, why in left_out)
    return ConfigError(f"no source can research this run ({said})")
