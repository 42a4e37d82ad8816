"""`make bench`: run every benchmark (or the named ones); each writes
bench/results/<name>.json. Then `bench.summary` turns all the results files
into docs/benchmarks.md. `CONVO_BENCH_QUICK=1` (`make bench-quick`): fewer
repeats, same sizes where a goal names one, results and their page in
bench/results/quick/ (not tracked), never over the published ones.

`peers` (bench/peers: the store against langchain-postgres, the OpenAI
Agents SDK, Google ADK and LangGraph) runs only when named, in the peers'
own virtualenv: `make bench-peers` (which `make bench` runs when
`.venv-peers` exists)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = (
    "write_path",
    "read_path",
    "processes",
    "read_scaling",
    "cache_reuse",
    "http_load",
    "compaction",
    "export_feed",
    "search",
    "fork",
    "fairness",
)


# Named only (their own virtualenv, a soak rather than a benchmark, or
# servers of their own to start).
ON_REQUEST = ("peers", "frameworks", "reliability", "replicas")
USAGE = (
    "usage: python -m bench [NAME ...]\n"
    f"  every benchmark by default: {', '.join(BENCHMARKS)}\n"
    f"  named only: {', '.join(ON_REQUEST)}\n"
    "  CONVO_BENCH_QUICK=1: fewer repeats, results in bench/results/quick/"
)


def main(names: list[str]) -> None:
    if any(name.startswith("-") for name in names):
        print(USAGE)
        raise SystemExit(0 if set(names) <= {"-h", "--help"} else 2)
    unknown = [n for n in names if n not in (*BENCHMARKS, *ON_REQUEST, "summary")]
    if unknown:
        print(f"no benchmark named {', '.join(unknown)}\n{USAGE}", file=sys.stderr)
        raise SystemExit(2)
    for name in names or BENCHMARKS:
        if name == "summary":
            continue
        print(f"== bench: {name}", flush=True)
        importlib.import_module(f"bench.{name}").main()
    print("== bench: summary", flush=True)
    importlib.import_module("bench.summary").main()


if __name__ == "__main__":
    main(sys.argv[1:])
