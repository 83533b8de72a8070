"""Prepare a research run before anything is spent or saved: its settings (options over
its preset over the user's), validated; its worst case (``estimate``); its models checked
(``check_models``); the sources it uses (``app/sources.resolve``); and, for ``--web-engine
auto``, the web source chosen (``choose_engine``). ``lifecycle`` then starts, resumes and
cancels the run.

Everything a user can get wrong is checked here before the engine's modules load, so a
mistake fails at once: the modules that load LangChain or OpenAI (``wiring``, ``preflight``,
``clients``, the model lookup) are imported inside the functions that need them
(``test_startup``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from deep_research.app import clients, presets, reserves, sources
from deep_research.app.config import Settings
from deep_research.app.options import (
    MAX_QUESTION_CHARS,
    OPTION_SETTINGS,
    RunOptions,
)
from deep_research.app.urls import mask_url
from deep_research.core.errors import ConfigError, DeepResearchError, UsageError
from deep_research.core.models import Limits, SourcePolicy, WebEngine
from deep_research.persistence.cache import ResultCache

if TYPE_CHECKING:
    from deep_research.adapters.web.openai_jobs import JobSpec
    from deep_research.app.preflight import Estimate

Info = Callable[[str], None]
"""Where a step says what it does (ingesting the KB first, …): one line each."""


@dataclass(frozen=True)
class Prepared:
    """A run's settings and choices, validated, before anything is spent or saved."""

    settings: Settings
    policy: SourcePolicy
    """The user's (``--kb-only``, ``--web-only``, else ``auto``); ``sources()`` what it uses."""
    limits: Limits
    spec: JobSpec | None
    question: str = ""
    engine: WebEngine | None = None
    """The web source (``--web-engine``'s); None: the run does not search the web."""
    has_kb: bool = False
    """The run's knowledge base is there (or is the sample one, ingested first)."""
    notices: tuple[str, ...] = ()
    """Choices made for the user (``choose_engine``'s), for the session's event log."""
    engine_choice: str = ""
    """How ``auto`` chose ``engine`` and why, in one line (``choose_engine``'s; "" when the
    engine was named or the run does not search the web): what doctor and the servers say."""
    engine_fallback: bool = False
    """``auto`` chose search-and-read because research jobs cannot be had or asked about
    (servers warn of it)."""

    @property
    def extractive(self) -> bool:
        return not self.settings.has_model

    def sources(self) -> sources.Resolution:
        """The sources the run uses (``wiring.start_run`` resolves the same)."""
        return sources.resolve(self.settings, self.policy, kb=self.has_kb, web=self.engine)


def clean_question(question: str) -> str:
    question = " ".join(question.split())
    if not question:
        raise UsageError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(
            f"the question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,} "
            "(put background material in the knowledge base instead)"
        )
    return question


def check_budget(given: Mapping[str, object], names: Mapping[str, str] | None = None) -> None:
    """Refuse a limit no run can have (``Limits.problem``: not finite, not positive, past a
    generous maximum) as a usage error naming its flag (``names``: field -> flag) or field."""
    for field_name, value in given.items():
        problem = None if value is None else Limits.problem(field_name, value)
        if problem:
            flag = (names or {}).get(field_name, field_name)
            raise UsageError(f"{flag} {problem} (got {value})")


def limits_of(settings: Settings) -> Limits:
    return Limits(
        max_iterations=settings.max_iterations,
        max_total_tokens=settings.max_total_tokens,
        max_cost_usd=settings.max_cost_usd,
        max_runtime_seconds=settings.max_runtime_seconds,
    )


def dated(settings: Settings, today: date) -> Settings:
    """``settings`` with a relative ``since`` (90d) resolved against ``today``, the day
    the run starts: every component, and the session's run spec, see the same date."""
    since = settings.web_scope(today).since
    return settings.with_overrides(since=since.isoformat()) if since else settings


def prepare(
    settings: Settings,
    question: str,
    options: RunOptions,
    flags: Mapping[str, str] | None = None,
) -> Prepared:
    """A new run's settings (``options`` over its preset's over ``settings``), validated;
    nothing is saved.

    ``flags`` (option -> the command-line flag that gives it) makes a bad value a usage
    error naming its flag. Everything a user can get wrong is checked before the engine's
    modules load (seconds), so a mistake fails at once."""
    flags = flags or {}
    question = clean_question(question)
    check_budget(options.given(), flags)  # ``options`` may have been copied unvalidated
    if options.kb_only and options.web_only:
        raise UsageError("--kb-only and --web-only exclude each other")
    # The preset first: it fills in only what nobody chose, and the options below win over it.
    settings = presets.apply(settings, options.preset)
    overrides: dict[str, object] = {}
    named: dict[str, str] = {}
    for option, targets in OPTION_SETTINGS.items():
        value = getattr(options, option)
        if value is None:
            continue
        for target in targets:
            overrides[target] = value
            named.pop(target, None)
            if option in flags:
                named[target] = flags[option]
    settings = dated(settings.with_flags(named, overrides), date.today())
    from deep_research.app import run_kb  # load Chroma: see above

    policy: SourcePolicy = (
        "kb_only" if options.kb_only else "web_only" if options.web_only else "auto"
    )
    limits = limits_of(settings)
    if settings.has_model:
        reserves.check_token_limit(settings, limits)
    settings = run_kb.choose_kb(settings, policy, named=options.kb_name is not None)
    has_kb = policy != "web_only" and run_kb.kb_ready(settings)
    web = sources.default_web(settings, policy)
    used = sources.resolve(settings, policy, kb=has_kb, web=web)  # refuses a run with none
    spec = sources.spec_for(settings, used.web)
    return Prepared(settings, policy, limits, spec, question, used.web, has_kb=has_kb)


def estimate(prepared: Prepared) -> Estimate:
    """The run's worst case, from prices alone: spends nothing, contacts nobody. A model the
    run would call with no known price is refused here (``check_prices``), as the run is."""
    from deep_research.app import preflight  # load OpenAI, LangChain: see above

    if not prepared.extractive:
        refs = preflight.configured_models(prepared.settings, prepared.spec)
        preflight.check_prices(prepared.settings, refs, reserves.price_book(prepared.settings))
    return _worst(prepared)


def _worst(prepared: Prepared) -> Estimate:
    """``estimate`` of a run whose prices are known (its variants: ``refusal``)."""
    from deep_research.app import preflight  # load OpenAI, LangChain: see above

    settings = prepared.settings
    prices = reserves.price_book(settings)
    reserve, tokens = 0.0, 0  # with no model the report is written by code: it costs nothing
    if not prepared.extractive:
        reserve = reserves.final_reserve_usd(settings, prices, prepared.limits.max_cost_usd)
        tokens = reserves.final_reserve_tokens(settings, prepared.limits.max_total_tokens)
    return preflight.estimate(
        settings,
        prepared.spec,
        prices,
        reserve,
        engine=prepared.engine,
        others=[s for s in prepared.sources().used if s.serves not in ("internal", "web")],
        final_reserve_tokens=tokens,
    )


def refusal(prepared: Prepared, worst: Estimate) -> str | None:
    """Why a new run's limits admit no research (``Estimate.shortfall``, the figures
    ``--estimate`` shows), and what would fit: each choice named is one that admits
    research with everything else as it is. None when research fits."""
    why = worst.shortfall()
    if why is None:
        return None
    fits = [flag for flag, variant in _variants(prepared) if _worst(variant).shortfall() is None]
    raised = _least_limit(prepared, worst)
    if raised:
        fits.append(raised)
    return f"{why}; would fit: {', '.join(fits)}" if fits else why


def _variants(prepared: Prepared) -> list[tuple[str, Prepared]]:
    """The smaller runs a refusal may name, each with its flag."""
    settings = prepared.settings
    out: list[tuple[str, Prepared]] = []
    if prepared.engine is not None and prepared.engine != "search":
        out.append(("--web-engine search", _with(prepared, web_engine="search")))
    if prepared.engine is not None:
        out.append(("--web-effort low", _with(prepared, web_effort="low")))
    if settings.preset != "quick":
        quick = presets.apply(settings, "quick")
        out.append(("--preset quick", _rebuilt(prepared, quick, prepared.engine)))
    if prepared.policy == "auto" and prepared.engine is not None and _has_kb(settings):
        kb_only = dataclasses.replace(prepared, policy="kb_only", engine=None, spec=None)
        out.append(("--kb-only", kb_only))
    return out


def _has_kb(settings: Settings) -> bool:
    """The run's KB is there to research alone (asked only for a refusal)."""
    from deep_research.kb.catalog import list_kbs  # Chroma: only when a run is refused

    return settings.kb_name in list_kbs(settings.kb)


def _with(prepared: Prepared, **values: object) -> Prepared:
    settings = prepared.settings.with_overrides(**values)
    engine = values.get("web_engine", prepared.engine)
    return _rebuilt(prepared, settings, engine if isinstance(engine, str) else None)


def _rebuilt(prepared: Prepared, settings: Settings, engine: WebEngine | None) -> Prepared:
    return dataclasses.replace(
        prepared,
        settings=settings,
        limits=limits_of(settings),
        engine=engine,
        spec=sources.spec_for(settings, engine),
    )


def _least_limit(prepared: Prepared, worst: Estimate) -> str:
    """``--max-cost N`` (or ``--max-tokens N``) with the least N that admits research, all
    else as it is; "" when no limit a run may have does."""
    if worst.short_of == "cost":
        cents = _least(lambda n: _with(prepared, max_cost_usd=n / 100), int(worst.budget_usd * 100))
        return f"--max-cost {cents / 100:.2f}" if cents else ""
    tokens = _least(lambda n: _with(prepared, max_total_tokens=n * 1000), worst.token_limit // 1000)
    return f"--max-tokens {tokens * 1000}" if tokens else ""


def _least(variant: Callable[[int], Prepared], start: int) -> int:
    """An ``n`` above ``start`` whose ``variant`` admits research while ``n - 1``'s does not:
    the least, as more of a limit admits more (but for a cent where the report gains a
    section); 0 when not even the largest limit a run may have admits research."""

    def admits(n: int) -> bool:
        try:
            return _worst(variant(n)).shortfall() is None
        except ConfigError:  # past the limit's maximum
            return False

    low, high = max(0, start), max(1, start) * 2
    while not admits(high):
        if high > 10**12:
            return 0
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if admits(middle) else (middle, high)
    return high


async def check_models(prepared: Prepared) -> list[str]:
    """Before anything is spent: every model is priced, served and not shut down.

    Raises ``ConfigError`` naming the setting to change; returns warnings (a shutdown
    within 30 days)."""
    from deep_research.app import preflight  # load OpenAI: see above

    settings = prepared.settings
    refs = preflight.configured_models(settings, prepared.spec)
    preflight.check_prices(settings, refs, reserves.price_book(settings))
    async with clients.openai_client(settings, "lookup") as client:
        return await preflight.check_live_models(settings, client, refs, today=date.today())


async def choose_engine(prepared: Prepared, on_info: Info | None = None) -> Prepared:
    """``auto`` on a server other than OpenAI's: research jobs when the server serves the web
    model (asked once, the answer cached for a day), search-and-read when it does not or
    cannot say, said in one line to ``on_info``. A web model the user chose (a flag, or
    ``DEEP_RESEARCH_WEB_MODEL``) that the server does not serve is a ``ConfigError``: never
    a silent switch. Any other choice is returned as it is. Whatever ``auto`` chose, and
    why, is ``engine_choice``."""
    settings = prepared.settings
    if settings.web_engine != "auto" or prepared.engine is None:
        return prepared
    server, model = mask_url(settings.openai_base_url or ""), settings.web_model
    if settings.on_openai:
        return _chose(prepared, "openai", "as OpenAI's own API runs research jobs")
    if not settings.check_models:
        return _chose(
            prepared,
            "search",
            f"as {server} was not asked whether it serves {model} (model checks are off; "
            "--web-engine openai runs research jobs anyway)",
        )
    from deep_research.adapters.llm.lifecycle import CacheLookups, lookup_models  # see above

    cache = ResultCache(settings.cache_dir)
    try:
        async with clients.openai_client(settings, "lookup") as client:
            found = await lookup_models(client, [model], cache=CacheLookups(cache))
    except DeepResearchError as exc:  # a refused key: the model check that follows says so
        return _chose(prepared, "search", f"as {server} could not be asked about {model}: {exc}")
    finally:
        cache.close()
    status = found[model]
    shut_down = status.shutdown_date is not None and status.shutdown_date <= date.today()
    if status.known is True and not shut_down:
        return _chose(prepared, "openai", f"as {server} serves {model}")
    if status.known is None:
        why = f"{server} cannot say whether it serves {model}"
        force = "--web-engine openai runs research jobs anyway"
    else:
        if "web_model" in settings.model_fields_set:  # named by the user: never ignored
            raise ConfigError(
                f"{server} does not serve the web model {model} (--web-model, "
                "DEEP_RESEARCH_WEB_MODEL): name a model it serves, or --web-engine search "
                "to search and read pages with the branch model"
            )
        why = f"{server} does not serve {model}"
        force = "--web-model picks one it serves"
    notice = f"web research: {why}, so branches search and read pages instead ({force})"
    if on_info is not None:
        on_info(notice)
    switched = dataclasses.replace(prepared, notices=(*prepared.notices, notice))
    return _chose(switched, "search", f"as {why} ({force})")


def _chose(prepared: Prepared, engine: WebEngine, why: str) -> Prepared:
    """``prepared`` with the engine ``auto`` chose, and the line that says so."""
    settings = prepared.settings
    shown = sources.source(engine).shown(settings)
    return dataclasses.replace(
        prepared,
        engine=engine,
        spec=sources.spec_for(settings, engine),
        engine_choice=f"web engine auto: {engine} ({shown}), {why}",
        engine_fallback=engine != "openai",
    )
