"""Things found the way a plugin is: a value named ``module:attribute`` (the built-ins'
lists), or an entry point of a group (any installed package's). The sources
(``app/sources.py``) and the search providers (``adapters/web/search``) are found so."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import TypeVar

T = TypeVar("T")


def load(target: str, kind: type[T]) -> T:
    """The ``kind`` named ``module:attribute``; TypeError when it is something else."""
    module, _, attribute = target.partition(":")
    found = getattr(import_module(module), attribute)
    if not isinstance(found, kind):
        raise TypeError(f"{target} is a {type(found).__name__}, not a {kind.__name__}")
    return found


def installed(group: str, kind: type[T]) -> tuple[dict[str, T], dict[str, str]]:
    """Each entry point of ``group`` loaded, by its name, and those that could not be, with
    why in one line: a broken plugin is said, it never stops a run."""
    found: dict[str, T] = {}
    broken: dict[str, str] = {}
    for point in entry_points(group=group):
        try:
            found[point.name] = load(point.value, kind)
        except Exception as exc:
            why = " ".join(f"{type(exc).__name__}: {exc}".split())
            broken[point.name] = f"{point.value} could not be loaded ({why})"
    return found, broken
