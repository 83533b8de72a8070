"""A refused setting told in one line, in the words the CLI uses (``must be …``): a usage error
naming the flag that gave it (exit 2), else a config error naming where it was read (its
variable, and the file it is in) or the setting (exit 3); with the value given, a secret's
only back to the flag it was typed after."""

from __future__ import annotations

from pydantic import ValidationError

from deep_research.core.errors import ConfigError, UsageError


def refused(
    exc: ValidationError, flag: str | None, value: object, secret: bool
) -> UsageError | ConfigError:
    """A bad per-run value (``Settings.with_flags``), given by ``flag`` or by a caller."""
    if flag is not None:
        return UsageError(f"{flag} {_reason(exc)} (got {value!r})")
    return ConfigError(describe(exc, secret=secret))


def describe(exc: ValidationError, origin: str | None = None, secret: bool = False) -> str:
    """The first bad setting: where it was read (``origin``) when known, else the setting."""
    first = exc.errors()[0]
    parts = [str(part) for part in first["loc"]]
    where = origin or f"setting {'.'.join(parts) or 'settings'}"
    inner = ".".join(parts[1:]) + ": " if origin and len(parts) > 1 else ""
    if secret:  # a bad secret is still a secret: never echoed
        return f"invalid {where}: {inner}{_reason(exc)}"
    return f"invalid {where}: {inner}{_reason(exc)} (got {first.get('input')!r})"


def _reason(exc: ValidationError) -> str:
    why = exc.errors()[0]["msg"].removeprefix("Value error, ")  # our validators' own words
    return why.replace("Input should be", "must be")
