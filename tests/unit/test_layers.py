"""The library core knows nothing of the application shell.

Core: the event log and its values, the domain values and decisions, the
projector and the views, the assembler, the repository and its storages.
Shell: settings, the embedded server, migrations' runner, API keys, the
CLI, the demo, the wiring, and the HTTP app. A core module importing a
shell module (even lazily, inside a function) fails this test, so the core
stays usable as a library on its own: `Repository(PostgresStorage...)`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[2] / "store"

SHELL = {
    "store.settings",
    "store.embedded",
    "store.runtime",
    "store.bootstrap",
    "store.migrate",
    "store.db",
    "store.api_keys",
    "store.demo",
    "store.cli",
    "store.tables",
    "api",
}
SHELL_FILES = {
    "settings.py",
    "embedded.py",
    "runtime.py",
    "bootstrap.py",
    "migrate.py",
    "db.py",
    "api_keys.py",
    "demo.py",
    "tables.py",
}


def _core_modules() -> list[Path]:
    return sorted(
        path
        for path in STORE.rglob("*.py")
        if path.name not in SHELL_FILES and "cli" not in path.relative_to(STORE).parts
    )


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _is_shell(name: str) -> bool:
    return any(name == shell or name.startswith(shell + ".") for shell in SHELL)


@pytest.mark.parametrize("path", _core_modules(), ids=lambda p: str(p.relative_to(STORE)))
def test_a_core_module_imports_no_shell_module(path: Path) -> None:
    assert sorted(n for n in _imports(path) if _is_shell(n)) == []


def test_the_core_is_most_of_the_package() -> None:
    assert len(_core_modules()) > 40


def test_one_name_per_concept() -> None:
    """An error and an event never share a name (`ConversationDeleted` is the
    error a read gets; `ConversationPurged` is what the log records)."""
    import typing

    from store import errors, events

    event_names = {cls.__name__ for cls in typing.get_args(typing.get_args(events.DomainEvent)[0])}
    error_names = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, Exception)
    }
    assert event_names
    assert event_names & error_names == set()
