"""No module in the library or the service is over MAX_LINES lines: past
that a module holds more than one idea, and a newcomer cannot find the one
they look for by its name (split it by concern, as store/repository/ is)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600
FOLDERS = ("store", "api")


def test_no_module_is_over_the_limit() -> None:
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    assert sizes, "no modules found: is ROOT the repository?"
    over = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
