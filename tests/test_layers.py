"""The layout is the architecture: the core imports nothing but itself (and pydantic)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "deep_research"
THIRD_PARTY_ALLOWED_IN_CORE = {"pydantic"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_core_imports_only_itself_the_standard_library_and_pydantic() -> None:
    offenders = []
    core_files = sorted((PACKAGE / "core").glob("*.py"))
    assert len(core_files) > 10
    for path in core_files:
        for module in imported_modules(path):
            top = module.split(".")[0]
            if module.startswith("deep_research.core") or module == "deep_research.core":
                continue
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            if top in THIRD_PARTY_ALLOWED_IN_CORE:
                continue
            offenders.append(f"{path.name}: {module}")
    assert offenders == []


LAYERS = ("core", "kb", "persistence", "adapters", "app", "frontends")
"""Bottom to top: a layer may import the ones before it, never one after it."""


def test_no_layer_imports_one_above_it() -> None:
    """``kb/`` and the adapters know nothing of the settings or the use-cases in ``app/``,
    and the use-cases nothing of the front-ends (the CLI, the HTTP API, the MCP server)."""
    offenders = [
        f"{path.relative_to(PACKAGE)}: {module}"
        for below, layer in enumerate(LAYERS)
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for module in imported_modules(path)
        for above in LAYERS[below + 1 :]
        if module == f"deep_research.{above}" or module.startswith(f"deep_research.{above}.")
    ]
    assert offenders == []


def test_every_folder_of_the_package_is_a_layer() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS)
