"""``load_settings``: ``Settings`` read from the environment and `.env`. A bad value there
names its variable, and the file it is in (exit 3, ``refusals``): where a value came from is
worked out only then."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from deep_research.app.config import ENV_PREFIX, SECRETS, Settings
from deep_research.app.home import ENV_FILE, read_dotenv, unreadable_dotenv
from deep_research.app.refusals import describe
from deep_research.core.errors import ConfigError


def load_settings(**overrides: Any) -> Settings:
    """Read the environment and `.env`, then apply per-run overrides."""
    try:
        settings = Settings()
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        field = _field_named(str(loc[0])) if loc else ""
        raise ConfigError(describe(exc, _origin(field), secret=field in SECRETS)) from None
    except SettingsError as exc:
        raise _unparsable(exc) from None
    except UnicodeDecodeError as exc:
        raise unreadable_dotenv(exc) from None
    return settings.with_overrides(**overrides)


def _field_named(name: str) -> str:
    """The setting named ``name``, or set by the variable ``name`` (an error's location may
    be either)."""
    if name in Settings.model_fields:
        return name
    return next((f for f in Settings.model_fields if name.upper() == variable(f)), name)


def _origin(field: str) -> str | None:
    """Where pydantic-settings read ``field``, looked for once it has refused the value:
    "VARIABLE", "VARIABLE in /path/.env", or None (from neither). Its order: the environment
    over `.env`, names in any case."""
    if field not in Settings.model_fields:
        return None
    name = variable(field)
    if name in {v.upper() for v in os.environ}:
        return name
    if name in read_dotenv():
        return f"{name} in {Path(ENV_FILE).resolve()}"
    return None


def _unparsable(exc: SettingsError) -> ConfigError:
    """pydantic-settings' error for a value it could not decode (JSON, for the mappings),
    naming the variable instead of the field and its source class."""
    named = re.search(r'field "(\w+)"', str(exc))
    if named is None or named.group(1) not in Settings.model_fields:
        return ConfigError(f"invalid settings: {exc}")
    field = named.group(1)
    where = _origin(field) or f"setting {field}"
    cause = exc.__cause__
    if isinstance(cause, json.JSONDecodeError):
        return ConfigError(f"invalid {where}: not JSON ({cause.msg}, character {cause.pos})")
    return ConfigError(f"invalid {where}: {cause or exc}")


def variable(field: str) -> str:
    """The environment variable that sets ``field``."""
    alias = Settings.model_fields[field].validation_alias
    return alias if isinstance(alias, str) else ENV_PREFIX + field.upper()
