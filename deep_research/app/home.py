"""The data directory, found as ``Settings.home`` finds it but without reading every setting.

``sessions list`` and ``sessions show`` need nothing else, so they start without
pydantic-settings (and the asyncio it imports); a crash log needs it when the settings are
what failed. ``DEEP_RESEARCH_HOME`` (any case) from the environment, else from `.env` in the
working directory, else the platform's per-user directory; a blank value is unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from deep_research.core.errors import ConfigError

ENV_FILE = ".env"
HOME_VARIABLE = "DEEP_RESEARCH_HOME"
DATABASE_VARIABLE = "DEEP_RESEARCH_DATABASE_URL"


def default_home() -> Path:
    """The per-user data directory (``platformdirs``: XDG on Linux, ``~/Library/Application
    Support`` on macOS, ``%LOCALAPPDATA%`` on Windows)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("deep-research", appauthor=False))


def home_from(given: str | None) -> Path:
    """The data directory a ``DEEP_RESEARCH_HOME`` value names (``~`` expanded; unset or
    blank: the default)."""
    return Path(given).expanduser() if given and given.strip() else default_home()


def read_dotenv(env_file: str | Path = ENV_FILE) -> dict[str, str]:
    """The variables ``env_file`` sets, their names upper-cased (matched in any case, as
    pydantic-settings does); none when there is no such file."""
    path = Path(env_file)
    if not path.is_file():
        return {}
    from dotenv import dotenv_values  # only when there is a file (~15 ms)

    try:
        found = dotenv_values(path, encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise unreadable_dotenv(exc) from None
    return {name.upper(): value for name, value in found.items() if value is not None}


def settings_home(dotenv: Mapping[str, str] | None = None) -> Path:
    """The data directory ``loading.load_settings().home`` would be: the environment wins over
    `.env` (``dotenv``, read here when not given). A `.env` that is not UTF-8 is the same
    one-line error (exit 3) as for the commands that read every setting."""
    dotenv = read_dotenv() if dotenv is None else dotenv
    environ = {name.upper(): value for name, value in os.environ.items()}
    return home_from(environ.get(HOME_VARIABLE, dotenv.get(HOME_VARIABLE)))


def settings_database_url(dotenv: Mapping[str, str] | None = None) -> str | None:
    """``Settings.database_url`` as ``settings_home`` finds the data directory (None: unset
    or blank, the sessions are files)."""
    return setting(DATABASE_VARIABLE, dotenv)


def setting(variable: str, dotenv: Mapping[str, str] | None = None) -> str | None:
    """A setting's text as ``settings_home`` finds the data directory (the environment wins
    over `.env`), unvalidated; None when unset or blank."""
    dotenv = read_dotenv() if dotenv is None else dotenv
    environ = {name.upper(): value for name, value in os.environ.items()}
    value = environ.get(variable, dotenv.get(variable))
    return value if value and value.strip() else None


def data_home() -> Path:
    """``settings_home`` that never fails, for crash logs: they must be written even when
    the settings (an unreadable `.env` included) are what is wrong."""
    try:
        return settings_home()
    except ConfigError:
        return settings_home({})


def unreadable_dotenv(exc: UnicodeDecodeError) -> ConfigError:
    env = Path(ENV_FILE).resolve()
    return ConfigError(
        f"cannot read {env}: it is not UTF-8 text (byte {exc.start}); fix or remove it"
    )
