"""Every benchmark still runs: each script in bench/ (any file with a ``__main__`` block, so a
new one is picked up) as a user runs it, at its ``--smoke`` size, from the repository root.

Timings are not checked (smoke figures are not the targets); a bench that crashes, or ends
without its line of figures, fails. Every value of that line is a number, but for one object
under ``details`` (what a bench reports that is no figure: outcomes, excerpts). The scripts
are started together, once per module: most of their time is spent waiting on their own
loopback fakes, so they share two cores well.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
MAX_SECONDS = 600  # a bench hung on a fake that never answers fails instead of stalling CI
STRIPPED = ("OPENAI_", "DEEP_RESEARCH_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def entry_points() -> list[str]:
    """Scripts, not the helpers they import (bench/prompt_growth.py, bench/create_to_disk.py)."""
    return sorted(
        path.name
        for path in BENCH.glob("*.py")
        if re.search(r"^if __name__ == .__main__.:", path.read_text(), re.MULTILINE)
    )


ENTRY_POINTS = entry_points()


class Started:
    def __init__(self, name: str, work: Path) -> None:
        self.name = name
        self.stdout = work / "stdout"
        self.stderr = work / "stderr"
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith(STRIPPED)}
        if url := os.environ.get(DATABASE):  # a test server, never a user's: benches use it
            env[DATABASE] = url
        env["DEEP_RESEARCH_HOME"] = str(work / "home")
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, f"bench/{name}", "--smoke", "--json"],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )

    def finish(self) -> tuple[int, list[str]]:
        """Its exit code and stdout lines (fails the test, with stderr's end, on a hang)."""
        try:
            code = self.process.wait(MAX_SECONDS)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"bench/{self.name} --smoke ran over {MAX_SECONDS}s{self.tail()}")
        return code, self.stdout.read_text(errors="replace").splitlines()

    def tail(self) -> str:
        lines = self.stderr.read_text(errors="replace").splitlines()[-20:]
        return "\n" + "\n".join(lines) if lines else " (no stderr)"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Started]]:
    benches: dict[str, Started] = {}
    try:
        for name in ENTRY_POINTS:
            benches[name] = Started(name, tmp_path_factory.mktemp(Path(name).stem))
        yield benches
    finally:
        for bench in benches.values():
            bench.stop()


SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
NEEDS_DATA = {"kb.py": SCIFACT}
"""Benches that read public data kept beside the repository, not in it (CI has it)."""
DATABASE = "DEEP_RESEARCH_TEST_DATABASE_URL"
NEEDS_DATABASE = {"team.py"}
"""Benches that need a PostgreSQL server to create databases on (CI starts one)."""


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_a_smoke_run_computes_every_figure(name: str, started: dict[str, Started]) -> None:
    data = NEEDS_DATA.get(name)
    if data is not None and not data.is_dir():
        message = f"bench/{name} needs {data}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message + " (a clone without ../shared beside it)")
    if name in NEEDS_DATABASE and not os.environ.get(DATABASE):
        message = f"bench/{name} needs a PostgreSQL server: {DATABASE} is not set"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    bench = started[name]
    code, lines = bench.finish()
    assert code == 0, f"bench/{name} --smoke --json exited {code}{bench.tail()}"
    assert lines, f"bench/{name} printed nothing{bench.tail()}"
    figures = json.loads(lines[-1])
    assert isinstance(figures, dict), f"bench/{name}: not a JSON object: {lines[-1]!r}"
    details = figures.pop("details", {})  # what is no figure (outcomes, excerpts), if any
    assert isinstance(details, dict), f"bench/{name}: details that are not an object"
    assert figures, f"bench/{name}: no figures"
    not_numbers = {
        key: value
        for key, value in figures.items()
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    }
    assert not not_numbers, f"bench/{name}: figures that are not numbers: {not_numbers}"


def test_every_bench_the_readme_names_is_run() -> None:
    """bench/README.md names every bench script, and only those: each is run here."""
    readme = (BENCH / "README.md").read_text()
    named = set(re.findall(r"python bench/(\w+\.py)", readme))
    assert named <= set(ENTRY_POINTS), f"not found as bench scripts: {named - set(ENTRY_POINTS)}"
    assert set(ENTRY_POINTS) <= named, f"not in bench/README.md: {set(ENTRY_POINTS) - named}"
