"""Terminal output: the live tree while a run works, tables, the report. The commands
(``cli``, ``kb_cli``, ``sessions_cli``) print through this module's `PipeConsole` consoles and
``common.print_json`` (their ``--json``); only ``--version``, which must start at once,
prints with ``typer.echo``. Progress goes to stderr, so stdout carries only results (or
JSON).

Questions, errors and progress notes come from models, pages and providers: they are shown
as ``Text``, never read as rich markup (``[link=…]`` would be a hidden link, and an
unmatched ``[/x]`` a crash)."""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from rich.cells import cell_len, set_cell_size
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.live import Live
from rich.segment import Segment
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from deep_research.core.budget import totals
from deep_research.core.models import ResearchNode, SessionState
from deep_research.core.ports import JobEvent
from deep_research.frontends.common import resume_hint
from deep_research.persistence.records import UNPRINTABLE, SessionSummary


class PipeConsole(Console):
    """A console that never prints a control character it did not make itself — questions
    sent over HTTP or MCP, KB documents, pages and model output are shown, never obeyed by
    the terminal — and leaves a closed pipe (``| head -1``) to the CLI's one handler, which
    ends the command quietly with exit 0 (rich's own handler exits 1)."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and UNPRINTABLE.search(segment.text):
                segment = Segment(UNPRINTABLE.sub("", segment.text), segment.style)
            yield segment

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


out = PipeConsole()
err = PipeConsole(stderr=True, soft_wrap=True)  # an error stays one line, however long

STATUS_STYLE = {
    "pending": "dim",
    "running": "bold yellow",
    "done": "green",
    "failed": "bold red",
    "blocked": "red",
    "cancelled": "magenta",
}


@dataclass(frozen=True)
class Frame:
    """What the live view draws: a snapshot taken on the event loop, never changed after.

    rich redraws from its own thread; reading the live session there would race the loop
    that changes it (a "deque mutated during iteration" froze the display)."""

    session_id: str
    iteration: int
    cost_usd: float
    tokens: int
    nodes: tuple[ResearchNode, ...]
    jobs: Mapping[str, JobEvent]
    received: Mapping[str, float]
    """When each job's last event arrived (monotonic): its age ticks on between polls."""
    events: tuple[str, ...]


class LiveView:
    """A rich ``Live`` over a session: each event (on the loop) pushes a new ``Frame``, and
    rich's refresh thread draws the latest one a few times a second."""

    def __init__(self, state: SessionState, max_events: int = 6) -> None:
        self.state = state
        self._events: deque[str] = deque(maxlen=max_events)
        self._jobs: dict[str, JobEvent] = {}
        self._received: dict[str, float] = {}
        self._started = time.monotonic()
        self._requeued: dict[str, ResearchNode] = {}
        """Nodes last seen running, pending since: Ctrl-C's, once the run is interrupted."""
        self.frame = self._snapshot()

    def event(self, message: str | JobEvent) -> None:
        """Record ``message`` and push a new frame. Called on the event loop only."""
        if isinstance(message, JobEvent):
            self._jobs[message.node_id] = message
            self._received[message.node_id] = time.monotonic()
            if message.note:
                self._events.append(f"{message.node_id}: {message.note}")
        else:
            self._events.append(message)
        self.frame = self._snapshot()

    def refresh(self) -> None:
        """A new frame from the session as it is now (the last frame shows the final totals)."""
        self.frame = self._snapshot()

    def _snapshot(self) -> Frame:
        state = self.state
        spend = totals(state.ledger)
        # Shallow copies: the table reads only their scalar fields.
        nodes = tuple(node.model_copy() for node in state.nodes.values())
        if hasattr(self, "frame"):
            nodes = self._as_seen(nodes)
        return Frame(
            session_id=state.session_id,
            iteration=state.iteration,
            cost_usd=spend.cost_usd,
            tokens=spend.usage.total_tokens,
            nodes=nodes,
            jobs=MappingProxyType(dict(self._jobs)),
            received=MappingProxyType(dict(self._received)),
            events=tuple(self._events),
        )

    def _as_seen(self, nodes: tuple[ResearchNode, ...]) -> tuple[ResearchNode, ...]:
        """``nodes``, except that once the run is interrupted a node Ctrl-C put back in the
        queue (saved as pending, for a resume) shows as the user last saw it: running."""
        before = {node.id: node for node in self.frame.nodes}
        for node in nodes:
            seen = before.get(node.id)
            if node.status != "pending":
                self._requeued.pop(node.id, None)
            elif seen is not None and seen.status == "running":
                self._requeued[node.id] = seen
        if self.state.status != "interrupted":
            return nodes
        return tuple(self._requeued.get(n.id, n) if n.status == "pending" else n for n in nodes)

    def __rich__(self) -> Group:
        frame = self.frame  # one read: everything below draws the same snapshot
        elapsed = time.monotonic() - self._started
        header = Text.assemble(
            ("deep-research ", "bold"),
            (f"{frame.session_id} ", "cyan"),
            f"· iteration {frame.iteration} · {elapsed:,.0f}s · ",
            (f"${frame.cost_usd:.4f}", "bold"),
            f" · {frame.tokens:,} tokens",
        )
        now = time.monotonic()
        ages = {node: now - at for node, at in frame.received.items()}
        table = node_table(frame.nodes, frame.jobs, ages)
        # Whole, wrapped: the err console soft-wraps, which a Live would crop at its width.
        events = (Text(f"  {e}", style="dim", no_wrap=False, overflow="fold") for e in frame.events)
        return Group(header, table, *events)


def job_state(event: JobEvent, since: float = 0.0) -> str:
    """``in_progress 12m05s · 41 polls``: a long job, visibly alive (``since``: seconds since
    the event arrived, so the age ticks on between polls)."""
    if not event.job_id:  # not a remote job: a branch saying what it does
        return event.status
    minutes, seconds = divmod(int(event.elapsed_seconds + since), 60)
    took = f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    polls = "1 poll" if event.polls == 1 else f"{event.polls} polls"
    return f"{event.status} {took} · {polls}"


def node_table(
    nodes: Iterable[ResearchNode], jobs: Mapping[str, JobEvent], ages: Mapping[str, float]
) -> Table:
    """The live view's table: a running node's time ticks on, with its job's state."""
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for column in ("id", "status", "source", "time", "cost", "remote job", "question"):
        table.add_column(column, no_wrap=column != "question", overflow="ellipsis")
    now = datetime.now().astimezone()
    for node in sorted(nodes, key=lambda n: n.created_at):
        if node.started_at is None:
            took = ""
        else:
            end = node.finished_at or (now if node.status == "running" else node.started_at)
            took = f"{(end - node.started_at).total_seconds():,.0f}s"
        question = Text(node.question)
        if node.error:
            question.append(f" ({node.error})", style="red")
        table.add_row(
            Text(node.id),
            Text(node.status, style=STATUS_STYLE[node.status]),
            node.source_hint,
            took,
            f"${node.cost_usd:.4f}" if node.cost_usd else "",
            Text(
                job_state(jobs[node.id], ages.get(node.id, 0.0))
                if node.id in jobs and node.status == "running"
                else ""
            ),
            question,
        )
    return table


@contextmanager
def live_view(state: SessionState, *, enabled: bool) -> Iterator[LiveView]:
    view = LiveView(state)
    if not enabled:
        yield view
        return
    with Live(view, console=err, refresh_per_second=4, transient=False):
        try:
            yield view
        finally:
            view.refresh()  # the last frame drawn holds the final status and totals


def report(markdown: str) -> None:
    """Markdown on stdout: rendered on a terminal, as written when piped."""
    if out.is_terminal:
        from rich.markdown import Markdown  # markdown-it: only when a report is shown

        out.print(Markdown(markdown))
    else:
        out.print(markdown, markup=False, highlight=False, soft_wrap=True)


QUESTION_ROOM = 40
"""Terminal cells ``sessions list`` keeps for the question before it shortens the other
columns (a status without its stop reason, a date without its year)."""


def sessions_table(rows: list[SessionSummary]) -> None:
    """One line a session at any width: the question is cut to fit, never wrapped; on a
    narrow terminal the status loses its stop reason and the date its year first."""
    header = ("id", "created", "status", "nodes", "cost", "question")
    questions = [" ".join((row.question or row.error or "").split()) for row in rows]
    wanted = min(QUESTION_ROOM, max(map(cell_len, [header[-1], *questions])))
    for short in (False, True):
        shown = zip(rows, questions, strict=True)
        cells = [header] + [_session_cells(r, q, short=short) for r, q in shown]
        widths = [max(cell_len(cell[i]) for cell in cells) for i in range(len(header) - 1)]
        room = out.width - sum(widths) - 2 * len(widths)
        if room >= wanted:
            break
    room = max(room, 12)
    for index, cell in enumerate(cells):
        # Terminal cells, not characters: a CJK character takes two.
        question = cell[-1]
        if cell_len(question) > room:
            question = set_cell_size(question, room - 1) + "…"
        line = Text("  ".join(set_cell_size(c, w) for c, w in zip(cell, widths, strict=False)))
        line.append("  " + question)
        if index == 0:
            line.stylize("bold")
        out.print(line, no_wrap=True, overflow="ignore", crop=False)


def _session_cells(row: SessionSummary, question: str, *, short: bool) -> tuple[str, ...]:
    when = row.created_at.astimezone().strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M")
    status: str = row.status
    before = row.status in ("queued", "running")  # a stop reason there is a past run's
    if not short and not before and row.stop_reason not in (None, row.status):
        status = f"{row.status} ({row.stop_reason})"
    nodes = f"{row.nodes_done}/{row.nodes_total}"
    return (row.session_id, when, status, nodes, f"${row.cost_usd:.4f}", question)


def session_detail(state: SessionState, report_path: str | None) -> None:
    spend = totals(state.ledger)
    out.print(Text.assemble(("question: ", "bold"), state.question))
    before = state.status in ("queued", "running")  # a stop reason there is a past run's
    stop = (
        f" ({state.stop_reason}: {state.stop_detail})" if state.stop_reason and not before else ""
    )
    out.print(Text.assemble(("status:   ", "bold"), f"{state.status}{stop}"))
    if state.run_spec.preset:
        out.print(Text.assemble(("preset:   ", "bold"), state.run_spec.preset))
    out.print(
        Text.assemble(
            ("spend:    ", "bold"),
            f"${spend.cost_usd:.4f} · {spend.usage.input_tokens:,} in / "
            f"{spend.usage.output_tokens:,} out · {spend.usage.web_search_calls} web searches",
        )
    )
    # Never wrapped: a path is copied whole from the terminal.
    where = Text.assemble(("report:   ", "bold"), report_path or "(not written yet)")
    out.print(where, soft_wrap=True)
    if hint := resume_hint(state):
        out.print(Text.assemble(("resume:   ", "bold"), hint), soft_wrap=True)
    if state.claims is not None:
        counts = ", ".join(f"{n} {verdict}" for verdict, n in state.claims.by_verdict.items())
        shown = f"{state.claims.claims}: {counts}" if state.claims.claims else "none"
        out.print(Text.assemble(("claims:   ", "bold"), shown))
    tree = Tree(Text("research tree", style="bold"))
    branches: dict[str, Tree] = {}
    for node in sorted(state.nodes.values(), key=lambda n: (n.depth, n.created_at)):
        parent = branches.get(node.parent_id or "", tree)
        deps = f" ← {', '.join(node.depends_on)}" if node.depends_on else ""
        label = Text.assemble(
            (f"{node.id} ", "cyan"),
            (f"[{node.status}] ", STATUS_STYLE[node.status]),
            f"{node.question} ({node.source_hint}{deps})",
        )
        if node.researched_by:
            label.append(f" · {node.researched_by}", style="dim")
        if node.remote_jobs:
            label.append(f" · research job {', '.join(node.remote_jobs.values())}", style="yellow")
        if node.error:
            label.append(f" — {node.error}", style="red")
        branches[node.id] = parent.add(label)
    out.print(tree)


class Progress:
    """Progress as plain lines (stderr is not a terminal): messages, and each remote job's
    status when it changes — not every poll."""

    def __init__(self) -> None:
        self._last: dict[str, str] = {}

    def __call__(self, message: str | JobEvent) -> None:
        if not isinstance(message, JobEvent):
            info(message)
            return
        if message.note:
            info(f"{message.node_id}: {message.note}")
        if message.job_id and self._last.get(message.node_id) != message.status:
            self._last[message.node_id] = message.status
            info(f"{message.node_id}: research job {message.job_id} {job_state(message)}")


def interactive() -> bool:
    """A person at a terminal who can answer a question."""
    return err.is_terminal and sys.stdin.isatty()


def warn(message: str) -> None:
    err.print(Text(f"warning: {' '.join(message.split())}", style="yellow"))


def info(message: str) -> None:
    err.print(message, markup=False, highlight=False)


def error(message: str) -> None:
    err.print(Text(f"error: {' '.join(message.split())}", style="bold red"))
