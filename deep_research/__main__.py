"""`deep-research` / `python -m deep_research`: the CLI, with the one failure it cannot map
itself — an error while importing it. chromadb reads `./.env` when it is imported, so a
`.env` that is not UTF-8 text fails before `cli.main` could turn it into a one-line error."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

YOUNG_OBJECTS = 20_000
"""Objects made between two collections of the youngest generation (Python's default: 700).
A run's imports make ~240,000 objects that live as long as the process (modules, classes,
pydantic schemas): at 700 the collector walked them some 550 times, full collections
included (0.3-0.8 s of a `--kb-only` run); at 20,000 about 20 times, never a full one."""


def main() -> None:
    gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
    try:
        _run()
    finally:
        # The interpreter's last collection would walk every object to free a process's worth
        # of memory about to be returned anyway (0.7 s after a run); frozen objects are skipped.
        # Finalizers registered with atexit or weakref.finalize still run.
        gc.freeze()


def _run() -> None:
    # Ctrl-C while the CLI loads, or while typer builds its commands before `cli` could map
    # it (`serve` at 0.2 s): as `cli` maps it, one line and exit 130, no traceback.
    try:
        _load()()
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None


def _load() -> Callable[[], None]:
    try:
        from deep_research.frontends.cli import main as cli_main
    except UnicodeDecodeError as exc:
        from deep_research.app.home import unreadable_dotenv

        error = unreadable_dotenv(exc)
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(error.exit_code) from None
    return cli_main


if __name__ == "__main__":
    main()
