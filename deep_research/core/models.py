"""Typed data that crosses modules: nodes, plans, verdicts, citations, usage.

LLM-facing models (``PlannedTask``, ``Plan``, ``Verdict``, ``BranchNotes``) keep every
field required and described: strict ``json_schema`` outputs demand it, and the
descriptions are what the model reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from deep_research.core.bounds import CostUSD, Iterations, RuntimeSeconds, TokenBudget, UnitInterval
from deep_research.core.claim_totals import ClaimTotals
from deep_research.core.scope import WebScope

NodeStatus = Literal["pending", "running", "done", "failed", "blocked", "cancelled"]
SourceHint = str
"""Where a node is researched: a source the run offers (``web``, ``internal`` or one
registered by name, see ``app/sources.py``) or ``mixed``: every source, merged."""
MIXED: SourceHint = "mixed"
SourcePolicy = Literal["auto", "kb_only", "web_only"]
"""Which sources a run may use: ``--kb-only``, ``--web-only``, or whatever exists."""
Role = Literal[
    "planner", "branch", "summarizer", "synthesizer", "judge", "deep_research", "search", "embed"
]
StopReason = Literal[
    "complete",
    "max_iterations",
    "time_limit",
    "token_limit",
    "cost_limit",
    "nothing_to_do",
    "interrupted",
    "error",
]
RunStatus = Literal["queued", "running", "complete", "stopped", "failed", "interrupted"]
"""``queued``: saved for a team's workers (``app.team``), none of which has taken it yet."""
ChatRole = Literal["planner", "synthesizer", "judge", "branch", "summarizer"]
WebEngine = str
"""The web source a run researches the web with: ``openai``, ``search`` or a plugin's
(``app/sources.py``)."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class Usage(BaseModel):
    """Token counts of one or more model calls.

    ``cached_input_tokens`` (read from the prompt cache) and ``cache_write_tokens`` (written
    to it, billed by GPT-6 at 1.25x input) are parts of ``input_tokens``;
    ``reasoning_tokens`` is part of ``output_tokens``."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    web_search_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class Citation(BaseModel):
    """One source a finding rests on: a web page or a knowledge-base chunk.

    ``ref`` is the session-wide id (``S1``, ``S2`` …) used in notes and summaries;
    the report renumbers refs to ``[1]``, ``[2]`` … in order of first use.

    ``claim`` and ``quote`` are kept apart: ``claim`` is our report's sentence that the
    source is cited for, ``quote`` is the source's own words. Only a quote can show that a
    claim is supported; web research jobs return none (only the page's url and title).
    """

    ref: str = ""
    kind: Literal["web", "kb"]
    url: str | None = None
    title: str = ""
    locator: str = Field(default="", description="KB: 'root/path#heading:start-end'; web: the url")
    quote: str = Field(
        default="",
        description="verbatim source text (a KB chunk); empty when the provider returns none",
    )
    claim: str = Field(default="", description="the report sentence this source is cited for")
    tags: tuple[str, ...] = Field(default=(), description="KB: the file's front-matter tags")
    accessed_at: datetime | None = Field(
        default=None, description="when the page was read (search-and-read web branches)"
    )
    undated: bool = Field(
        default=False,
        description="read under the run's --since window with no publication date found",
    )


class ResearchNode(BaseModel):
    id: str
    parent_id: str | None = None
    question: str
    status: NodeStatus = "pending"
    depth: int = 1
    depends_on: list[str] = Field(default_factory=list)
    parallelizable: bool = True
    priority: int = 0
    source_hint: SourceHint = "web"
    iteration: int = 1
    notes: str = ""
    citations: list[Citation] = Field(default_factory=list)
    confidence: float = 0.0
    children: list[str] = Field(default_factory=list)
    error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    # Remote background jobs (research job response ids) still owned by this node.
    remote_jobs: dict[str, str] = Field(default_factory=dict)
    job_intents: dict[str, datetime] = Field(default_factory=dict)
    """Paid creates sent whose id has not reached this file (job name -> when it was sent):
    written, and on disk, before the create leaves; dropped when the id is saved or the
    provider refused the create. One left over means a job may be running (and billing) at
    the provider with no id to re-attach: it is never submitted again unless the user asks
    (``resume --resubmit-lost``)."""
    researched_by: str = ""
    """Which model (and reasoning effort) researched the node, e.g. 'gpt-5.5 (effort high)'."""
    skipped_pages: list[str] = Field(default_factory=list)
    """Pages the search found and the branch could not read: "<url>: <reason>" (the report's
    limitations say how many, and why)."""
    consulted: list[str] = Field(default_factory=list)
    """Pages the branch's searches used and its findings do not cite (urls in the run's web
    scope): the report lists them, collapsed, after its sources."""
    dropped_citations: list[str] = Field(default_factory=list)
    """Pages a research job cited outside the run's web scope, taken out of its findings
    (OpenAI takes no excluded domains): the report's limitations count them."""


COMPLETE_CONFIDENCE = 0.5
"""The judge's ``overall_confidence`` from which its "complete" ends the research. Below
it the run replans while its limits allow: a judge that is not confident the report
answers the question has not found it complete (a tiny model said "complete" at 0.00-0.26).
The extractive judge is exempt: it measures passage coverage, and another round of the
same extraction would not raise it."""


class PlannedTask(BaseModel):
    id: str = Field(description="Short unique id for this sub-question, e.g. 't3'.")
    question: str = Field(description="A focused, self-contained research sub-question.")
    depends_on: list[str] = Field(
        description="Ids of tasks (new or existing) whose findings this task needs first."
    )
    parallelizable: bool = Field(
        description="True unless this task must run alone (e.g. it compares all others)."
    )
    priority: int = Field(description="0-10; higher runs first among ready tasks.")
    source_hint: SourceHint = Field(
        description="Where to research it: one of the sources listed in the instructions "
        "(e.g. 'web' for public information, 'internal' for the user's knowledge base), "
        "or 'mixed' for all of them."
    )
    parent_id: str | None = Field(
        description="Id of the existing node this refines, or null for a top-level task."
    )


class Plan(BaseModel):
    rationale: str = Field(description="One or two sentences on how the plan covers the gaps.")
    tasks: list[PlannedTask] = Field(description="The new sub-questions to research.")


class Verdict(BaseModel):
    is_complete: bool = Field(description="True if the draft fully answers the question.")
    recommend_more_iterations: bool = Field(
        description="True if another research round would materially improve the answer."
    )
    missing_aspects: list[str] = Field(description="Parts of the question not yet answered.")
    weak_evidence_areas: list[str] = Field(
        description="Claims resting on thin, single or contradictory sources."
    )
    overall_confidence: UnitInterval = Field(description="0.0-1.0 confidence in the draft.")


class SearchQueries(BaseModel):
    queries: list[str] = Field(
        description="1-3 web search queries, each a few keywords, different from those tried"
    )


class BranchNotes(BaseModel):
    notes: str = Field(
        description="Concise findings in markdown. Every factual sentence ends with the "
        "marker(s) of its evidence, e.g. [3] or [1][4]."
    )
    confidence: UnitInterval = Field(
        description="0.0-1.0 confidence that the notes answer the question."
    )
    used_evidence: list[int] = Field(description="Numbers of the evidence passages cited.")


class PlanIssue(BaseModel):
    """Something the plan validator repaired or rejected, and why."""

    task_id: str
    action: Literal["dropped", "repaired"]
    reason: str


class IterationRecord(BaseModel):
    number: int
    planned: list[str] = Field(default_factory=list)
    plan_issues: list[PlanIssue] = Field(default_factory=list)
    verdict: Verdict | None = None
    verdict_refused: str = ""
    """Why the judge's reply was refused (it never validated, e.g. a confidence outside
    0-1, even when asked again): the iteration has no verdict and the run went on as if the
    judge gave none. Empty otherwise."""


class Limits(BaseModel):
    """The run's hard limits, saved with the session (a resume may raise them)."""

    max_iterations: Iterations = 3
    max_total_tokens: TokenBudget = 5_000_000
    max_cost_usd: CostUSD = 20.0
    max_runtime_seconds: RuntimeSeconds = 3600.0

    @classmethod
    def problem(cls, name: str, value: object) -> str | None:
        """Why ``value`` cannot be the limit ``name`` ("must be a finite number"), or None."""
        try:
            cls.model_validate({name: value})
        except ValidationError as exc:
            return str(exc.errors()[0]["msg"]).replace("Input should be", "must be")
        return None


class RunSpec(BaseModel):
    """The run's choices that a resume must repeat (the web job's model, effort and limits).

    Saved with the session so that a resume re-attaches to, and prices, the same kind of job
    it started, whatever the environment says now.
    """

    web_model: str = ""
    web_effort: str = ""
    """The web model's effort."""
    web_max_tool_calls: int = 0
    web_max_output_tokens: int = 0
    web_tier: str = ""
    """The research jobs' service tier (default, flex); "" when the run sends none."""
    models: dict[ChatRole, str] = Field(default_factory=dict)
    """The chat model of each role (planner, synthesizer, judge, branch, summarizer)."""
    efforts: dict[ChatRole, str | None] = Field(default_factory=dict)
    """Each role's reasoning effort (None: the model's default)."""
    kb_name: str = ""
    max_parallel: int = 0
    web_engine: WebEngine | None = None
    """None: a run with no web research."""
    search_provider: str = ""
    preset: str = ""
    """The run preset (quick, standard, deep) its settings started from."""
    scope: WebScope = Field(default_factory=WebScope)
    """Where and when the run reads the web (its ``since`` already a date): a resume reads
    the same window, whatever the day or the environment says."""
    web_research: str = ""
    """How the web engine named itself ("search and read via duckduckgo"); "" when the run
    does not research the web. Set whenever a run starts or resumes."""


class EvidenceSource(BaseModel):
    """What one citation of a finding rests on."""

    ref: str = Field(description="The session's ref of the citation (S#).")
    text: str = Field(
        default="",
        description="The source's own words: the whole cited knowledge-base chunk, or the "
        "verbatim passage a search-and-read branch read; empty when the provider gave none.",
    )
    said: str = Field(
        default="",
        description="For a research job's citation (no source text): the job's own sentence "
        "next to it, what the job said — never evidence that the source says it.",
    )


class EvidenceUnit(BaseModel):
    """One finding of a branch (a sentence or bullet of its notes), with what it rests on.
    Kept in the session's evidence store (``evidence.jsonl``), never in ``state.json``."""

    id: str = Field(description="<node id>.<n>: stable across a resume that reruns the node.")
    node_id: str
    question: str = Field(description="The sub-question the node researched.")
    finding: str = Field(description="The sentence or bullet, with its [S#] markers.")
    refs: list[str] = Field(default_factory=list, description="The refs it cites, in order.")
    sources: list[EvidenceSource] = Field(default_factory=list)


SectionStatus = Literal["pending", "written", "quoted"]
"""A report section: to write; written by the writer; or its best evidence quoted instead
(``SectionPlan.note`` says why: the time limit, a failed call, no model)."""


class SectionPlan(BaseModel):
    """One section of the report's outline, and once written, its text."""

    id: str = Field(description="s1, s2, ... in reading order.")
    title: str
    question: str = Field(description="The question the section answers.")
    node_ids: list[str] = Field(description="The sub-questions whose evidence it draws on.")
    points: list[str] = Field(default_factory=list, description="What the outline plans it says.")
    status: SectionStatus = "pending"
    text: str = Field(default="", description="Its markdown body, citing with [S#] refs.")
    note: str = Field(default="", description="Why its evidence is quoted instead, if it is.")


class Writing(BaseModel):
    """The report being written (its own saved phase): the outline, each section as it is
    written, then the lead. A resume writes only what is not ``written``."""

    covers: list[str] = Field(description="The done nodes the outline was made from.")
    outlined_by: Literal["model", "grouping"] = "model"
    sections: list[SectionPlan]
    lead: str = ""
    lead_status: SectionStatus = "pending"
    lead_note: str = ""

    def stale(self, done: Iterable[str]) -> bool:
        """Whether nodes finished (or were undone) since the outline was made."""
        return set(self.covers) != set(done)


class LedgerEntry(BaseModel):
    """One model call (or cached hit) as the budget sees it."""

    role: Role
    model: str
    node_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    cached: bool = False
    usage_unknown: bool = False
    """The provider reported no usage (a cancelled or failed job): the cost is not known."""
    at: datetime = Field(default_factory=utcnow)


class SessionState(BaseModel):
    """Everything a session needs to resume; written atomically after every change."""

    schema_version: int = 5
    """The format of ``state.json``: written on every save; a session saved with another
    is refused on load (``persistence.sessions``), never read as this one. 5: job ids may
    be in ``jobs.jsonl`` first."""
    session_id: str
    question: str
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    status: RunStatus = "running"
    stop_reason: StopReason | None = None
    stop_detail: str = ""
    mode: Literal["llm", "extractive"] = "llm"
    source_policy: SourcePolicy = "auto"
    iteration: int = 0
    phase: Literal["plan", "execute", "replan", "finished"] = "plan"
    nodes: dict[str, ResearchNode] = Field(default_factory=dict)
    summary: str = ""
    summarized: list[str] = Field(default_factory=list)
    sources: dict[str, Citation] = Field(default_factory=dict)
    evidence_units: int = 0
    """How many units the session's evidence store holds (the units are beside this file)."""
    writing: Writing | None = None
    """The report's outline and sections, once research has ended (or for the judge)."""
    claims: ClaimTotals | None = None
    """The report's claim check, once it ran (``claims.json`` beside this file has it all)."""
    ledger: list[LedgerEntry] = Field(default_factory=list)
    iterations: list[IterationRecord] = Field(default_factory=list)
    report_path: str | None = None
    limits: Limits = Field(default_factory=lambda: Limits())
    run_spec: RunSpec = Field(default_factory=lambda: RunSpec())
    jobs_journaled: int = 0
    """The lines of the session's paid-jobs journal this state already holds: loading
    replays the ones after (``persistence.sessions``)."""
