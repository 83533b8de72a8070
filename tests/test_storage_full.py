"""A read-only data directory and a full disk are the user's to fix, never a "bug": one line
naming the file and the folder's setting, a distinct exit code, nothing half-written left.

Where this machine lets the tests mount a small tmpfs (root in a container that allows it),
the CLI meets a real read-only file system and a real full disk; the rest simulates the
failing system call where it happens."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deep_research.core.errors import SessionLocked
from deep_research.frontends import crash
from deep_research.persistence import sessions as sessions_module
from deep_research.persistence.atomic import atomic_write_text
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli

REPO = Path(__file__).resolve().parents[1]
STORAGE, KB, BUG = 8, 7, 70


def _full(*_args: Any, **_kwargs: Any) -> Any:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_lock_whose_pid_cannot_be_written_still_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    state = store.create("How are costs capped?")
    monkeypatch.setattr(sessions_module.os, "pwrite", _full)
    with (
        store.lock(state.session_id),
        pytest.raises(SessionLocked, match="pid unknown"),
        store.lock(state.session_id),
    ):
        pass


def test_a_write_that_fills_the_disk_names_its_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.json"
    monkeypatch.setattr(sessions_module.os, "fsync", _full)
    with pytest.raises(OSError, match="No space left") as raised:
        atomic_write_text(target, "{}")
    assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(target))
    assert list(tmp_path.iterdir()) == []


def test_a_crash_log_that_cannot_be_written_is_not_left_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "home"
    monkeypatch.setattr(crash, "_home", lambda: logs)
    monkeypatch.setattr(crash, "_private_temp_dir", lambda: tmp_path / "tmp-logs")
    (tmp_path / "tmp-logs").mkdir()
    real_fdopen = os.fdopen

    class FullFile:
        def __init__(self, fd: int) -> None:
            self.inner = real_fdopen(fd, "w")

        def __enter__(self) -> FullFile:
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

        def write(self, _text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(crash.os, "fdopen", lambda fd, *a, **k: FullFile(fd))
    assert crash.write_crash_log(RuntimeError("boom")) is None
    assert list((logs / "logs").iterdir()) == []
    assert list((tmp_path / "tmp-logs").iterdir()) == []


def test_a_cache_that_cannot_be_removed_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "cache" / "x").mkdir(parents=True)
    (home / "cache" / "x" / "f").write_text("held")

    def read_only(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), "f")  # rmtree's relative name

    monkeypatch.setattr(shutil, "rmtree", read_only)
    code, _, err = cli({"DEEP_RESEARCH_HOME": str(home)}, "cache", "clear")
    assert code == STORAGE, err
    assert f"cannot clear the cache {home / 'cache'}: Read-only file system" in err


# --- a real read-only file system and a real full disk ------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "mnt"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root in a container that allows it)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    own = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_RESEARCH_"))}
    return subprocess.run(
        [sys.executable, "-m", "deep_research.frontends.cli", *args],
        env={**own, "DEEP_RESEARCH_HOME": str(home), "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _fill(path: Path) -> None:
    """Write ``path`` until the disk is full."""
    with path.open("wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 1_000_000)
                filler.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise


def _crash_logs() -> set[Path]:
    """The crash logs in the temporary folder ``crash`` falls back to (the data directory's
    own is on the file system under test)."""
    folder = Path(tempfile.gettempdir()) / f"deep-research-logs-{os.getuid()}"
    return set(folder.iterdir()) if folder.is_dir() else set()


def test_a_read_only_data_directory_and_a_full_disk_get_one_line_each(tmpfs: Path) -> None:
    home = tmpfs / "home"
    assert _cli(home, "kb", "ingest", "kb").returncode == 0
    ran = _cli(home, "How does deep-research plan a run?", "--json")
    assert ran.returncode == 0, ran.stderr
    session_id = json.loads(ran.stdout)["session_id"]
    (home / "cache" / "x").mkdir(parents=True)
    (home / "cache" / "x" / "f").write_text("held")
    before = _crash_logs()

    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    searched = _cli(home, "kb", "search", "budget")
    assert searched.returncode == KB
    assert "read-only" in searched.stderr
    assert "DEEP_RESEARCH_HOME" in searched.stderr
    stats = _cli(home, "kb", "stats", "--json")  # Chroma opens for writing: it says so
    assert stats.returncode == KB, stats.stderr
    assert json.loads(stats.stdout)["error"]["code"] == "knowledge_base"
    assert "read-only" in stats.stderr
    assert "DEEP_RESEARCH_HOME" in stats.stderr
    cleared = _cli(home, "cache", "clear")
    assert cleared.returncode == STORAGE, cleared.stderr
    assert "Read-only file system" in cleared.stderr
    assert _crash_logs() == before, "a read-only directory is no bug: no crash log"

    subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    _fill(tmpfs / "filler")
    checked = _cli(home, "check", session_id)
    assert checked.returncode == STORAGE, checked.stderr
    assert "No space left on device" in checked.stderr
    assert "claims.json" in checked.stderr
    resumed = _cli(home, "resume", session_id)
    assert resumed.returncode not in (0, BUG), resumed.stderr
    assert "a bug" not in resumed.stderr
    assert not list(home.glob("logs/crash-*")), "no crash log in the data directory"
    assert _crash_logs() == before, "nor in the temporary one, empty or not"
