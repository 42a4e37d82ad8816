"""Writing benchmark results: one JSON file per benchmark, plus a table."""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS_DIR = Path(__file__).parent / "results"


def write_results(name: str, figures: dict[str, Any], *, notes: str = "") -> Path:
    """Write `figures` to bench/results/<name>.json with when and where they ran."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    document = {
        "benchmark": name,
        "ran_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "notes": notes,
        "figures": figures,
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return path


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    Console().print(table)
