"""The documentation site builds, strictly, as CI builds it: ``mkdocs build --strict`` (the
tool is in the ``[dev]`` extra). Its settings page is generated from ``Settings`` by a hook
(docs/hooks/settings.py), so it lists every setting's variable and cannot fall behind; and
no page fetches anything from elsewhere (web fonts are off)."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deep_research.app.config import Settings
from deep_research.app.loading import variable as variable_of

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner, not a warning of ours
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-3000:]}"
    return out


def test_the_docs_site_builds_strictly_with_every_page(site: Path) -> None:
    nav = re.findall(r"^\s+- [^:]+: (\S+\.md)$", (REPO / "mkdocs.yml").read_text(), re.M)
    pages = {path.name for path in (REPO / "docs").glob("*.md")}
    assert set(nav) | {"index.md"} == pages, "a page missing from the nav, or a nav entry lost"
    for page in pages:
        built = site / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert built.is_file(), f"{page} was not built"


def docstrings() -> dict[str, str]:
    """The hook's own reading of the fields' docstrings (what the page shows)."""
    spec = importlib.util.spec_from_file_location("settings_hook", REPO / "docs/hooks/settings.py")
    assert spec is not None
    assert spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    found: dict[str, str] = hook.docstrings()
    return found


def test_the_settings_page_lists_every_settings_variable(site: Path) -> None:
    page = (site / "settings" / "index.html").read_text()
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    for field in Settings.model_fields:
        variable = variable_of(field)
        row = next((row for row in rows if f"<code>{variable}</code>" in row), None)
        assert row is not None, f"{variable} is not on the settings page"
        said = docstrings().get(field, "")
        assert said, f"Settings.{field} has no docstring: its row says nothing"
        first_words = " ".join(said.replace("`", "").split()[:3])  # code: <code>
        assert first_words in " ".join(html.unescape(re.sub(r"<[^>]+>", "", row)).split()), (
            f"{variable}'s row lacks its description"
        )


def test_the_command_line_page_lists_every_run_option_with_its_one_text(site: Path) -> None:
    from deep_research.app.flags import FLAGS

    page = (site / "cli" / "index.html").read_text()
    rows = [
        html.unescape(re.sub(r"<[^>]+>", "", row))
        for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
    ]
    for found in FLAGS.values():
        row = next((row for row in rows if row.split()[0] == found.flag), None)
        assert row is not None, f"{found.flag} is not on the command line page"
        assert " ".join(found.help.split()[:4]) in " ".join(row.split()), found.flag
    max_parallel = next(row for row in rows if row.split()[0] == "--max-parallel")
    assert re.search(r"\bDEEP_RESEARCH_MAX_PARALLEL\b", max_parallel), "the setting it sets"


def test_the_presets_table_shows_each_presets_value_of_each_setting_it_sets(site: Path) -> None:
    from deep_research.app import presets

    page = (site / "sessions-and-budgets" / "index.html").read_text()
    rows = [
        html.unescape(re.sub(r"<[^>]+>", " ", row)).split()
        for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
    ]
    assert rows[0] == ["setting", *presets.CHANGES]
    for knob in presets.knobs():
        row = next((row for row in rows if row[0] == variable_of(knob)), None)
        assert row is not None, f"{knob} is not in the presets' table"
        assert row[-3:] == [str(presets.values(name)[knob]) for name in presets.CHANGES], knob


def test_secrets_show_no_default_on_the_settings_page(site: Path) -> None:
    page = (site / "settings" / "index.html").read_text()
    row = re.search(r"<tr>\s*<td><code>OPENAI_API_KEY</code></td>\s*<td>(.*?)</td>", page, re.S)
    assert row is not None
    assert row.group(1).strip() == "–"


def test_no_page_loads_web_fonts(site: Path) -> None:
    loading = [
        str(path.relative_to(site))
        for path in site.rglob("*")
        if path.suffix in (".html", ".css", ".js")
        and "fonts.googleapis.com" in path.read_text(errors="replace")
    ]
    assert not loading, f"pages that fetch Google's web fonts: {loading}"
