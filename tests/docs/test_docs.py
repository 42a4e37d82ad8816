"""Every fenced python, sh/bash and http block of README.md and docs/*.md runs
as written (tests/docs/runner.py says how), in order per file, each file on a
fresh database; a block that cannot run here carries, on the line before
its fence, `<!-- doc-runner: skip — <why> -->`, and is skipped with that
reason. A file whose blocks call the API starts a `convo serve`: its
blocks are marked slow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.blocks import runnable
from tests.docs.runner import ROOT, DocRuns

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _cases() -> list[object]:
    cases: list[object] = []
    for path in DOCUMENTS:
        found = runnable(path)
        serves = any(block.calls_the_api and block.skip_reason() is None for block in found)
        marks = [pytest.mark.slow] if serves else []
        cases += [
            pytest.param(path, index, id=block.name, marks=marks)
            for index, block in enumerate(found)
        ]
    return cases


@pytest.fixture(scope="session")
def doc_runs(database_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocRuns]:
    runs = DocRuns(database_server, tmp_path_factory.mktemp("doc-runner"))
    yield runs
    runs.close()


@pytest.mark.parametrize(("path", "index"), _cases())
def test_the_block_runs_as_written(path: Path, index: int, doc_runs: DocRuns) -> None:
    doc_runs.run(path, index)


def test_every_document_is_read() -> None:
    # A marker the runner cannot read would run the block it meant to skip.
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        markers = text.count("doc-runner:")
        skipped = sum(1 for block in runnable(path) if block.skip is not None)
        assert markers == skipped, f"{path.name}: a doc-runner marker not right before a fence"
