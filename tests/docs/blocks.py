"""The fenced code blocks of a Markdown file, and which of them run.

A block runs when its fence names `python` (or `py`), `sh`, `bash`,
`shell`, `console` or `http`; any other fence (`json`, none) is shown,
not run. A block whose fence is preceded, on the line right before it, by

    <!-- doc-runner: skip — why it cannot run in a test -->

is not run, and the reason is the test's skip reason. A Python block
whose first line is `# requires: <module>` is skipped where that module is
not installed (google-adk lives in its own virtualenv).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

RUNS = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
RUNS |= {"console": "sh", "http": "http"}

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_SKIP = re.compile(r"<!--\s*doc-runner:\s*skip\s*(?:—|--|-|:)\s*(?P<why>.*?)\s*-->")
_REQUIRES = re.compile(r"#\s*requires:\s*(\S+)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    kind: str  # python, sh, http, or "" (shown, not run)
    code: str
    skip: str | None  # the marker's reason

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}:{self.kind}"

    def skip_reason(self) -> str | None:
        if self.skip is not None:
            return self.skip
        needs = _REQUIRES.match(self.code)
        if self.kind == "python" and needs is not None:
            module = needs.group(1)
            try:
                installed = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                installed = False
            if not installed:
                return f"needs {module}, not installed here"
        return None

    @property
    def calls_the_api(self) -> bool:
        return self.kind == "http" or (self.kind == "sh" and "curl " in self.code)


def blocks(path: Path) -> list[Block]:
    """Every fenced block of `path`, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1
        marker = _SKIP.search(lines[start - 1]) if start > 0 else None
        found.append(
            Block(
                path=path,
                line=start + 1,
                kind=RUNS.get(opening.group("info").lower(), ""),
                code="\n".join(body) + "\n",
                skip=marker.group("why") if marker else None,
            )
        )
    return found


def runnable(path: Path) -> list[Block]:
    return [block for block in blocks(path) if block.kind]
