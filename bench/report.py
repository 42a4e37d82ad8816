"""Writing benchmark results: one JSON file per benchmark, plus a table."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

PUBLISHED_DIR = Path(__file__).parent / "results"


def _results_dir() -> Path:
    """Where this run writes: `CONVO_BENCH_RESULTS` if set; a quick run
    (`CONVO_BENCH_QUICK=1`) elsewhere under results/quick (ignored by git),
    so only a full `make bench` rewrites the published figures."""
    chosen = os.environ.get("CONVO_BENCH_RESULTS")
    if chosen:
        return Path(chosen)
    return PUBLISHED_DIR / "quick" if os.environ.get("CONVO_BENCH_QUICK") else PUBLISHED_DIR


RESULTS_DIR = _results_dir()
PACKAGES = ("sqlalchemy", "psycopg", "pydantic")


def local_facts() -> dict[str, Any]:
    """The machine and the Python side: cores, memory, Python, driver stack."""
    from importlib.metadata import version

    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": sys.version.split()[0],
        "packages": {name: version(name) for name in PACKAGES},
    }


def write_results(
    name: str,
    figures: dict[str, Any],
    *,
    notes: str = "",
    machine: dict[str, Any] | None = None,
) -> Path:
    """Write `figures` to `RESULTS_DIR`/<name>.json with when and where they ran
    (`machine`: more facts about where, e.g. `bench.harness.machine_facts`).

    A benchmark with goals puts them in `figures["comparisons"]` (see
    `comparison`); `bench.summary` turns those into docs/benchmarks.md."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    document = {
        "benchmark": name,
        "ran_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            **(machine or {}),
        },
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


def comparison(
    figure: str,
    store: float | None,
    baseline: float | None,
    *,
    unit: str,
    baseline_name: str,
    goal: tuple[str, float] | None = None,
    ratio: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    """One row of the summary: the store's figure, its baseline, store/baseline,
    and the goal on that ratio (`("<=", 2.0)` or `(">=", 0.7)`), met or not.
    `ratio` overrides store/baseline (e.g. bytes measured apart). A figure that
    could not be measured is `None`, its goal neither met nor missed."""
    if ratio is None and store is not None and baseline:
        ratio = store / baseline
    met: bool | None = None
    if goal is not None and ratio is not None:
        op, bound = goal
        met = ratio <= bound if op == "<=" else ratio >= bound
    return {
        "figure": figure,
        "store": store,
        "baseline": baseline,
        "baseline_name": baseline_name,
        "unit": unit,
        "ratio": ratio,
        "goal": None if goal is None else {"op": goal[0], "value": goal[1]},
        "met": met,
        "note": note,
    }


# A table row for `compared`: (figure, the store's figure, the baseline's,
# the baseline's name, the goal on their ratio or None for an info row, a note).
Compared = tuple[str, float | None, float | None, str, tuple[str, float] | None, str]


def compared(rows: Iterable[Compared], *, unit: str) -> list[dict[str, Any]]:
    """A `comparison` of each row, all figures in `unit`."""
    return [
        comparison(figure, store, baseline, unit=unit, baseline_name=name, goal=goal, note=note)
        for figure, store, baseline, name, goal, note in rows
    ]


def _goal_text(goal: dict[str, Any] | None) -> str:
    if goal is None:
        return "—"
    return f"{'≤' if goal['op'] == '<=' else '≥'} {goal['value']:g}"


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def comparison_cells(row: dict[str, Any]) -> list[str]:
    """figure, store, baseline, ratio, goal, met: as the tables show them."""
    unit = row["unit"]
    met = {True: "✅", False: "❌", None: "—"}[row["met"]]

    def value(v: float | None) -> str:
        return "n/a" if v is None else f"{_number(v)} {unit}"

    return [
        row["figure"],
        value(row["store"]),
        f"{value(row['baseline'])} ({row['baseline_name']})",
        "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}",
        _goal_text(row["goal"]),
        met,
    ]


def print_comparisons(title: str, rows: list[dict[str, Any]]) -> None:
    print_table(
        title,
        ["figure", "store", "baseline", "ratio", "goal", "met"],
        [comparison_cells(row) for row in rows],
    )
