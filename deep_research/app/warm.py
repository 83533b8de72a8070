"""What a server builds as it starts, so its first run does not wait for it: the engine's
modules, the TLS context, the price data, the claim check's embedding model and the KB's
(``warm_up``), in a thread of its own (``start_warm_up``). It spends nothing and saves no
session, and contacts nobody but, when the web engine is ``auto`` on a server other than
OpenAI's, that server's models API (the question the first run would ask, its answer
cached for a day)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from deep_research.adapters.corroboration import site
from deep_research.adapters.verifier_model import shipped_embedder
from deep_research.app import preparation
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.errors import DeepResearchError

if TYPE_CHECKING:
    from deep_research.app.runs import RunManager

log = logging.getLogger(__name__)


# What a run imports as it starts (``lifecycle.execute``), beyond what ``preparation.prepare``
# imports; each source's build imports its own (``Source.warm_modules``).
# The prompts are read from a package; structured replies go through LangChain's fallbacks.
RUN_MODULES = (
    "deep_research.app.wiring",
    "deep_research.core.orchestrator",
    "deep_research.core.report",
    "deep_research.persistence.claims",
    "deep_research.persistence.evidence",
    "deep_research.persistence.events",
    "deep_research.prompts",
    "langchain_core.runnables.fallbacks",
)


def warm_up(settings: Settings, say_engine: Callable[[preparation.Prepared], None]) -> None:
    """Build what a run needs, as a first run would: the choice of ``auto`` (said once, see
    ``RunManager.say_engine``), the engine's modules (~3 s of imports on an idle 2-core
    machine, 12 s measured on a loaded one), the TLS context, the price data of the
    configured models, the embedding model every run's claim check reads with (~0.5 s of
    CPU to load, once a process) and, with a knowledge base and a local embedding model,
    that model. A setting that stops it is the first run's to meet and report."""
    # OpenAI, Chroma and LangChain load here, in the warm-up thread.
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from deep_research.app import clients, run_kb

    try:
        prepared = preparation.prepare(settings, "What does a run need?", RunOptions())
        prepared = asyncio.run(preparation.choose_engine(prepared))
        say_engine(prepared)
        preparation.estimate(prepared)
        clients.tls_context()
        clients.touch_apis(settings)
        # LangChain loads its tracing and message-format modules on a model's first call:
        # one call to an in-process model that sends nothing.
        FakeListChatModel(responses=["warm"]).invoke("warm-up")
        used = prepared.sources().used
        for module in RUN_MODULES + tuple(m for s in used for m in s.warm_modules):
            importlib.import_module(module)
        shipped_embedder().embed_query("What does a run need?")
        if prepared.policy != "web_only":
            kb = run_kb.open_default_kb(prepared.settings)  # the run's KB (``choose_kb``)
            if kb is not None and settings.embedding_provider != "openai":  # no call, no cost
                kb.embeddings.embed_query("What does a run need?")
        # Last, what saves a first run least (a fraction of a second each): the SDK's reply
        # types, and the public suffix list the claim check's first source loads.
        clients.build_reply_types()
        site("https://example.com/")
    except (DeepResearchError, OSError) as exc:
        log.warning("warm-up stopped (the first run builds the rest): %s", exc)
    except Exception:  # a bug: the first run meets it too, but the log says where
        log.warning("warm-up failed (the first run builds the rest)", exc_info=True)


def start_warm_up(runs: RunManager) -> asyncio.Event:
    """``warm_up`` in a daemon thread: a server stopped meanwhile exits without waiting for
    it. The event is set once it has ended, however it ended."""
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()

    def build() -> None:
        try:
            warm_up(runs.settings, runs.say_engine)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(ended.set)

    threading.Thread(target=build, name="warm-up", daemon=True).start()
    return ended
