"""A root's Markdown files, found and read safely: the walk follows symlinks only while
they resolve inside the root, skips what a citation cannot name (with the reason), and a
file is read without following a link put in its place since the walk, up to a size cap.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from deep_research.kb.manifest import inside

MARKDOWN_SUFFIXES = (".md", ".markdown")


class SkippedFile(BaseModel):
    path: str
    reason: str


# --- walking --------------------------------------------------------------------------


def walk_markdown(root: Path) -> tuple[list[tuple[str, Path]], list[SkippedFile]]:
    """(relative path, resolved path) of every markdown file under root.

    Symlinks are followed while they resolve inside the root; a link out of it (to a file
    or a folder) is skipped, with the command that ingests its target as a root of its
    own. Folders are walked once each, under their own path when they have one. Hidden
    entries (``.git``, ``.obsidian`` …) are ignored; symlink loops, broken links,
    unreadable directories and names that a citation cannot hold are reported as skipped.
    """
    found: list[tuple[str, Path]] = []
    skipped: list[SkippedFile] = []
    top = os.path.realpath(root)
    seen: dict[str, str] = {}  # resolved folder -> the path it was walked under
    stack = [(str(root), ".", top)]  # (path, relative path, resolved path)
    linked: list[tuple[str, str, str]] = []  # reached through a link: after the others
    while stack or linked:
        directory, rel_dir, here = stack.pop() if stack else linked.pop()
        if here in seen:
            skipped.append(SkippedFile(path=rel_dir, reason=f"the same folder as {seen[here]}"))
            continue
        seen[here] = rel_dir
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(SkippedFile(path=shown(rel_dir), reason=_os_reason(exc)))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = Path(os.path.relpath(entry.path, root)).as_posix()
            is_md = entry.name.lower().endswith(MARKDOWN_SUFFIXES)
            try:
                os.stat(entry.path)  # follows links: raises on loops and broken links
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    skipped.append(SkippedFile(path=shown(rel), reason="symlink loop"))
                elif is_md:
                    skipped.append(SkippedFile(path=shown(rel), reason=_os_reason(exc)))
                continue
            is_dir = entry.is_dir()
            if not (is_dir or (is_md and entry.is_file())):
                continue
            problem = name_problem(entry.name)
            real = os.path.realpath(entry.path)
            if problem is None and not inside(real, top):
                target = real if is_dir else os.path.dirname(real)
                problem = (
                    f"links outside the folder, to {shown(real)}; to add that folder as a "
                    f"root of its own: deep-research kb ingest {shlex.quote(shown(target))} "
                    "--as NAME"
                )
            if problem is not None:
                skipped.append(SkippedFile(path=shown(rel), reason=problem))
            elif not is_dir:
                found.append((rel, Path(real)))
            elif inside(here, real):  # a link to this folder or one above it
                skipped.append(SkippedFile(path=rel, reason="symlink loop"))
            else:
                later = real != os.path.join(top, rel)  # a link on the way: walk it last
                (linked if later else stack).append((entry.path, rel, real))
    found.sort()
    return found, skipped


def name_problem(name: str) -> str | None:
    """Why a file or folder name cannot be indexed, if it cannot: a citation names the file,
    so it must be valid UTF-8 and one line."""
    if not is_utf8(name):
        return "name is not valid UTF-8"
    if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in name):
        return "name holds a line break or control character"
    return None


def is_utf8(text: str) -> bool:
    """False for names read from bytes that are not UTF-8 (held as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(path: str) -> str:
    """A path as it can be printed on one line: bytes that are not UTF-8 and control
    characters escaped."""
    text = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "broken symlink or vanished file"
    if isinstance(exc, PermissionError):
        return "unreadable: permission denied"
    return f"unreadable: {exc.strerror or exc}"


# --- reading --------------------------------------------------------------------------


@dataclass(frozen=True)
class FileBytes:
    data: bytes
    digest: str


def read_file(path: Path, max_bytes: int) -> FileBytes | str:
    """The file's bytes and hash, or the reason to skip it.

    ``path`` is resolved (see `walk_markdown`): a symlink found in its place now was put
    there since the walk, and is not followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "replaced by a symlink while ingesting"
        return _os_reason(exc)
    try:
        with open(fd, "rb") as handle:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                return f"too large ({size} bytes > max_file_bytes {max_bytes})"
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return _os_reason(exc)
    if len(data) > max_bytes:
        return f"too large (> max_file_bytes {max_bytes})"
    return FileBytes(data, hashlib.sha256(data).hexdigest())


def decode_text(data: bytes) -> str:
    """The text, or raise ValueError with the reason to skip the file."""
    if not data.strip():
        raise ValueError("empty")
    if b"\x00" in data:
        raise ValueError("binary (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (invalid byte at offset {exc.start})") from None
