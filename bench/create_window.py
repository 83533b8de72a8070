"""Never pay twice: kill -9 the CLI inside the window in which a research job exists at the
provider but its id is not yet on disk, under load, then resume, and count the jobs
submitted twice.

    python bench/create_window.py             # 50 kills under two CPU hogs, 5 runs unkilled
    python bench/create_window.py --smoke     # 2 kills (one per band), 1 run unkilled, no hogs

Each try starts a one-node web run (``--web-engine openai``) as a child process against the
loopback fake OpenAI server of the test suite, whose job never finishes until told. The
window opens when the fake receives the create (it makes the job) and closes when the id is
in the saved session (its state.json or, written sooner, its jobs.jsonl). The fake's own
thread kills the child with SIGKILL in one of two bands, alternately, so the kills spread
over the whole window:

- ``before_reply``: the job made, the reply not yet sent (0-2 ms after): the child dies
  before the reply can reach it, as when a process dies while OpenAI answers;
- ``after_reply``: 0-10 ms after the reply was sent, while the id may be only in the
  child's memory (~2-16 ms quiet; longer with the hogs).

A try counts as *inside the window* when the fake made the job and the saved session shows
no id for it; then ``resume`` runs (the job allowed to finish) and the bench counts creates:
a second one is a double submission. Kills that land after the id was saved are counted
apart (resume re-attaches to them). Runs that are not killed must submit exactly once. A run
with no kill inside the window proves nothing and fails, as does a double submission.

Figures: ``kills``; per band (``_before_reply``, ``_after_reply``) ``kills`` that landed
(the child died of SIGKILL after the job was made) and ``inside_window``; ``inside_window``
(all bands), ``double_submissions`` (target 0), ``lost_jobs_failed`` (resumed nodes failed as
"may be running without its id", never resubmitted), ``unkilled_creates_per_run`` (target
1.0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.create_to_disk import _cli, _env
from deep_research.persistence.sessions import SessionStore
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task

QUESTION = "How do X and Y compare?"
BANDS = {"before_reply": 0.002, "after_reply": 0.010}
"""Each band of the window, and the most its kills wait (uniformly from 0) once in it."""


class KillingFake(FakeOpenAI):
    """The fake OpenAI server that SIGKILLs ``victim`` in ``band``: a random delay after it
    made a create's job, before replying (the child waited for, dead, before the reply is
    sent), or after the create's reply was sent (the reply on the wire first)."""

    victim: subprocess.Popen[bytes] | None = None
    band: str = "after_reply"
    rng: random.Random = random.Random(0)

    def _create_response(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        made = super()._create_response(body)
        if made[0] == 200 and self.band == "before_reply":
            self._kill(wait=True)
        return made

    def _replied(self, response_id: str) -> None:
        super()._replied(response_id)
        if self.band == "after_reply":
            self._kill(wait=False)

    def _kill(self, *, wait: bool) -> None:
        victim = self.victim
        if victim is not None:
            time.sleep(self.rng.uniform(0.0, BANDS[self.band]))
            victim.send_signal(signal.SIGKILL)
            if wait:
                victim.wait()


@contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """``count`` processes spinning on a core each: the machine is loaded, as in the trial."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _state(home: Path) -> dict[str, object]:
    """The saved session as a resume reads it (its state.json, then its jobs.jsonl)."""
    [path] = (home / "sessions").glob("*/state.json")
    data = json.loads(SessionStore(path.parent.parent).load(path.parent.name).model_dump_json())
    assert isinstance(data, dict)
    return data


def _resume(env: dict[str, str], home: Path, log: Path) -> dict[str, object]:
    session_id = str(_state(home)["session_id"])
    child = _cli(env, log, "resume", session_id, "--json")
    child.wait(300)
    return _state(home)


def one_kill(work: Path, seed: int, band: str) -> dict[str, int]:
    """One try: run, kill in ``band``, look at the disk, resume, count."""
    home, log = work / f"kill-{seed}", work / f"kill-{seed}.stderr"
    with KillingFake() as fake:
        ResearchWorld(plans=[[plan_task("t1")], []]).install(fake)
        fake.rng = random.Random(seed)
        fake.band = band
        fake.hold_responses = True
        env = _env(fake, home)
        child = _cli(env, log, QUESTION, "--json")
        fake.victim = child
        child.wait(300)
        fake.victim = None
        made = bool(fake.response_ids)  # the job exists at the provider: the window is open
        node = _state(home)["nodes"]["t1"]  # type: ignore[index]
        inside = made and not node["remote_jobs"]  # type: ignore[index]
        fake.hold_responses = False
        for response_id in fake.response_ids:
            fake.complete(response_id)
        resumed = _resume(env, home, log)
        creates = fake.count("/v1/responses", "POST")
        error = resumed["nodes"]["t1"]["error"] or ""  # type: ignore[index]
    return {
        f"kills_{band}": int(child.returncode == -signal.SIGKILL and made),
        f"inside_window_{band}": int(inside),
        "inside_window": int(inside),
        "double_submissions": max(0, creates - 1),
        "lost_jobs_failed": int("without its id" in error),
    }


def one_run(work: Path, n: int) -> int:
    """An unkilled run: the creates it sent."""
    home, log = work / f"run-{n}", work / f"run-{n}.stderr"
    with FakeOpenAI(polls_to_complete=1) as fake:
        ResearchWorld(plans=[[plan_task("t1")], []]).install(fake)
        child = _cli(_env(fake, home), log, QUESTION, "--json")
        if child.wait(300) != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"an unkilled run exited {child.returncode}: {tail}")
        return fake.count("/v1/responses", "POST")


def bench(kills: int, runs: int, hogs: int) -> dict[str, float]:
    per_band = [f"{figure}_{band}" for band in BANDS for figure in ("kills", "inside_window")]
    figures = [*per_band, "inside_window", "double_submissions", "lost_jobs_failed"]
    totals = dict.fromkeys(figures, 0)
    bands = list(BANDS)
    with tempfile.TemporaryDirectory() as tmp, cpu_hogs(hogs):
        work = Path(tmp)
        for seed in range(kills):
            for key, value in one_kill(work, seed, bands[seed % len(bands)]).items():
                totals[key] += value
        creates = [one_run(work, n) for n in range(runs)]
    return {
        "kills": float(kills),
        **{key: float(value) for key, value in totals.items()},
        "unkilled_creates_per_run": sum(creates) / len(creates),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument(
        "--smoke", action="store_true", help="2 kills (one per band), 1 run, no CPU hogs"
    )
    parser.add_argument("--kills", type=int, default=50)
    args = parser.parse_args()
    kills, runs, hogs = (2, 1, 0) if args.smoke else (args.kills, 5, 2)
    os.environ.pop("OPENAI_API_KEY", None)
    started = time.monotonic()
    figures = bench(kills, runs, hogs)
    for key, value in figures.items():
        print(f"{key:>26}: {value:g}", flush=True)
    print(f"{'wall_seconds':>26}: {time.monotonic() - started:.0f}", flush=True)
    if args.json:
        print(json.dumps(figures))
    if figures["double_submissions"] or figures["unkilled_creates_per_run"] != 1.0:
        sys.exit(
            "a research job was submitted twice, or a run that was not killed did not "
            "submit exactly once"
        )
    if not figures["inside_window"]:
        sys.exit("no kill landed inside the window: this run proves nothing")


if __name__ == "__main__":
    main()
