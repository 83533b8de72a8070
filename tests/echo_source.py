"""Sources as a plugin package writes them (``app/sources.py``): each a ``Source`` value its
entry point names. ``ECHO`` answers every sub-question with a page of its own that repeats
it; ``TOY_WEB`` researches the web the same way; ``COSTLY`` is dear."""

from __future__ import annotations

from deep_research.app.sources import Executor, Source, SourceRun, WorstCase
from deep_research.core.models import Citation
from deep_research.core.ports import BranchResult, BranchTask, Meter, RemoteJobHook

ASKED: dict[str, list[str]] = {}
"""The questions each site was asked, by site: what the tests read back."""


class EchoExecutor:
    def __init__(self, site: str) -> None:
        self.site = site

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        ASKED.setdefault(self.site, []).append(task.question)
        page = Citation(
            kind="web",
            url=f"https://{self.site}/{task.node_id}",
            title=f"{self.site} on {task.node_id}",
            quote=f"{self.site} repeats the question: {task.question}",
        )
        return BranchResult(f"{self.site} has a page on it [1].", (page,), 0.8, self.site)


def _echo(run: SourceRun) -> Executor:
    return Executor(EchoExecutor("echo.example"))


ECHO = Source(
    name="echo",
    serves="echo",
    title="echo pages",
    description="pages that repeat the question back",
    build=_echo,
    needs_model=True,
)

TOY_WEB = Source(
    name="toy",
    serves="web",
    title="web",
    build=lambda run: Executor(EchoExecutor("toy.example")),
    worst_case=lambda settings, prices, chat, spec: WorstCase(0.0, "toy pages, free", "toy branch"),
    describe=lambda settings, spec: "the toy engine",
)

COSTLY = Source(
    name="costly",
    serves="costly",
    title="paid index",
    description="a paid index",
    build=lambda run: Executor(EchoExecutor("paid.example")),
    worst_case=lambda settings, prices, chat, spec: WorstCase(50.0, "a paid index", "branch"),
)
