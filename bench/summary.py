"""docs/benchmarks.md from bench/results/*.json: where they ran, and every
figure a benchmark compared with its baseline and goal.

Run last by `python -m bench` (also alone: `python -m bench summary` or
`python -m bench.summary`). Every number in the page comes from a results
file; nothing is typed in by hand. Needs no database and does not import
the store, so it works whatever state the store's code is in.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.report import PUBLISHED_DIR, RESULTS_DIR, comparison_cells, local_facts

# Only the published results make the published page; a quick run's page
# stays beside its results.
DOCS = (
    Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
    if RESULTS_DIR == PUBLISHED_DIR
    else RESULTS_DIR / "benchmarks.md"
)
ORDER = ("write_path", "read_path", "read_scaling", "cache_reuse", "http_load", "peers")


def load_results() -> list[dict[str, Any]]:
    documents = [json.loads(path.read_text()) for path in sorted(RESULTS_DIR.glob("*.json"))]

    def rank(document: dict[str, Any]) -> tuple[int, str]:
        name = str(document.get("benchmark", ""))
        return (ORDER.index(name) if name in ORDER else len(ORDER), name)

    return sorted(documents, key=rank)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _machine(documents: list[dict[str, Any]]) -> list[str]:
    here = local_facts()
    servers = sorted(
        {str(d["machine"]["postgresql"]) for d in documents if d["machine"].get("postgresql")}
    )
    settings = next(
        (d["machine"]["server_settings"] for d in documents if "server_settings" in d["machine"]),
        None,
    )
    packages = ", ".join(f"{name} {v}" for name, v in here["packages"].items())
    lines = [
        "## Machine",
        "",
        f"- CPUs (nproc): {here['nproc']}",
        f"- memory: {here['memory_gib']} GiB",
        f"- PostgreSQL server: {', '.join(servers) or 'not recorded by these results'}",
    ]
    if settings:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
        lines.append(f"- server settings: {shown}")
    lines += [f"- Python: {here['python']}", f"- packages: {packages}", ""]
    return lines


def _section(document: dict[str, Any]) -> list[str]:
    name = document["benchmark"]
    figures = document.get("figures", {})
    mode = figures.get("quick")
    run = "" if mode is None else (" (quick run)" if mode else " (full run)")
    load = document["machine"].get("load_average_1min")
    busy = ""
    if load is not None:
        cpus = document["machine"].get("nproc", "?")
        busy = (
            f" 1-minute load average {load['start']:.1f} at the start and"
            f" {load['end']:.1f} at the end, on {cpus} CPUs."
        )
    code = document["machine"].get("code")
    at = f" on code {code}" if code else ""
    lines = [
        f"## {name}",
        "",
        f"Ran at {document['ran_at']}{at}{run}; all figures in `bench/results/{name}.json`.{busy}",
        "",
    ]
    rows = figures.get("comparisons")
    extra = _peers(figures) if name == "peers" else _http_load(figures)
    if not rows:
        return [*lines, "No goals recorded by this benchmark.", "", *extra]
    lines += [
        "| figure | store | baseline | ratio | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = comparison_cells(row)
        if row.get("note"):
            cells[0] += f" ({row['note']})"
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*lines, "", *extra]


def _http_load(figures: dict[str, Any]) -> list[str]:
    """bench.http_load's table: each operation, side and load with its rate,
    median and p99; for HTTP, the load generator's own CPU, which shares the
    cores with the server. Empty for other benchmarks."""
    rows = figures.get("table") if "closed_loop" in figures else None
    if not rows:
        return []

    def shown(value: float | None, digits: str = ".1f") -> str:
        return "—" if value is None else format(value, digits)

    lines = [
        "### HTTP under load",
        "",
        "Closed loop: N clients, each on its own conversation, each sending its next "
        "request when the previous one answered; open loop: a fixed schedule, latency "
        "from when a request was due. Generator CPU is this process's (bench.http_client) per "
        "request and in cores; busy cores: the whole machine (other work included).",
        "",
        "| operation | side | clients | requests/s | median ms | p99 ms "
        "| generator µs/request | generator cores | server cores | busy cores | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [
            row["operation"],
            row["side"],
            row["load"],
            shown(row["requests_per_s"], ",.0f"),
            shown(row["median_ms"], ".2f"),
            shown(row["p99_ms"], ".2f"),
            shown(row["generator_cpu_per_request_us"], ",.0f"),
            shown(row["generator_cores"], ".2f"),
            shown(row["server_cores"], ".2f"),
            shown(row["machine_busy_cores"], ".2f"),
            str(row["errors"]),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*lines, ""]


VERDICT = {"ahead": " ✅", "behind": " ❌", "tie": " ＝", None: ""}


def _peer_value(cell: dict[str, Any], unit: str) -> str:
    if cell.get("text"):
        return str(cell["text"])
    value = cell.get("value")
    if value is None:
        return "n/a"
    shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{shown} {unit}".strip()


def _peers(figures: dict[str, Any]) -> list[str]:
    """bench.peers' table: scenario x system, the store first; ✅ where the
    store is ahead of that peer, ❌ where it is behind, ＝ where level. Then
    the peers that could not run and where the store is not ahead, as the
    results file says."""
    rows = figures.get("table") or []
    if not rows:
        return []
    names = [n for n in figures.get("order", []) if n in rows[0]["cells"]] or list(rows[0]["cells"])
    systems = figures.get("systems", {})

    def heading(name: str) -> str:
        found = systems.get(name, {}).get("versions", {})
        return f"{name} {found.get(name) or ''}".strip()

    lines = [
        "### The store against the peers",
        "",
        "Same server, same generated conversation, one process; each system on its own "
        "fresh database through its own API and driver. ✅ the store is ahead of that peer, "
        "❌ behind, ＝ level. What each call does and returns (and why it is the nearest "
        "equivalent) is in the results file: `systems.<name>.calls`.",
        "",
        "| scenario | " + " | ".join(heading(n) for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for row in rows:
        cells = []
        for name in names:
            cell = row["cells"][name]
            text = _peer_value(cell, row["unit"]) + VERDICT[cell.get("verdict")]
            if cell.get("note"):
                text += f" ({cell['note']})"
            cells.append(text)
        lines.append("| " + " | ".join(_cell(c) for c in [row["scenario"], *cells]) + " |")
    lines.append("")
    failed = {n: s["status"] for n, s in systems.items() if s.get("status") != "ok"}
    errors = figures.get("errors") or {}
    if failed or errors:
        lines += ["What could not be measured:", ""]
        lines += [f"- {name}: {why}" for name, why in failed.items()]
        for scenario, by_system in errors.items():
            lines += [f"- {name}, {scenario}: {why}" for name, why in by_system.items()]
        lines.append("")
    behind = figures.get("not_ahead") or []
    if behind:
        lines += ["Where the store is not ahead:", ""]
        lines += [f"- {_cell(note)}" for note in behind]
        lines.append("")
    return lines


def render(documents: list[dict[str, Any]]) -> str:
    rows = [row for d in documents for row in d.get("figures", {}).get("comparisons", [])]
    goals = [row for row in rows if row["goal"] is not None]
    met = sum(1 for row in goals if row["met"])
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m bench.summary` from bench/results/*.json. "
        "Do not edit by hand: rerun `make bench` (or `make bench-quick`). -->",
        "",
        f"Generated {datetime.now(UTC).isoformat(timespec='seconds')}. "
        f"Goals met: {met} of {len(goals)}.",
        "",
        "Ratio = store ÷ baseline (for throughput, the store's share of the baseline's "
        "rate). Each benchmark's notes in its results file say what is measured and why "
        "the comparison is fair.",
        "",
        *_machine(documents),
    ]
    for document in documents:
        lines += _section(document)
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    documents = load_results()
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text(render(documents))
    print(f"wrote {DOCS} from {len(documents)} results files")


if __name__ == "__main__":
    main()
