"""The folders are the layers, and imports only go down.

From the inside out (`LAYERS`): the domain (values, events, decisions),
the assembler (payloads, pure), the storage port with the repository, then
side by side the backends (PostgreSQL, memory), the compaction job, the
framework adapters and the HTTP client, then the application shell (`hosting`), the HTTP
service (`api`) and the command line (`convo`). A module's layer is the
folder it sits in; it may import from its own folder and from any layer
below, never from a layer above or from a sibling folder of its own layer.
A library module importing the shell or the service (even lazily, inside
a function) fails here, so `store` stays usable as a library on its own.

No module imports itself back, through any chain (`test_no_import_cycle`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Inside out; folders on one line are siblings: neither imports the other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("store/domain",),
    ("store/assembler",),
    ("store/repository",),
    ("store/postgres", "store/memory", "store/compaction", "store/adapters", "store/client"),
    ("store",),  # the public names: store.testing
    ("hosting",),
    ("api",),
    ("convo",),
)
PACKAGES = ("store", "hosting", "api", "convo")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


MODULES = _modules()


def _folder(name: str) -> str:
    """The layer folder a module belongs to: the longest one holding it."""
    path = MODULES[name].relative_to(ROOT).as_posix()
    folders = [folder for layer in LAYERS for folder in layer]
    holding = [f for f in folders if path.startswith(f + "/")]
    assert holding, f"{path} is in no layer: add its folder to LAYERS"
    return max(holding, key=len)


def _rank(folder: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if folder in layer)


def _imported(path: Path) -> Iterator[str]:
    """Every module of ours `path` imports, wherever the import statement is."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import module` imports the module (and runs
            # the package's __init__, which is no import of ours).
            candidates = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in MODULES
                else node.module
                for alias in node.names
            ]
        else:
            continue
        for name in candidates:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                yield name


GRAPH = {name: set(_imported(path)) - {name} for name, path in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_only_its_folder_and_the_layers_below(name: str) -> None:
    folder = _folder(name)
    wrong = sorted(
        imported
        for imported in GRAPH[name]
        if _folder(imported) != folder and _rank(_folder(imported)) >= _rank(folder)
    )
    assert wrong == [], f"{name} ({folder}) imports a layer above or beside it"


def test_no_import_cycle() -> None:
    """Tarjan's strongly connected components over the import graph: every
    component is one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    assert cycles == []


def test_every_folder_of_a_package_has_a_layer() -> None:
    for name in MODULES:
        _folder(name)


def test_the_library_is_most_of_the_code() -> None:
    library = [name for name in MODULES if name.split(".")[0] == "store"]
    assert len(library) > 0.6 * len(MODULES)


def test_one_name_per_concept() -> None:
    """An error and an event never share a name (`ConversationDeleted` is the
    error a read gets; `ConversationPurged` is what the log records)."""
    import typing

    from store.domain import errors, events

    event_names = {cls.__name__ for cls in typing.get_args(typing.get_args(events.DomainEvent)[0])}
    error_names = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, Exception)
    }
    assert event_names
    assert event_names & error_names == set()
