"""What a research job is asked: the developer instructions (``prompts/deep_research.md``)
and the user message built from the node, its question and its dependencies' findings."""

from __future__ import annotations

from importlib.resources import files

from deep_research.core.ports import BranchTask, Finding
from deep_research.core.scope import WebScope

MAX_DEPENDENCY_CHARS = 10_000
"""Room for all dependencies' findings together, split evenly: the prompt never grows
with the number of nodes."""
MAX_QUESTION_CHARS = 2_000


def scope_limits(scope: WebScope) -> str:
    """The sentences that ask for what OpenAI's ``web_search`` cannot be told; "" if none."""
    said = []
    if scope.since is not None:
        said.append(f"Use only pages published on or after {scope.since.isoformat()}.")
    if scope.exclude_domains:
        said.append(f"Never use or cite pages on: {', '.join(scope.exclude_domains)}.")
    return " ".join(said)


def load_instructions() -> str:
    path = files("deep_research").joinpath("prompts/deep_research.md")
    return path.read_text(encoding="utf-8").strip()


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 14)].rstrip() + " …[truncated]"


def _render_finding(finding: Finding, limit: int) -> str:
    head = f"### {_clip(finding.question, 300)}\n"
    lines = [
        _clip(f"[{c.ref or i}] {c.title or c.locator} — {c.url or c.locator}", 200)
        for i, c in enumerate(finding.citations, 1)
    ]
    sources = _clip("\n".join(lines), limit // 3) if lines else "(none)"
    notes = _clip(finding.notes, max(0, limit - len(head) - len(sources) - 14))
    return _clip(f"{head}{notes}\nSources:\n{sources}", limit)


def build_user_message(task: BranchTask, scope: WebScope | None = None) -> str:
    """The job's request. What of ``scope`` OpenAI has no field for (a date, excluded
    domains: ``JobSpec``) is asked for in words; what the job cites outside it anyway is
    dropped when its result is read."""
    parts = [
        f"Sub-question to research:\n{_clip(task.question, MAX_QUESTION_CHARS)}",
        "It is part of this larger question (context only):\n"
        + _clip(task.root_question, MAX_QUESTION_CHARS),
    ]
    if scope is not None and (limits := scope_limits(scope)):
        parts.append(limits)
    if task.dependencies:
        share = MAX_DEPENDENCY_CHARS // len(task.dependencies)
        findings = "\n\n".join(_render_finding(f, share) for f in task.dependencies)
        parts.append(f"Findings of earlier research this builds on:\n\n{findings}")
    return "\n\n".join(parts)
