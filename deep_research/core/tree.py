"""The research tree: a DAG of ``ResearchNode`` over the session's node dict.

Invariants (kept by every method here, relied on by the scheduler):
- every id in a node's ``depends_on`` names a node of the tree, and dependencies are acyclic;
- ``depth`` is 1 for a top-level sub-question and parent depth + 1 below it, never past
  ``max_depth``;
- a node is *ready* when it is pending and all its dependencies are done;
- when a node fails or is blocked, every pending node that transitively depends on it is
  blocked, with the reason naming the node it waited for.

A plan from a model is untrusted input: ``add_plan`` validates it first and records what
it repaired or dropped, so a malformed or hostile plan never reaches the tree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from deep_research.core.models import PlanIssue, PlannedTask, ResearchNode, SourceHint, utcnow
from deep_research.core.words import question_words, same_question

MAX_QUESTION_CHARS = 2000
MIN_QUESTION_WORDS = 3
"""A sub-question has at least this many words (see `question_words`): "[4]", "10/23" or
"—" from a small model is a marker, a number or punctuation, not something to research."""
_ID_RE = re.compile(r"[^A-Za-z0-9_.-]+")
UNDONE = ("failed", "blocked", "cancelled")
"""Statuses of a node that will not be done unless the user retries it."""


@dataclass(frozen=True)
class PlanPolicy:
    max_depth: int
    max_tasks: int
    allowed_sources: tuple[SourceHint, ...] = ("web", "internal", "mixed")
    min_words: int = MIN_QUESTION_WORDS
    """Fewer words than this and a task is dropped (0 for the user's own question)."""
    question: str = ""
    """The user's question: a task asking the same (`same_question`) is dropped, since the
    run's answer already is its section ("" keeps every task: the question's own fallback)."""


class ResearchTree:
    def __init__(self, nodes: dict[str, ResearchNode]) -> None:
        # Shared with the session state on purpose: the tree mutates what gets checkpointed.
        self.nodes = nodes

    def ready(self) -> list[ResearchNode]:
        """Pending nodes whose dependencies are all done, most urgent first."""
        ready = [
            n
            for n in self.nodes.values()
            if n.status == "pending" and all(self.nodes[d].status == "done" for d in n.depends_on)
        ]
        return sorted(ready, key=schedule_key)

    def with_status(self, *statuses: str) -> list[ResearchNode]:
        return [n for n in self.nodes.values() if n.status in statuses]

    def start(self, node: ResearchNode) -> None:
        node.status = "running"
        node.started_at = utcnow()
        node.error = None

    def finish(self, node: ResearchNode) -> None:
        node.status = "done"
        node.finished_at = utcnow()

    def fail(self, node: ResearchNode, reason: str) -> list[str]:
        """Mark ``node`` failed and block its dependents; returns the ids blocked."""
        node.status = "failed"
        node.error = reason
        node.finished_at = utcnow()
        return self.block_dependents(node.id)

    def cancel(self, node: ResearchNode, reason: str) -> list[str]:
        """The user cancelled ``node`` (its remote job); a resume leaves it alone unless asked.

        Its dependents are blocked, as for a failure."""
        node.status = "cancelled"
        node.error = reason
        node.finished_at = utcnow()
        node.remote_jobs.clear()
        return self.block_dependents(node.id)

    def retry_cancelled(self) -> list[str]:
        """``resume --retry-cancelled``: cancelled nodes, and those they blocked, go back to
        pending."""
        return self._retry(self.with_status("cancelled"))

    def retry_lost(self) -> list[str]:
        """``resume --resubmit-lost``: every node whose paid create may have started a job
        with a lost id forgets that intent (its next create pays for a new job); those that
        failed for it, and those they blocked, go back to pending. Returns the nodes."""
        lost = [node for node in self.nodes.values() if node.job_intents]
        for node in lost:
            node.job_intents.clear()
        self._retry([node for node in lost if node.status == "failed"])
        return [node.id for node in lost]

    def _retry(self, nodes: list[ResearchNode]) -> list[str]:
        for node in nodes:
            self.requeue(node)
            node.error = None
        retried = [n.id for n in nodes]
        for node in self.with_status("blocked"):
            if node.error and any(f"depends on {nid} " in node.error for nid in retried):
                node.status, node.error = "pending", None
        return retried

    def block_dependents(self, node_id: str) -> list[str]:
        blocked: list[str] = []
        frontier = [node_id]
        while frontier:
            current = frontier.pop()
            for dependent in self.nodes.values():
                if current not in dependent.depends_on or dependent.status != "pending":
                    continue
                dependent.status = "blocked"
                dependent.error = f"blocked: depends on {current} ({self.nodes[current].status})"
                blocked.append(dependent.id)
                frontier.append(dependent.id)
        return blocked

    def requeue(self, node: ResearchNode) -> None:
        """Put an interrupted node back in the queue; its remote jobs are kept for re-attach."""
        node.status = "pending"
        node.started_at = None

    def recover_interrupted(self) -> list[str]:
        """After a crash: nodes left running go back to pending (they never finished)."""
        interrupted = self.with_status("running")
        for node in interrupted:
            self.requeue(node)
        return [n.id for n in interrupted]

    def add_plan(
        self, tasks: Iterable[PlannedTask], *, iteration: int, policy: PlanPolicy
    ) -> tuple[list[str], list[PlanIssue]]:
        """Validate ``tasks`` and add the survivors; returns (added ids, issues)."""
        nodes, issues = validate_plan(list(tasks), self.nodes, iteration=iteration, policy=policy)
        for node in nodes:
            self.nodes[node.id] = node
            if node.parent_id is not None:
                self.nodes[node.parent_id].children.append(node.id)
        return [n.id for n in nodes], issues


def schedule_key(node: ResearchNode) -> tuple[int, int, str]:
    return (-node.priority, node.depth, node.created_at.isoformat())


def validate_plan(
    tasks: list[PlannedTask],
    existing: Mapping[str, ResearchNode],
    *,
    iteration: int,
    policy: PlanPolicy,
) -> tuple[list[ResearchNode], list[PlanIssue]]:
    """Turn untrusted planned tasks into nodes that keep every tree invariant.

    Repairs what has an obvious fix (ids, unknown or self dependencies, cycles, parents,
    source hints, priorities) and drops what has none (questions of fewer than
    ``policy.min_words`` words: markers, numbers, punctuation, nothing; the user's question
    asked again, ``policy.question``, unless the plan asks nothing else, when its first
    asking is kept; what an earlier task or a node done or on its way asks already: who
    depended on it depends on that twin; too deep; over the per-plan cap). Every change is
    reported as a ``PlanIssue``.
    """
    issues: list[PlanIssue] = []

    def note(task_id: str, action: Literal["dropped", "repaired"], reason: str) -> None:
        issues.append(PlanIssue(task_id=task_id or "?", action=action, reason=reason))

    # 1. questions and ids
    kept: list[PlannedTask] = []
    renamed: dict[str, str] = {}
    taken = set(existing)
    # A plan that only asks the question again researches it once, as asked: one node.
    restating = not any(
        _asks(t, policy) and not same_question(t.question, policy.question) for t in tasks
    )
    for index, task in enumerate(tasks):
        question = " ".join(task.question.split())
        if not question:
            note(task.id, "dropped", "empty question")
            continue
        if (words := question_words(question)) < policy.min_words:
            shown = question if len(question) <= 40 else question[:39] + "…"
            note(task.id, "dropped", f"not a question: {shown!r} has {words} word(s)")
            continue
        if same_question(question, policy.question) and not (restating and not kept):
            note(task.id, "dropped", "the question itself: the answer is its section")
            continue
        if twin := _asked_already(question, kept, existing):
            note(task.id, "dropped", f"asks what {twin} asks")
            renamed.setdefault(task.id, twin)  # who depends on it depends on its twin
            continue
        if len(question) > MAX_QUESTION_CHARS:
            question = question[:MAX_QUESTION_CHARS]
            note(task.id, "repaired", f"question truncated to {MAX_QUESTION_CHARS} characters")
        raw_id = _ID_RE.sub("-", task.id.strip())[:40].strip("-")
        new_id = raw_id or f"i{iteration}-{index + 1}"
        if new_id in taken:
            base, n = new_id, 2
            while f"{base}-{n}" in taken:
                n += 1
            new_id = f"{base}-{n}"
            note(task.id, "repaired", f"duplicate id renamed to {new_id}")
        taken.add(new_id)
        if task.id not in renamed:
            renamed[task.id] = new_id
        kept.append(task.model_copy(update={"id": new_id, "question": question}))

    if len(kept) > policy.max_tasks:
        ranked = sorted(kept, key=lambda t: -t.priority)
        for task in ranked[policy.max_tasks :]:
            note(task.id, "dropped", f"over the limit of {policy.max_tasks} tasks per plan")
        keep_ids = {t.id for t in ranked[: policy.max_tasks]}
        kept = [t for t in kept if t.id in keep_ids]

    new_ids = {t.id for t in kept}

    def resolve(ref: str) -> str | None:
        ref = ref.strip()
        if ref in renamed and (renamed[ref] in new_ids or renamed[ref] in existing):
            return renamed[ref]
        if ref in existing:
            return ref
        return None

    # 2. dependencies: known, not self, not on failed work
    deps: dict[str, list[str]] = {}
    for task in kept:
        clean: list[str] = []
        for ref in task.depends_on:
            target = resolve(ref)
            if target is None:
                note(task.id, "repaired", f"unknown dependency {ref!r} removed")
            elif target == task.id:
                note(task.id, "repaired", "dependency on itself removed")
            elif target in existing and (status := existing[target].status) in UNDONE:
                note(task.id, "repaired", f"dependency on {status} node {target} removed")
            elif target not in clean:
                clean.append(target)
        deps[task.id] = clean

    # 3. cycles among the new tasks (existing nodes are acyclic and never depend on new ones)
    for task_id, edge in _cycle_edges(deps, new_ids):
        deps[task_id].remove(edge)
        note(task_id, "repaired", f"dependency on {edge} removed to break a cycle")

    # 4. parents, depth, sources, priority
    nodes: list[ResearchNode] = []
    depth_of: dict[str, int] = {}
    for task in kept:
        parent = resolve(task.parent_id) if task.parent_id else None
        if task.parent_id and (parent is None or parent not in existing):
            note(task.id, "repaired", f"unknown parent {task.parent_id!r}; made top-level")
            parent = None
        depth = existing[parent].depth + 1 if parent else 1
        if depth > policy.max_depth:
            note(task.id, "dropped", f"depth {depth} is past max_depth {policy.max_depth}")
            continue
        source = task.source_hint
        if source not in policy.allowed_sources:
            source = policy.allowed_sources[0]
            note(task.id, "repaired", f"source {task.source_hint!r} not allowed; using {source!r}")
        depth_of[task.id] = depth
        nodes.append(
            ResearchNode(
                id=task.id,
                parent_id=parent,
                question=task.question,
                depth=depth,
                depends_on=deps[task.id],
                parallelizable=task.parallelizable,
                priority=max(0, min(10, task.priority)),
                source_hint=source,
                iteration=iteration,
            )
        )

    # 5. dependencies on dropped tasks go too
    surviving = {n.id for n in nodes} | set(existing)
    for node in nodes:
        for dep in [d for d in node.depends_on if d not in surviving]:
            node.depends_on.remove(dep)
            note(node.id, "repaired", f"dependency on dropped task {dep} removed")
    return nodes, issues


def _asked_already(
    question: str, kept: list[PlannedTask], existing: Mapping[str, ResearchNode]
) -> str | None:
    """The id of a task kept before, or of a node that is done or on its way, that asks
    ``question`` (`same_question`): researching it twice pays twice for one section. A node
    that failed, was blocked or cancelled is no twin: asking again is a retry."""
    for task in kept:
        if same_question(question, task.question):
            return task.id
    for node in existing.values():
        if node.status in ("pending", "running", "done") and same_question(question, node.question):
            return node.id
    return None


def _asks(task: PlannedTask, policy: PlanPolicy) -> bool:
    """Whether ``task`` has a question the policy lets through (step 1's first checks)."""
    return question_words(task.question) >= max(1, policy.min_words)


def _cycle_edges(deps: dict[str, list[str]], new_ids: set[str]) -> list[tuple[str, str]]:
    """Back edges of a DFS over the new tasks: removing them leaves the graph acyclic."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(new_ids, white)
    back: list[tuple[str, str]] = []
    for start in sorted(new_ids):
        if color[start] != white:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        color[start] = grey
        while stack:
            node, i = stack[-1]
            edges = [d for d in deps.get(node, []) if d in new_ids]
            if i < len(edges):
                stack[-1] = (node, i + 1)
                target = edges[i]
                if color[target] == grey:
                    back.append((node, target))
                elif color[target] == white:
                    color[target] = grey
                    stack.append((target, 0))
            else:
                color[node] = black
                stack.pop()
    return back
