"""``deep-research doctor``: what a user checks when something is off, one line a check.

Every check returns a ``Check``; none raises. Only a ``fail`` makes the command exit 1: a
machine with no model configured (the README's first run) is a working set-up that answers
extractively, so that is a ``note``. The optional surfaces (the page reader, the HTTP API,
the MCP server, the page's files) are imported here, in this process, because a broken
install shows up exactly there: a package that pip did not install makes an import fail,
and the check names the package and the command that installs it.

Kept fast (a few seconds): model lookups go out once, in parallel with the imports, under
one deadline; a knowledge base is read from its manifest and store, never re-indexed.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from deep_research.adapters.llm.lifecycle import lookup_models
from deep_research.app import chat, clients, preflight, preparation, presets, reserves, sources
from deep_research.app.config import SECRETS, Settings
from deep_research.app.loading import variable
from deep_research.app.options import RunOptions
from deep_research.app.saved import sessions
from deep_research.app.urls import mask_url
from deep_research.app.verify import Tally
from deep_research.core.errors import DeepResearchError
from deep_research.kb.catalog import list_kbs, open_kb
from deep_research.persistence.cache import ResultCache

if TYPE_CHECKING:
    from deep_research.core.models import WebEngine

Status = Literal["ok", "note", "warn", "fail"]

LOOKUP_DEADLINE_SECONDS = 10.0
"""Model lookups that take longer are reported as unreachable: the doctor never hangs."""


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None
    """The command (or setting) that fixes a warn or fail."""


@dataclass(frozen=True)
class Surface:
    name: str
    used_by: str
    modules: tuple[str, ...]


SURFACES = (
    Surface(
        "page reader",
        "--web-engine search, verify_claim on URLs",
        ("deep_research.adapters.web.reader",),
    ),
    Surface("web search", "--web-engine search", ("deep_research.adapters.web.search",)),
    Surface("HTTP API", "deep-research serve", ("deep_research.frontends.http.app", "uvicorn")),
    Surface(
        "MCP server",
        "deep-research mcp",
        ("deep_research.frontends.mcp.server",),  # which imports its tools (its TOOLS)
    ),
)
PAGE_FILES = ("index.html", "app.js", "app.css")
REINSTALL = "reinstall deep-research (pip install -e . in its folder)"


def missing_package(exc: BaseException) -> str | None:
    """The top-level module an import failed for, found anywhere in the exception's chain
    (lxml re-raises a missing ``lxml_html_clean`` as a plain ImportError ``from None``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ModuleNotFoundError) and current.name:
            return current.name.split(".")[0]
        current = current.__cause__ or current.__context__
    return None


def check_surface(surface: Surface) -> Check:
    for module in surface.modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            package = missing_package(exc)
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            fix = f"{sys.executable} -m pip install {package}" if package else REINSTALL
            return Check(surface.name, "fail", f"cannot import {module}: {reason}", fix)
    return Check(surface.name, "ok", surface.used_by)


def check_page() -> Check:
    folder = resources.files("deep_research.frontends") / "page"
    missing = [name for name in PAGE_FILES if not (folder / name).is_file()]
    if missing:
        detail = f"the serve page's files are missing: {', '.join(missing)}"
        return Check("page", "fail", detail, REINSTALL)
    return Check("page", "ok", "the serve page's files are installed")


def check_data_dir(settings: Settings) -> tuple[Check, int]:
    """The data directory, with the sessions it holds; a team's database when sessions
    live there (``Settings.database_url``): reachable, at this version's schema."""
    home = settings.home
    if settings.database_url is not None:
        try:
            store = sessions(settings)
            count = len(store.list())
        except DeepResearchError as exc:
            return Check("sessions", "fail", str(exc)), 0
        return Check("sessions", "ok", f"{store.where} ({count} sessions)"), count
    try:
        count = len(sessions(settings).list())
    except OSError as exc:
        return Check("data directory", "fail", f"{home}: {exc}"), 0
    return Check("data directory", "ok", f"{home} ({count} sessions)"), count


def check_knowledge_bases(settings: Settings) -> tuple[list[Check], list[dict[str, Any]]]:
    try:
        names = list_kbs(settings.kb)
    except DeepResearchError as exc:
        return [Check("knowledge base", "fail", str(exc))], []
    if not names:
        sample = " (a run with no model answers from the sample docs, in KB 'sample')"
        detail = "none of your notes yet" + (sample if settings.kb_path.is_dir() else "")
        return [Check("knowledge base", "note", detail, "deep-research kb ingest PATH")], []
    checks: list[Check] = []
    kbs: list[dict[str, Any]] = []
    for name in names:
        try:
            stats = open_kb(settings.kb, name).stats()
        except DeepResearchError as exc:
            checks.append(Check(f"knowledge base {name}", "fail", str(exc)))
            continue
        kbs.append({"name": name, "files": stats.files, "chunks": stats.chunks})
        detail = f"{stats.files} files, {stats.chunks} chunks, {stats.embedding_model}"
        checks.append(Check(f"knowledge base {name}", "ok", detail))
    return checks, kbs


def web_research(settings: Settings, engine: WebEngine | None) -> Check:
    """How a run researches the web with these settings, and what keeps it from it."""
    if engine is None:
        return Check(
            "web research", "note", "off: no model (--web-engine search quotes pages without one)"
        )
    kind = sources.source(engine)
    shown = kind.shown(settings, sources.spec_for(settings, engine))
    problem = kind.trouble(settings)
    if problem is not None:
        detail, fix = problem
        return Check("web research", "fail", f"{shown}: {detail}", fix)
    return Check("web research", "ok", shown)


def check_sources(settings: Settings, web: WebEngine | None) -> Check:
    """The sources a run would use with these settings (``sources.resolve``, as a run's), and
    the ones it leaves out, and why."""
    try:
        prepared = preparation.prepare(settings, "doctor", RunOptions())
        used = sources.resolve(prepared.settings, prepared.policy, kb=prepared.has_kb, web=web)
    except DeepResearchError as exc:  # a step of the set-up still to take: its line says which
        return Check("sources", "note", str(exc))
    off = "; ".join(used.said())
    return Check(
        "sources", "ok", ", ".join(s.name for s in used.used) + (f" ({off})" if off else "")
    )


async def check_models(settings: Settings) -> tuple[list[Check], WebEngine | None, list[str]]:
    """The models a run would use: priced, served and not shut down (one lookup each)."""
    engine = sources.default_web(settings, "auto")
    if not settings.has_model:
        detail = "none configured: runs answer from the knowledge base extractively"
        fix = "set OPENAI_API_KEY (or OPENAI_BASE_URL) for a model"
        return [Check("models", "note", detail, fix)], engine, []
    try:
        async with asyncio.timeout(LOOKUP_DEADLINE_SECONDS):
            prepared = await preparation.choose_engine(
                preparation.prepare(settings, "doctor", RunOptions())
            )
            choice = prepared.engine_choice  # what auto chose, and why
            choices = [Check("web research", "note", choice)] if choice else []
            warnings = await preparation.check_models(prepared)
            refs = preflight.configured_models(prepared.settings, prepared.spec)
            models = sorted({ref.model for ref in refs})
            unknown = await _unreachable_models(prepared.settings, models)
    except DeepResearchError as exc:
        return [Check("models", "fail", str(exc))], engine, []
    except TimeoutError:
        server = mask_url(settings.openai_base_url or chat.OPENAI_URL)
        detail = f"no answer from {server} within {LOOKUP_DEADLINE_SECONDS:.0f} s"
        return [Check("models", "fail", detail, "is the server reachable?")], engine, []
    checks = [Check("models", "warn", warning) for warning in warnings]
    if unknown:
        checks.append(Check("models", "fail", unknown, "is the server reachable?"))
    if not checks:
        checks.append(Check("models", "ok", ", ".join(models)))
    return [*checks, *choices], prepared.engine, warnings


async def _unreachable_models(settings: Settings, models: list[str]) -> str | None:
    """A run goes on when models cannot be looked up; the doctor says so."""
    async with clients.openai_client(settings, "lookup") as client:
        statuses = await lookup_models(client, models, cache=None)
        server = mask_url(str(client.base_url))
    unknown = [model for model, status in statuses.items() if status.known is None]
    return f"could not look up {', '.join(unknown)} at {server}" if unknown else None


def _masked(settings: Settings) -> dict[str, Any]:
    """Every setting as the doctor shows it: secrets as set / not set, URLs without the
    credentials they may carry (people paste this into bug reports)."""
    shown: dict[str, Any] = {}
    for name, value in settings.model_dump(mode="json").items():
        if name in SECRETS:
            shown[name] = "set" if value else "not set"
        elif isinstance(value, str) and (name.endswith("_url") or name == "chroma_host"):
            shown[name] = mask_url(value)
        else:
            shown[name] = value
    return shown


def env_lines(shown: dict[str, Any]) -> list[str]:
    """The settings of ``doctor --settings`` (``_masked``: the JSON's, by field name) as one
    writes them in `.env`: ``VARIABLE=value`` under its variable
    (``DEEP_RESEARCH_…``, ``OPENAI_API_KEY``…), sorted; a list or a mapping as JSON, a
    secret as ``# VARIABLE is set`` (never its value)."""
    lines = []
    for name, value in shown.items():
        var = variable(name)
        if name in SECRETS:
            lines.append(f"# {var} is {value}")
        elif value is None:
            lines.append(f"# {var} is not set")
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"{var}={text}")
    return sorted(lines, key=lambda line: line.lstrip("# "))


PROBE_DEADLINE_SECONDS = 60.0
"""A local model's one structured reply: slow models take seconds, never a minute."""


class Probe(BaseModel):
    answer: str = Field(description="Two sentences on why the sky is blue.")


async def check_structured(settings: Settings) -> Check | None:
    """One structured call to the planner model on a server that is not OpenAI's: the
    shape it accepts (a strict schema, a JSON object, plain text), how fast it writes, and
    the limits it states. None on OpenAI's own API (it takes strict schemas) and for a
    model with a price: the doctor spends nothing."""
    if not settings.has_model or settings.on_openai:
        return None
    if reserves.price_book(settings).knows(settings.planner_model):
        return None
    from langchain_core.messages import HumanMessage  # lazy: LangChain

    from deep_research.adapters.llm.server import SHAPES  # lazy: openai

    cache = ResultCache(settings.cache_dir)
    server = chat.chat_server(settings, cache)
    model = settings.planner_model
    try:
        async with clients.http_client() as http, asyncio.timeout(PROBE_DEADLINE_SECONDS):
            planner = chat.chat_model(settings, "planner", http, server)
            await planner.structured(
                Probe, [HumanMessage("Why is the sky blue?")], Tally(), reply_tokens=96
            )
    except TimeoutError:
        return Check(
            "structured output",
            "fail",
            f"{model}: no reply within {PROBE_DEADLINE_SECONDS:.0f} s",
            "serve a faster model, or raise DEEP_RESEARCH_REQUEST_TIMEOUT_SECONDS",
        )
    except DeepResearchError as exc:
        return Check("structured output", "fail", str(exc), "set --chat-model to another model")
    finally:
        cache.close()
    shape = await server.shape(model)
    refused = SHAPES[: SHAPES.index(shape)]
    parts = [
        f"{model} replies as {shape}" + (f" ({', '.join(refused)} refused)" if refused else "")
    ]
    if (rate := server.speed.per_second) is not None:
        parts.append(f"{rate:.1f} tokens/s")
    if server.max_concurrent is not None:
        parts.append(f"{server.max_concurrent} calls at once")
    if server.context_tokens is not None:
        parts.append(f"context {server.context_tokens:,} tokens")
    return Check("structured output", "ok", "; ".join(parts))


async def doctor(settings: Settings) -> dict[str, Any]:
    """Every check, and the facts a bug report needs (versions, data directory, the
    effective settings with secrets masked). Problems are checks that failed."""
    started = time.perf_counter()
    models = asyncio.create_task(check_models(settings))
    try:
        surfaces = [await asyncio.to_thread(check_surface, s) for s in SURFACES]
    finally:
        model_checks, engine, warnings = await models
    structured = None
    if not any(c.status == "fail" for c in model_checks):
        structured = await check_structured(settings)
    data_dir, sessions = check_data_dir(settings)
    kb_checks, kbs = await asyncio.to_thread(check_knowledge_bases, settings)
    python = sys.version.split()[0]
    checks = [
        Check("deep-research", "ok", f"{version('deep-research')}, Python {python}"),
        data_dir,
        *(c for c in model_checks if c.name == "models"),
        *([structured] if structured else []),
        web_research(settings, engine),
        await asyncio.to_thread(check_sources, settings, engine),
        *(c for c in model_checks if c.name != "models"),  # why auto chose that engine
        *kb_checks,
        *surfaces,
        check_page(),
        Check("price data", "ok", _price_data()),
    ]
    checks = _without_credentials(checks, settings)
    return {
        "version": version("deep-research"),
        "python": python,
        "data_dir": str(settings.home),
        "sessions": sessions,
        "settings": _masked(presets.apply(settings)),  # as a run gets them
        "price_data": _price_data(),
        "web_research": next(c.detail for c in checks if c.name == "web research"),
        "model_warnings": warnings,
        "knowledge_bases": kbs,
        "checks": [asdict(check) for check in checks],
        "problems": [f"{c.name}: {c.detail}" for c in checks if c.status == "fail"],
        "seconds": round(time.perf_counter() - started, 2),
    }


def _without_credentials(checks: list[Check], settings: Settings) -> list[Check]:
    """The checks with every URL setting's credentials masked wherever an error quoted it
    (a store or client names the server it could not reach)."""
    shown = _masked(settings)
    raw = {
        value: shown[name]
        for name, value in settings.model_dump(mode="json").items()
        if name not in SECRETS and shown[name] != value
    }
    if not raw:
        return checks

    def clean(text: str | None) -> str | None:
        for value, masked in raw.items():
            text = text.replace(value, masked) if text else text
        return text

    return [replace(c, detail=clean(c.detail) or "", fix=clean(c.fix)) for c in checks]


def _price_data() -> str:
    try:
        return f"genai-prices {version('genai-prices')}"
    except PackageNotFoundError:
        return "genai-prices not installed"
