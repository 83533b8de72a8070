"""Startup benchmark: how long the CLI takes before it does anything, against baselines
measured in the same run (so a busy machine moves both).

    python bench/startup.py            # human-readable figures
    python bench/startup.py --json     # ... and a last line with one JSON object

Figures (targets from the resume/layout/startup issue), medians of --runs wall times:
- help_ratio          `deep-research --help` / `python -c "import typer, rich"`      <= 3
- version_ratio       `deep-research --version` / the same baseline                  <= 3
- sessions_list_ratio `deep-research sessions list` / the same baseline              <= 4
- sessions_show_ratio `deep-research sessions show ID` / the same baseline           <= 4
- kb_search_ratio     `deep-research kb search ...` / `python -c "import chromadb"`  <= 1.5
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NOTES = "# Budgets\n\nEvery web job reserves its worst-case cost before it starts.\n"


def wall(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def median_of(runs: int, command: list[str], env: dict[str, str], cwd: Path) -> float:
    wall(command, env, cwd)  # warm the page cache once
    return statistics.median(wall(command, env, cwd) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()

    from deep_research.persistence.sessions import SessionStore

    cli = shutil.which("deep-research") or ""
    if not cli:
        sys.exit("deep-research is not installed: pip install -e .")
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    home = work / "home"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_RESEARCH_"))},
        "DEEP_RESEARCH_HOME": str(home),
    }
    session = SessionStore(home / "sessions").create("How are costs capped?")
    (work / "kb").mkdir()
    (work / "kb" / "budgets.md").write_text(NOTES)
    subprocess.run([cli, "kb", "ingest", "kb"], env=env, cwd=work, check=True, capture_output=True)

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
    figures = {name: median_of(args.runs, cmd, env, work) for name, cmd in times.items()}
    base, chroma = figures["typer_rich_s"], figures["chromadb_s"]
    ratios = {
        "help_ratio": figures["help_s"] / base,
        "version_ratio": figures["version_s"] / base,
        "sessions_list_ratio": figures["sessions_list_s"] / base,
        "sessions_show_ratio": figures["sessions_show_s"] / base,
        "kb_search_ratio": figures["kb_search_s"] / chroma,
    }
    shutil.rmtree(work, ignore_errors=True)
    for name, value in figures.items():
        print(f"{name:>20}: {value:.3f}")
    for name, value in ratios.items():
        print(f"{name:>20}: {value:.2f}")
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in (figures | ratios).items()}))


if __name__ == "__main__":
    main()
