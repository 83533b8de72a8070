"""The layout is the architecture: the core imports nothing but itself (and pydantic)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "deep_research"
THIRD_PARTY_ALLOWED_IN_CORE = {"pydantic", "markdown_it"}
"""Pure libraries: data models, and the markdown parser every reader of model text uses
(a parse, not line patterns: no I/O, no model, no network)."""


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_core_imports_only_itself_the_standard_library_and_pure_libraries() -> None:
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


LAYERS = ("core", "kb", "persistence", "adapters", "app", "sources", "frontends")
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


# --- imports at the top -----------------------------------------------------------------

MEASURED_START = {
    "deep_research.__main__",
    "deep_research.frontends.cli",
    "deep_research.frontends.common",
    "deep_research.frontends.crash",
    "deep_research.frontends.kb_cli",
    "deep_research.frontends.run_cli",
    "deep_research.frontends.serve_cli",
    "deep_research.frontends.sessions_cli",
    "deep_research.frontends.worker_cli",
    "deep_research.persistence.sessions",
}
"""Modules whose own start is timed (tests/test_startup.py, bench/startup.py): the CLI's,
which import what a command needs when it runs, so that ``--help`` loads none of it; and
the file store ``sessions list`` reads, whose parts (the event log's asyncio, the claim
ledger's models) load when a run first uses them."""
HEAVY = {
    "chromadb",
    "dbos",
    "ddgs",
    "genai_prices",
    "langchain",
    "langchain_core",
    "langchain_openai",
    "numpy",  # ~0.1 s: `sessions list` and `--help` never load it
    "onnxruntime",
    "openai",
    "psycopg",
    "tokenizers",
    "trafilatura",
}
"""Libraries a module on a measured start (the CLI, the servers' ``initialize``) may import
in a function, through the module of ours that wraps it."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(node: ast.AST) -> list[tuple[str, list[str], int]]:
    if isinstance(node, ast.Import):
        return [(alias.name, [], node.lineno) for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [(node.module, [alias.name for alias in node.names], node.lineno)]
    return []


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def top_and_local_imports(
    path: Path,
) -> tuple[set[str], list[tuple[str, list[str], int]]]:
    """The modules ``path`` imports when it loads (not under TYPE_CHECKING), and the imports
    inside its functions."""
    top: set[str] = set()
    local: list[tuple[str, list[str], int]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            for module, names, line in _imports(child):
                if in_function:
                    local.append((module, names, line))
                else:
                    top.update(submodules(module, names))
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            walk(child, inner)

    walk(ast.parse(path.read_text(encoding="utf-8")), False)
    return top, local


def submodules(module: str, names: list[str]) -> set[str]:
    """``from deep_research.app import engines`` imports ``deep_research.app.engines``."""
    found = {module}
    for name in names:
        candidate = f"{module}.{name}"
        relative = Path(*candidate.split("."))
        if (PACKAGE.parent / relative).with_suffix(".py").exists() or (
            PACKAGE.parent / relative / "__init__.py"
        ).exists():
            found.add(candidate)
    return found


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def loads_heavy(module: str, modules: dict[str, Path], seen: set[str] | None = None) -> bool:
    """Whether importing ``module`` (one of ours) imports a heavy library, read statically
    through the package's own module-level imports."""
    seen = set() if seen is None else seen
    if module in seen or module not in modules:
        return False
    seen.add(module)
    parts = module.split(".")
    parents = {".".join(parts[:i]) for i in range(1, len(parts))}
    top, _ = top_and_local_imports(modules[module])
    return any(name.split(".")[0] in HEAVY for name in top) or any(
        loads_heavy(name, modules, seen)
        for name in top | parents
        if name.startswith("deep_research")
    )


def lazy_imports_out_of_place() -> list[str]:
    modules = package_modules()
    offenders = []
    for name, path in modules.items():
        if name in MEASURED_START:
            continue
        for module, names, line in top_and_local_imports(path)[1]:
            if module.split(".")[0] != "deep_research":
                continue
            if any(loads_heavy(target, modules) for target in submodules(module, names)):
                continue
            offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {module}")
    return offenders


def test_our_modules_are_imported_at_the_top() -> None:
    """A function-local import of our own code hides a cycle (issue 17): allowed only where
    start-up is measured (the CLI modules), or for a module that loads a heavy library
    (``HEAVY``: a server imports the module that does so at start, and answers first)."""
    assert lazy_imports_out_of_place() == []


def test_the_heavy_check_sees_what_loads_a_heavy_library() -> None:
    modules = package_modules()
    assert loads_heavy("deep_research.kb.catalog", modules), "chromadb, through the store"
    assert loads_heavy("deep_research.adapters.llm.llm", modules), "LangChain"
    assert not loads_heavy("deep_research.app.config", modules)
    assert not loads_heavy("deep_research.core.errors", modules)


def test_no_module_is_over_400_lines() -> None:
    """A module a reader can hold in their head (issue 36): split one that grows past it."""
    lines = {
        name: len(path.read_text("utf-8").splitlines()) for name, path in package_modules().items()
    }
    assert {name: n for name, n in lines.items() if n > 400} == {}


SESSION_FILES = {
    "deep_research.persistence.sessions",
    "deep_research.persistence.events",
    "deep_research.persistence.evidence",
    "deep_research.persistence.claims",
    "deep_research.persistence.jobs",
    "deep_research.persistence.locks",
}
"""The file implementation of the ``Sessions`` port (``persistence/port.py``)."""
UNPRINTABLE_ONLY = {("deep_research.persistence.sessions", "UNPRINTABLE")}
"""What the layers above may take from them: the report's control characters (rendering)."""


def test_above_persistence_a_session_is_reached_through_the_port_only() -> None:
    """No use-case, adapter or front-end names a session's files, so sessions kept elsewhere
    (PostgreSQL, for a team) are a drop-in: ``port.open_sessions`` picks the implementation."""
    offenders = []
    for layer in ("adapters", "app", "sources", "frontends"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                for module, names, line in _imports(node):
                    taken = {(module, name) for name in names} or {(module, "*")}
                    if module in SESSION_FILES and not taken <= UNPRINTABLE_ONLY:
                        offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {module}")
            if ".path(" in (text := path.read_text(encoding="utf-8")) and "store.path(" in text:
                offenders.append(f"{path.relative_to(PACKAGE)}: store.path(...)")
    assert offenders == []
