"""The knowledge base: hybrid search over the run's KB, notes written by the branch model
(or, with no model, the best passages quoted)."""

from __future__ import annotations

from deep_research.adapters.branches.kb import KBExecutor
from deep_research.adapters.extractive.roles import ExtractiveWriter
from deep_research.app.run_kb import StoreRetriever
from deep_research.app.sources import Executor, Source, SourceRun


def _build(run: SourceRun) -> Executor:
    from deep_research.adapters.llm.branch import LLMEvidenceWriter  # LangChain

    assert run.kb is not None, "resolve() uses this source only with a knowledge base"
    writer = LLMEvidenceWriter(run.chat("branch")) if run.chat else ExtractiveWriter()
    return Executor(KBExecutor(StoreRetriever(run.kb), writer, run.settings.retrieval_k))


SOURCE = Source(
    name="kb",
    serves="internal",
    title="knowledge base",
    build=_build,
    needs_kb=True,
    warm_modules=("deep_research.adapters.llm.branch",),
    describe=lambda settings, spec: f"knowledge base {settings.kb_name!r}",
)
