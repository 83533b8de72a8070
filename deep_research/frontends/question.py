"""The research question read from the command line, never more than 64 KB of it."""

from __future__ import annotations

import sys
from pathlib import Path

from deep_research.core.errors import UsageError

MAX_QUESTION_BYTES = 64_000


def read_question(question: str | None, question_file: Path | None) -> str:
    """The question as given: an argument, ``-`` for stdin, or ``--question-file``."""
    if (question is None) == (question_file is None):
        raise UsageError("give the question as an argument, as - (stdin), or --question-file")
    if question_file is not None:
        try:
            with question_file.open(encoding="utf-8") as file:
                return _bounded(file.read(MAX_QUESTION_BYTES + 1))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the question from {question_file}: {exc}") from None
    if question == "-":
        try:
            text = sys.stdin.read(MAX_QUESTION_BYTES + 1)
        except UnicodeDecodeError as exc:
            raise UsageError(f"the question on stdin is not UTF-8 text: {exc}") from None
        return _bounded(text)
    return question or ""


def _bounded(text: str) -> str:
    """Never read a huge input whole: past this it is no question (options says the limit)."""
    if len(text) > MAX_QUESTION_BYTES:
        raise UsageError(
            "the question is over 64 KB; put background material in the knowledge base instead"
        )
    return text
