"""Settings: their names and defaults, and prices from the environment."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from deep_research.app.home import settings_home
from deep_research.app.loading import load_settings
from deep_research.core.errors import ConfigError
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli

READS_EVERY_SETTING = ("sessions", "prune", "--older-than", "30d", "--dry-run")
"""A quick command that reads every setting (`sessions list` and `show` read only the home)."""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    for name in list(os.environ):
        if name.startswith(("DEEP_RESEARCH_", "OPENAI_")):
            monkeypatch.delenv(name)


def test_web_research_defaults() -> None:
    s = load_settings()
    assert (s.web_model, s.web_effort, s.web_reasoning_summary) == (
        "gpt-5.5",
        "high",
        "off",
    )
    assert (s.web_max_tool_calls, s.web_max_output_tokens, s.max_cost_usd) == (16, 32_000, 20.0)


def test_prices_come_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEP_RESEARCH_PRICES", '{"gpt-6.2-sol": [2.5, 0.25, 12]}')
    assert load_settings().prices == {"gpt-6.2-sol": (2.5, 0.25, 12.0)}


@pytest.mark.parametrize(
    ("name", "value", "where"),
    [
        ("DEEP_RESEARCH_PRICES", '{"m": [1, 2]}', "prices"),
        ("DEEP_RESEARCH_PRICES", '{"m": [-1, 0, 1]}', "prices"),
        ("DEEP_RESEARCH_WEB_EFFORT", "extreme", "web_effort"),
        ("DEEP_RESEARCH_WEB_REASONING_SUMMARY", "yes", "web_reasoning_summary"),
    ],
)
def test_bad_values_are_one_line_config_errors(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, where: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert where in str(info.value).lower()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("content", [b"\xff\xfe\x00\x01binary", b"OPENAI_API_KEY=caf\xe9\n"])
def test_a_dotenv_that_is_not_utf8_is_a_one_line_config_error(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / ".env").write_bytes(content)
    with pytest.raises(ConfigError, match=r"\.env: it is not UTF-8 text") as info:
        load_settings()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_api_token_is_no_token(monkeypatch: pytest.MonkeyPatch, blank: str) -> None:
    monkeypatch.setenv("DEEP_RESEARCH_API_TOKEN", blank)
    assert load_settings().api_token is None  # never an empty token an empty header matches
    monkeypatch.setenv("DEEP_RESEARCH_API_TOKEN", LONG_TOKEN)
    token = load_settings().api_token
    assert token is not None
    assert token.get_secret_value() == LONG_TOKEN


LONG_TOKEN = "t0ken-" + "x" * 26  # 32 characters, the least a token may have


@pytest.mark.parametrize("short", ["t0ken", LONG_TOKEN[:-1]])
def test_a_short_api_token_is_refused_with_how_to_make_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, short: str
) -> None:
    monkeypatch.setenv("DEEP_RESEARCH_API_TOKEN", short)
    settings = load_settings()  # what needs no token still works: a short one in .env
    with pytest.raises(ConfigError) as info:  # locks nobody out of `sessions list`
        settings.token()
    message = str(info.value)
    assert re.search(r"(?i)api_token: must be at least 32 characters", message), message
    assert 'python -c "import secrets; print(secrets.token_urlsafe(32))"' in message
    assert short not in message  # a bad secret is still a secret
    assert "\n" not in message
    home = {"DEEP_RESEARCH_HOME": str(tmp_path / "home")}
    assert cli(home, "sessions", "list")[0] == 0
    code, _, err = cli(home, "serve")
    assert code == 3
    assert re.search(r"(?i)api_token: must be at least 32 characters", err), err
    assert short not in err


@pytest.mark.parametrize("value", ["https://proxy.example", "a.example:port", "a/b"])
def test_public_hosts_are_host_or_host_and_port(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("DEEP_RESEARCH_PUBLIC_HOSTS", value)
    with pytest.raises(ConfigError, match=r"(?i)public_hosts"):
        load_settings()
    monkeypatch.setenv("DEEP_RESEARCH_PUBLIC_HOSTS", " Research.Example , research.example:8443")
    hosts = load_settings().public_host_list
    assert hosts == ("research.example", "research.example:8443")


# --- budgets: non-finite or absurd values are refused on every surface ---------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEEP_RESEARCH_MAX_COST_USD", "inf"),
        ("DEEP_RESEARCH_MAX_COST_USD", "nan"),
        ("DEEP_RESEARCH_MAX_RUNTIME_SECONDS", "inf"),
        ("DEEP_RESEARCH_MAX_RUNTIME_SECONDS", "1e30"),
        ("DEEP_RESEARCH_MAX_TOTAL_TOKENS", "0"),
        ("DEEP_RESEARCH_SERVER_MAX_COST_USD", "Infinity"),
        ("DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD", "-1"),
        ("DEEP_RESEARCH_CONFIRM_ABOVE_USD", "nan"),
    ],
)
def test_absurd_budgets_in_the_environment_are_config_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert f"invalid {name}:" in str(info.value)
    monkeypatch.delenv(name)
    (tmp_path / ".env").write_text(f"{name}={value}\n")
    code, _, err = cli({"DEEP_RESEARCH_HOME": str(tmp_path / "home")}, *READS_EVERY_SETTING)
    assert code == 3, err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-cost", "inf"),
        ("--max-cost", "nan"),
        ("--max-cost", "-1"),
        ("--max-cost", "0"),
        ("--max-cost", "1e9"),
        ("--max-runtime", "inf"),
        ("--max-runtime", "0"),
        ("--max-tokens", "0"),
        ("--max-iterations", "0"),
        ("--max-iterations", "1000"),
    ],
)
def test_absurd_budget_flags_are_usage_errors_naming_the_flag(
    tmp_path: Path, flag: str, value: str
) -> None:
    env = {"DEEP_RESEARCH_HOME": str(tmp_path / "home")}
    code, _, err = cli(env, "How do budgets work?", flag, value)
    assert code == 2, err
    assert flag in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "home" / "sessions").exists(), "nothing was saved"


def test_a_resume_with_an_absurd_budget_leaves_the_session_as_it_was(tmp_path: Path) -> None:
    env = {"DEEP_RESEARCH_HOME": str(tmp_path / "home")}
    store = SessionStore(tmp_path / "home" / "sessions")
    state = store.create("How do budgets work?", status="interrupted")
    file = store.path(state.session_id) / "state.json"
    before = file.read_bytes()
    for flag in ("--max-runtime", "--max-cost"):
        code, _, err = cli(env, "resume", state.session_id, flag, "inf")
        assert code == 2, err
        assert flag in err
    assert file.read_bytes() == before
    assert store.load(state.session_id).limits == state.limits


# --- a bad value names where the user gave it: the variable (exit 3), the flag (exit 2) ------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEEP_RESEARCH_MAX_COST_USD", "-5"),
        ("DEEP_RESEARCH_MAX_PARALLEL", "0"),
        ("DEEP_RESEARCH_PRICES", "{not json"),  # was exit 70, "a bug"
        ("DEEP_RESEARCH_PLANNER_MODEL", ""),
        ("DEEP_RESEARCH_KB_NAME", "../notes"),
    ],
)
def test_a_bad_setting_names_its_variable_and_the_file_it_is_in(
    tmp_path: Path, name: str, value: str
) -> None:
    home = {"DEEP_RESEARCH_HOME": str(tmp_path / "home")}
    code, _, err = cli({**home, name: value}, *READS_EVERY_SETTING)
    assert code == 3, err
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: invalid {name}: "), line
    (tmp_path / ".env").write_text(f"{name}={value}\n")  # clean_env: cwd=tmp_path
    code, _, err = cli(home, *READS_EVERY_SETTING)
    assert code == 3, err
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: invalid {name} in {(tmp_path / '.env').resolve()}: "), line


def test_the_environment_wins_over_dotenv_and_names_match_in_any_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text(
        "DEEP_RESEARCH_MAX_COST_USD=3\ndeep_research_judge_model=from-dotenv\n"
        'DEEP_RESEARCH_SEARCH_PRICES={"tavily": 0.01}\n'
    )
    monkeypatch.setenv("DEEP_RESEARCH_MAX_COST_USD", "4")
    settings = load_settings()
    assert (settings.max_cost_usd, settings.judge_model) == (4.0, "from-dotenv")
    assert settings.search_prices == {"tavily": 0.01}
    assert {"max_cost_usd", "judge_model"} <= settings.model_fields_set


def test_a_bare_web_variable_is_not_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only DEEP_RESEARCH_WEB_* set the web settings: names match in any case, so a
    lower-case alias such as "web_model" would also read someone else's WEB_MODEL."""
    monkeypatch.setenv("WEB_MODEL", "not ours")
    monkeypatch.setenv("WEB_POLL_SECONDS", "-1")
    settings = load_settings()
    assert (settings.web_model, settings.web_poll_seconds) == ("gpt-5.5", 5.0)


@pytest.mark.parametrize(
    ("environ", "dotenv", "expected"),
    [
        ({}, "", "xdg/deep-research"),
        ({"DEEP_RESEARCH_HOME": "from-env"}, "", "from-env"),
        ({}, "DEEP_RESEARCH_HOME=from-dotenv\n", "from-dotenv"),
        ({}, "deep_research_home=~/any-case\n", "user/any-case"),
        ({"DEEP_RESEARCH_HOME": "from-env"}, "DEEP_RESEARCH_HOME=from-dotenv\n", "from-env"),
        ({"DEEP_RESEARCH_HOME": " "}, "DEEP_RESEARCH_HOME=from-dotenv\n", "xdg/deep-research"),
        ({}, "DEEP_RESEARCH_HOME=\n", "xdg/deep-research"),  # blank is unset, not "."
    ],
)
def test_sessions_list_finds_the_data_directory_where_every_command_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    dotenv: str,
    expected: str,
) -> None:
    """`sessions list|show` find the home without pydantic-settings (app.home): the same
    one as ``Settings.home``, from the environment (which wins), `.env` or the default."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    (tmp_path / ".env").write_text(dotenv)
    assert load_settings().home.absolute() == tmp_path / expected
    assert settings_home().absolute() == tmp_path / expected


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-parallel", "0"),
        ("--max-parallel", "65"),
        ("--web-effort", "extreme"),
        ("--web-engine", "google"),
        ("--search-provider", "bing"),
        ("--kb", "../notes"),
        ("--chat-model", ""),
        ("--planner-model", " "),
        ("--web-model", "gpt 5"),
    ],
)
def test_bad_flag_values_are_usage_errors_naming_the_flag(
    tmp_path: Path, flag: str, value: str
) -> None:
    env = {"DEEP_RESEARCH_HOME": str(tmp_path / "home")}
    code, _, err = cli(env, "How do budgets work?", flag, value)
    assert code == 2, err
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: {flag} "), line
    assert line.endswith((f"(got {value!r})", f"(got {value})")), line
    assert not (tmp_path / "home" / "sessions").exists(), "nothing was saved"


def test_a_resume_with_a_bad_max_parallel_names_the_flag(tmp_path: Path) -> None:
    env = {"DEEP_RESEARCH_HOME": str(tmp_path / "home")}
    store = SessionStore(tmp_path / "home" / "sessions")
    state = store.create("How do budgets work?", status="interrupted")
    code, _, err = cli(env, "resume", state.session_id, "--max-parallel", "0")
    assert code == 2, err
    assert err.startswith("error: --max-parallel must be greater than or equal to 1")
