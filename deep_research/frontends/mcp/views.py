"""The MCP tools' results: typed, so the SDK publishes each tool's output schema."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from deep_research.core.claim_totals import ClaimTotals
from deep_research.core.models import (
    EvidenceUnit,
    NodeStatus,
    RunSpec,
    RunStatus,
    SourceHint,
    StopReason,
)
from deep_research.kb.modes import SCORE_MEANING
from deep_research.persistence.records import SessionSummary


class Started(BaseModel):
    session_id: str
    next: str = Field(
        default="research_follow reports progress until the run ends; research_status polls.",
        description="What to call next.",
    )


class Spend(BaseModel):
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int = 0
    output_tokens: int
    reasoning_tokens: int
    web_search_calls: int
    total_tokens: int
    cost_usd: float


class NodeView(BaseModel):
    id: str
    question: str
    status: NodeStatus
    source_hint: SourceHint
    depends_on: list[str]
    parent_id: str | None
    confidence: float
    cost_usd: float
    error: str | None
    remote_jobs: dict[str, str] = Field(description="Research jobs still running at the provider.")
    researched_by: str


class ResearchStatus(BaseModel):
    """A run's progress: the object ``sessions show --json`` prints."""

    session_id: str
    question: str
    status: RunStatus = Field(
        description="queued (for a team's workers), running, complete, stopped, failed or "
        "interrupted."
    )
    stop_reason: StopReason | None
    created_at: datetime
    iteration: int = Field(description="The plan -> research -> judge round it is in.")
    evidence_units: int = Field(
        default=0, description="Findings in the run's evidence store (read research_evidence)."
    )
    claims: ClaimTotals | None = Field(
        default=None,
        description="The report's claim check, counted by verdict (None: not checked yet).",
    )
    report_path: str | None = Field(description="The report file, once it is written.")
    resume: str | None = Field(
        default=None,
        description="The command that finishes an interrupted run (None for any other).",
    )
    usage: Spend
    run_spec: RunSpec = Field(description="The run's choices (models, engine), kept for resume.")
    nodes: list[NodeView] = Field(description="The research tree's sub-questions.")


class Followed(BaseModel):
    ended: bool = Field(description="False: max_wait_seconds passed first; follow again.")
    events: int = Field(description="Events seen (each was sent as a progress notification).")
    last_event: str = Field(description="The last event's message.")
    status: ResearchStatus


class Report(BaseModel):
    session_id: str
    status: RunStatus
    final: bool = Field(
        description="True: the run's report. False: there is none yet; `markdown` holds the "
        "findings of the sub-questions done so far."
    )
    markdown: str
    nodes_done: int
    nodes_total: int


class CancelledJob(BaseModel):
    node_id: str
    job_id: str
    status: Literal["cancelled", "already_finished", "unreachable"]


class Cancelled(BaseModel):
    session_id: str
    recorded: bool = Field(
        description="The cancelled nodes are recorded (false: another process runs the "
        "session and records them itself)."
    )
    jobs: list[CancelledJob]


class Sessions(BaseModel):
    sessions: list[SessionSummary]


class KbHit(BaseModel):
    chunk_id: str = Field(description="For kb_fetch and verify_claim.")
    root: str = Field(description="The name of the folder the file was ingested from.")
    source: str = Field(description="The file's path in that folder.")
    heading: str
    title: str = Field(
        description="The file's title: its front matter's, else its first heading or its name."
    )
    tags: list[str] = Field(description="The tags of the file's front matter.")
    lines: tuple[int, int]
    score: float = Field(description=SCORE_MEANING)
    text: str
    locator: str


class KbHits(BaseModel):
    hits: list[KbHit]


class SearchResult(BaseModel):
    id: str
    title: str
    url: str


class SearchResults(BaseModel):
    results: list[SearchResult]


class Document(BaseModel):
    id: str
    title: str
    text: str
    url: str
    metadata: dict[str, str]


class EvidencePage(BaseModel):
    total: int = Field(description="Units in the run's evidence store.")
    offset: int
    units: list[EvidenceUnit] = Field(
        description="The page: in the order the sub-questions finished, or best first for a "
        "query. Each is a finding of one sub-question with, for each source it cites, the "
        "source's own text (a KB chunk, a page's passage) or what a research job said."
    )
    damage: str = Field(
        default="", description="What was wrong with the store (damaged lines skipped), if any."
    )
