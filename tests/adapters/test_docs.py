"""Every Python example in docs/adapters.md runs as written (on the in-memory
repository). An example whose first line is `# requires: <module>` is skipped
where that module is not installed (google-adk lives in .venv-adk); one with
`<!-- doc-runner: skip — <why> -->` on the line before its fence (it needs a
running server) is skipped with that reason."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"
EXAMPLES = re.findall(
    r"^(?:<!-- doc-runner: skip — ([^\n]*?) -->\n)?```python\n(.*?)```",
    DOC.read_text(encoding="utf-8"),
    re.S | re.M,
)
BLOCKS = [block for _, block in EXAMPLES]
SKIPPED = {block: why for why, block in EXAMPLES if why}


def _needs(block: str) -> str | None:
    found = re.match(r"# requires: (\S+)", block)
    return found.group(1) if found else None


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example-{i}" for i in range(len(BLOCKS))])
def test_example_runs(block: str) -> None:
    if block in SKIPPED:
        pytest.skip(SKIPPED[block])
    needs = _needs(block)
    if needs is not None and importlib.util.find_spec(needs.split(".")[0]) is None:
        pytest.skip(f"{needs} is not installed here")
    if needs is not None:
        pytest.importorskip(needs)
    # A real module: LangGraph resolves a state's annotations through it.
    module = types.ModuleType("convo_doc_example")
    sys.modules[module.__name__] = module
    try:
        exec(compile(block, str(DOC), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
