"""Startup benchmark: how long the CLI takes before it does anything, against baselines
measured in the same run (so a busy machine moves both).

    python bench/startup.py            # human-readable figures
    python bench/startup.py --json     # ... and a last line with one JSON object
    python bench/startup.py --smoke    # each command once, no warm-up: does it still run?

Figures (targets from the resume/layout/startup issue), medians of --runs wall times:
- help_ratio          `deep-research --help` / `python -c "import typer, rich"`      <= 3
- version_ratio       `deep-research --version` / the same baseline                  <= 3
- sessions_list_ratio `deep-research sessions list` / the same baseline              <= 4
- sessions_show_ratio `deep-research sessions show ID` / the same baseline           <= 4
- kb_search_ratio     `deep-research kb search ...` / `python -c "import chromadb"`  <= 1.5
- kb_run_ratio        `deep-research QUESTION --kb-only` / `python -c "import langchain_openai,
                      chromadb, openai"`                                            <= 1.6
                      (a KB of one note, ingested before timing; every model call answered at
                      once by the loopback fake OpenAI server of the tests, in this process)
The CLI is the one installed next to this Python (the venv's), else the one on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NOTES = "# Budgets\n\nEvery web job reserves its worst-case cost before it starts.\n"
QUESTION = "How are costs capped?"


def wall(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
        sys.exit(f"{' '.join(command)} exited {done.returncode}: " + " | ".join(tail))
    return seconds


def median_of(runs: int, command: list[str], env: dict[str, str], cwd: Path, warm: bool) -> float:
    if warm:
        wall(command, env, cwd)  # warm the page cache once
    return statistics.median(wall(command, env, cwd) for _ in range(runs))


@contextmanager
def fake_openai(runs: int) -> Iterator[dict[str, str]]:
    """The loopback fake OpenAI server (no latency) planning one KB sub-question per run, as
    the environment a CLI child process needs to reach it."""
    from tests.fake_openai import FakeOpenAI
    from tests.world import ResearchWorld, plan_task

    plan = [plan_task("k1", source="internal", question=QUESTION)]
    with FakeOpenAI() as fake:
        ResearchWorld(plans=[plan] * (4 * runs + 4)).install(fake)  # a replan gets one too
        yield {
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "DEEP_RESEARCH_MAX_RETRIES": "1",
        }


def measure(cli: str, work: Path, runs: int, warm: bool) -> dict[str, float]:
    """Median wall seconds of each command, in a fresh data directory under ``work``."""
    from deep_research.persistence.sessions import SessionStore

    home = work / "home"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_RESEARCH_"))},
        "DEEP_RESEARCH_HOME": str(home),
    }
    session = SessionStore(home / "sessions").create("How are costs capped?")
    (work / "kb").mkdir()
    (work / "kb" / "budgets.md").write_text(NOTES)
    wall([cli, "kb", "ingest", "kb"], env, work)

    py = sys.executable
    times = {
        "typer_rich_s": [py, "-c", "import typer, rich"],
        "chromadb_s": [py, "-c", "import chromadb"],
        "help_s": [cli, "--help"],
        "version_s": [cli, "--version"],
        "sessions_list_s": [cli, "sessions", "list"],
        "sessions_show_s": [cli, "sessions", "show", session.session_id],
        "kb_search_s": [cli, "kb", "search", "worst-case cost", "-k", "3"],
    }
    figures = {name: median_of(runs, cmd, env, work, warm) for name, cmd in times.items()}
    with fake_openai(runs) as model:
        stack = [py, "-c", "import langchain_openai, chromadb, openai"]
        run = [cli, QUESTION, "--kb-only"]
        figures["openai_stack_s"], figures["kb_run_s"] = alternated(
            runs, stack, env, run, env | model, work, warm
        )
    return figures


def alternated(
    runs: int,
    first: list[str],
    first_env: dict[str, str],
    second: list[str],
    second_env: dict[str, str],
    cwd: Path,
    warm: bool,
) -> tuple[float, float]:
    """Medians of two commands timed in turns, so a load that comes and goes moves both."""
    if warm:
        wall(first, first_env, cwd)
        wall(second, second_env, cwd)
    pairs = [(wall(first, first_env, cwd), wall(second, second_env, cwd)) for _ in range(runs)]
    return statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--smoke", action="store_true", help="each command once, no warm-up")
    args = parser.parse_args()

    here = str(Path(sys.executable).parent)  # a venv's scripts, even when it is not activated
    cli = shutil.which("deep-research", path=here) or shutil.which("deep-research") or ""
    if not cli:
        sys.exit("deep-research is not installed: pip install -e .")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as work:
        runs = 1 if args.smoke else args.runs
        figures = measure(cli, Path(work), runs, warm=not args.smoke)
    base, chroma = figures["typer_rich_s"], figures["chromadb_s"]
    ratios = {
        "help_ratio": figures["help_s"] / base,
        "version_ratio": figures["version_s"] / base,
        "sessions_list_ratio": figures["sessions_list_s"] / base,
        "sessions_show_ratio": figures["sessions_show_s"] / base,
        "kb_search_ratio": figures["kb_search_s"] / chroma,
        "kb_run_ratio": figures["kb_run_s"] / figures["openai_stack_s"],
    }
    for name, value in figures.items():
        print(f"{name:>20}: {value:.3f}")
    for name, value in ratios.items():
        print(f"{name:>20}: {value:.2f}")
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in (figures | ratios).items()}))


if __name__ == "__main__":
    main()
