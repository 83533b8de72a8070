"""`deep-research` / `python -m deep_research`: the CLI, with the one failure it cannot map
itself — an error while importing it. chromadb reads `./.env` when it is imported, so a
`.env` that is not UTF-8 text fails before `cli.main` could turn it into a one-line error."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from deep_research.frontends.cli import main as cli_main
    except UnicodeDecodeError as exc:
        from deep_research.app.config import unreadable_dotenv

        error = unreadable_dotenv(exc)
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(error.exit_code) from None
    except KeyboardInterrupt:  # Ctrl-C while the CLI loads: as `cli` maps it, no traceback
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
    cli_main()


if __name__ == "__main__":
    main()
