"""`deep-research kb ingest|search|stats|list|rm`: the markdown knowledge base.

Each command imports what it uses in its body (see ``cli``)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deep_research.core import markdown as md
from deep_research.core.errors import KnowledgeBaseError, UsageError
from deep_research.frontends.common import JsonOpt, hit_json, print_json
from deep_research.kb.modes import SCORE_MEANING, Mode

if TYPE_CHECKING:  # imported inside the commands: Chroma and numpy load in seconds
    from rich.progress import Progress, TaskID

    from deep_research.app.config import Settings
    from deep_research.kb.ingest import IngestProgress, IngestReport
    from deep_research.kb.store import KBRoot

SNIPPET_CHARS = 240

kb_app = typer.Typer(
    help="The markdown knowledge base: ingest, search, stats, list, rm.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

KbOpt = Annotated[
    str | None,
    typer.Option("--kb", help="Knowledge base name (default: DEEP_RESEARCH_KB_NAME, 'default')."),
]


def _console(*, stderr: bool = False) -> Console:
    """Results on stdout, progress and notes on stderr; a closed pipe ends the command
    quietly, as everywhere."""
    from deep_research.frontends.render import PipeConsole

    return PipeConsole(stderr=stderr, highlight=False, soft_wrap=True)


@kb_app.command("ingest")
def ingest_command(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Folder of your markdown files.")],
    kb: KbOpt = None,
    root_name: Annotated[
        str | None,
        typer.Option(
            "--as",
            help="The name of this folder in the KB and in citations (default: its own name).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Index the markdown files under PATH (incremental: unchanged files are skipped).

    A KB can hold several folders; each is known by its name, so `docs/README.md` and
    `notes/README.md` are two files, and re-ingesting one folder never touches another.
    """
    from deep_research.app.loading import load_settings
    from deep_research.kb.catalog import open_kb
    from deep_research.kb.ingest import check_root_name, ingest

    settings = load_settings()
    if not path.is_dir():  # before creating anything
        raise UsageError(f"not a directory: {path}")
    if root_name is not None:
        check_root_name(root_name)
    store = open_kb(settings.kb, kb, create=True)
    from rich import progress

    columns = (
        progress.TextColumn("[progress.description]{task.description}"),
        progress.BarColumn(),
        progress.MofNCompleteColumn(),
        progress.TimeElapsedColumn(),
    )
    with progress.Progress(*columns, console=_console(stderr=True), transient=True) as bar:
        report = ingest(store, path, name=root_name, progress=_ProgressBar(bar))
    if as_json:
        print_json(report.summary())
    else:
        _print_report(report)


class _ProgressBar:
    """An ingest's progress as two rows: files read, then chunks embedded (the slow part)."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.files = bar.add_task("reading", total=None)
        self.chunks: TaskID | None = None  # added when the first chunk embeds: its clock too

    def __call__(self, state: IngestProgress) -> None:
        reading = state.files_done < state.files_total
        self.bar.update(
            self.files,
            completed=state.files_done,
            total=state.files_total,
            description=state.current if reading and state.current else "files read",
        )
        if self.chunks is None and (state.chunks_done or not reading) and state.chunks_total:
            self.chunks = self.bar.add_task("embedding chunks", total=state.chunks_total)
        if self.chunks is not None:
            self.bar.update(self.chunks, completed=state.chunks_done, total=state.chunks_total)


def _print_report(report: IngestReport) -> None:
    title = f"kb {report.kb!r} <- {report.root} (as {report.root_name!r})"
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, count in (
        ("added", len(report.added)),
        ("updated", len(report.updated)),
        ("unchanged", len(report.unchanged)),
        ("removed", len(report.removed)),
        ("skipped", len(report.skipped)),
        ("chunks written", report.chunks),
        ("chunks in kb", report.total_chunks),
        ("seconds", round(report.seconds, 2)),
    ):
        table.add_row(label, str(count))
    console = _console()
    console.print(table)
    for skipped in report.skipped:
        console.print(f"skipped {skipped.path}: {skipped.reason}", markup=False)


@kb_app.command("search", epilog=SCORE_MEANING)
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("-k", "--top", min=1, max=100, help="How many chunks.")] = 8,
    kb: KbOpt = None,
    mode: Annotated[Mode, typer.Option("--mode", help="Ranker(s) to use.")] = "hybrid",
    mmr: Annotated[bool, typer.Option("--mmr", help="Diversify results (MMR).")] = False,
    path: Annotated[
        str | None, typer.Option("--path", help="Only files matching this glob or folder.")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", metavar="TAG", help="Only files with this tag (repeatable)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Search the knowledge base; prints ranked chunks with their source, lines and score,
    and the file's front-matter title and tags."""
    from deep_research.app.loading import load_settings
    from deep_research.kb.catalog import open_kb
    from deep_research.kb.chunking import make_anchor
    from deep_research.kb.search import search

    settings = load_settings()
    store = open_kb(settings.kb, kb)
    hits = search(store, query, k=k, mode=mode, mmr=mmr, path_glob=path, tags=tag)
    if as_json:
        print_json([hit_json(hit) for hit in hits])
        return
    console = _console()
    if not hits:
        console.print("no matches")
        return
    for rank, hit in enumerate(hits, start=1):
        anchor = make_anchor(hit.root, hit.source, hit.heading)
        console.print(
            f"[bold]{rank}. {escape(anchor)}[/bold]  "
            f"lines {hit.start_line}-{hit.end_line}  score {hit.score:.4f}"
        )
        about = " · ".join(
            part for part in (hit.title, " ".join(f"#{tag}" for tag in hit.tags)) if part
        )
        if about:
            console.print(f"   {about}", markup=False, style="dim")
        console.print(f"   {md.clip(hit.text, SNIPPET_CHARS)}", markup=False)


@kb_app.command("stats")
def stats_command(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """Files, chunks, embedding model and size on disk of a knowledge base."""
    from deep_research.app.loading import load_settings
    from deep_research.kb.catalog import open_kb

    settings = load_settings()
    stats = open_kb(settings.kb, kb).stats()
    if as_json:
        print_json(asdict(stats))
        return
    table = Table(title=f"kb {stats.name!r}", show_header=False)
    table.add_column("what")
    table.add_column("value")
    table.add_row("location", stats.location)
    table.add_row("files", str(stats.files))
    table.add_row("chunks", str(stats.chunks))
    for root in stats.roots:
        where = root.path or "(folder not recorded: re-ingest it)"
        table.add_row(f"root {root.name!r}", f"{where}  ({root.files} files)")
    table.add_row("embedding model", stats.embedding_model)
    table.add_row("size on disk", f"{stats.size_bytes / 1_000_000:.1f} MB")
    _console().print(table)


@kb_app.command("list")
def list_command(as_json: JsonOpt = False) -> None:
    """The named knowledge bases and the folders ingested into each."""
    from deep_research.app.loading import load_settings
    from deep_research.kb.catalog import kb_roots, list_kbs

    settings = load_settings()
    names = list_kbs(settings.kb)
    roots: dict[str, tuple[KBRoot, ...]] = {}
    problems: dict[str, str] = {}  # a KB that cannot be read is listed, with why
    for name in names:
        try:
            roots[name] = kb_roots(settings.kb, name)
        except KnowledgeBaseError as exc:
            roots[name], problems[name] = (), str(exc)
    if as_json:
        print_json(
            [
                {
                    "name": name,
                    "default": name == settings.kb_name,
                    "roots": [asdict(root) for root in roots[name]],
                    **({"error": problems[name]} if name in problems else {}),
                }
                for name in names
            ]
        )
        return
    console = _console()
    for name in names:
        marker = "  (default)" if name == settings.kb_name else ""
        console.print(f"{name}{marker}", markup=False)
        if name in problems:
            console.print(f"  cannot be read: {problems[name]}", markup=False)
        for root in roots[name]:
            console.print(
                f"  {root.name}  {root.path or '(folder not recorded)'}  ({root.files} files)",
                markup=False,
            )
    if not names:
        console.print("no knowledge bases yet: run `deep-research kb ingest PATH`", markup=False)


@kb_app.command("rm")
def rm_command(
    name: Annotated[
        str | None, typer.Argument(help="KB to delete (default: DEEP_RESEARCH_KB_NAME's).")
    ] = None,
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            help="Drop only this folder (its name in `kb list`, or its path) from the KB.",
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a knowledge base, or with --root one folder of it (the index only; your markdown
    files are not touched). Refused while another process is ingesting into it."""
    from deep_research.app.loading import load_settings
    from deep_research.kb.catalog import list_kbs, missing_kb, remove_kb

    settings = load_settings()
    target = name or settings.kb_name
    if target not in list_kbs(settings.kb):
        raise missing_kb(settings.kb, target)
    if root is not None:
        _remove_root(settings, target, root, yes=yes)
        return
    if not yes and not typer.confirm(f"delete knowledge base {target!r}?", err=True):
        raise typer.Abort()
    remove_kb(settings.kb, target)
    _console(stderr=True).print(f"removed knowledge base {target!r}", markup=False)


def _remove_root(settings: Settings, kb: str, root: str, *, yes: bool) -> None:
    from deep_research.kb.catalog import open_kb
    from deep_research.kb.ingest import find_root, remove_root

    store = open_kb(settings.kb, kb)
    found = find_root(store.load_manifest(), kb, root)  # before asking: a typo fails at once
    if not yes and not typer.confirm(f"drop root {found!r} from knowledge base {kb!r}?", err=True):
        raise typer.Abort()
    removed = remove_root(store, found)
    _console(stderr=True).print(
        f"dropped root {removed.root!r} ({removed.files} files, {removed.chunks} chunks) "
        f"from knowledge base {kb!r}",
        markup=False,
    )
