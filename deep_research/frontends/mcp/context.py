"""What the tool modules share (and import, as ``server`` imports them): the ``ToolContext``,
one-line tool errors and ``takes``."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from deep_research.app.config import Settings
from deep_research.app.runs import RunManager
from deep_research.core.errors import DeepResearchError

if TYPE_CHECKING:
    from deep_research.frontends.mcp.web_tools import LazyReader


@dataclass(frozen=True)
class ToolContext:
    """Given to each module's ``register``; ``reading`` and ``spending`` annotate the tools
    that only read and the ones that spend."""

    settings: Settings
    runs: RunManager
    reader: LazyReader
    reading: ToolAnnotations
    spending: ToolAnnotations


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Our errors become a tool error with their one line (the SDK never sees a traceback)."""
    try:
        yield
    except DeepResearchError as exc:
        raise ToolError(" ".join(str(exc).split())) from None


Tool = TypeVar("Tool", bound=Callable[..., Any])


def takes(
    model: type[BaseModel], *, first: Sequence[inspect.Parameter] = ()
) -> Callable[[Tool], Tool]:
    """A tool whose arguments are the fields of ``model`` (after ``first``): their names,
    types, bounds, descriptions and defaults, declared once there (``app.options``, also the
    HTTP API's bodies). The SDK reads a tool's arguments from its signature, so this gives
    the tool that signature; the tool gets them as keyword arguments, validated."""

    def derive(tool: Tool) -> Tool:
        fields = [
            argument(
                name,
                Annotated[
                    (field.annotation, *field.metadata, Field(description=field.description))
                ],
                inspect.Parameter.empty if field.is_required() else field.default,
            )
            for name, field in model.model_fields.items()
        ]
        returns = inspect.signature(tool, eval_str=True).return_annotation
        signature = inspect.Signature([*first, *fields], return_annotation=returns)
        setattr(tool, "__signature__", signature)  # noqa: B010 (mypy: not on Callable)
        return tool

    return derive


def argument(
    name: str, annotation: Any, default: Any = inspect.Parameter.empty
) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )
