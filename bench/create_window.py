"""Never pay twice: kill -9 the CLI just after the provider answered a research job's create,
under load, then resume, and count the jobs submitted twice.

    python bench/create_window.py             # 50 kills under two CPU hogs, 5 runs unkilled
    python bench/create_window.py --smoke     # 2 kills, 1 run unkilled, no hogs

Each try starts a one-node web run (``--web-engine openai``) as a child process against the
loopback fake OpenAI server of the test suite, whose job never finishes until told. The
fake sends the create's reply and then, from its own thread, waits a random 0-10 ms and
kills the child with SIGKILL: the kill lands at a random point of the window in which the
job exists at the provider while its id may be only in the child's memory (~2-16 ms
quiet; longer with the hogs). A try counts as *inside the window* when the fake's log
shows the create answered and the saved session shows no id for it; then ``resume`` runs
(the job allowed to finish) and the bench counts creates: a second one is a double
submission. Kills that land after the id was saved are counted apart (resume re-attaches
to them). Runs that are not killed must submit exactly once.

Figures: ``kills``, ``inside_window`` (kills that landed inside it), ``double_submissions``
(target 0), ``lost_jobs_failed`` (resumed nodes failed as "may be running without its id",
never resubmitted), ``unkilled_creates_per_run`` (target 1.0).
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

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.create_to_disk import _cli, _env
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task

QUESTION = "How do X and Y compare?"
MAX_DELAY_SECONDS = 0.010


class KillingFake(FakeOpenAI):
    """The fake OpenAI server that SIGKILLs ``victim`` a random delay after a create's reply
    has been sent (the reply is on the wire first: the job exists for the client)."""

    victim: subprocess.Popen[bytes] | None = None
    rng: random.Random = random.Random(0)

    def _replied(self, response_id: str) -> None:
        super()._replied(response_id)
        victim = self.victim
        if victim is not None:
            time.sleep(self.rng.uniform(0.0, MAX_DELAY_SECONDS))
            victim.send_signal(signal.SIGKILL)


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
    [path] = (home / "sessions").glob("*/state.json")
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def _resume(env: dict[str, str], home: Path, log: Path) -> dict[str, object]:
    session_id = str(_state(home)["session_id"])
    child = _cli(env, log, "resume", session_id, "--json")
    child.wait(300)
    return _state(home)


def one_kill(work: Path, seed: int) -> dict[str, int]:
    """One try: run, kill just after the create's reply, look at the disk, resume, count."""
    home, log = work / f"kill-{seed}", work / f"kill-{seed}.stderr"
    with KillingFake() as fake:
        ResearchWorld(plans=[[plan_task("t1")], []]).install(fake)
        fake.rng = random.Random(seed)
        fake.hold_responses = True
        env = _env(fake, home)
        child = _cli(env, log, QUESTION, "--json")
        fake.victim = child
        child.wait(300)
        fake.victim = None
        answered = list(fake.create_replied_at)
        node = _state(home)["nodes"]["t1"]  # type: ignore[index]
        inside = bool(answered) and not node["remote_jobs"]  # type: ignore[index]
        fake.hold_responses = False
        for response_id in fake.response_ids:
            fake.complete(response_id)
        resumed = _resume(env, home, log)
        creates = fake.count("/v1/responses", "POST")
        error = resumed["nodes"]["t1"]["error"] or ""  # type: ignore[index]
    return {
        "killed_after_reply": int(child.returncode == -signal.SIGKILL and bool(answered)),
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
    totals = {"killed_after_reply": 0, "inside_window": 0, "double_submissions": 0}
    totals["lost_jobs_failed"] = 0
    with tempfile.TemporaryDirectory() as tmp, cpu_hogs(hogs):
        work = Path(tmp)
        for seed in range(kills):
            for key, value in one_kill(work, seed).items():
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
    parser.add_argument("--smoke", action="store_true", help="2 kills, 1 run, no CPU hogs")
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


if __name__ == "__main__":
    main()
