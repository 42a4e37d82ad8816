"""`make bench`: run every benchmark; each writes bench/results/<name>.json."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = ("append_latency", "read_scaling", "cache_reuse")


def main(names: list[str]) -> None:
    for name in names or BENCHMARKS:
        print(f"== bench: {name}", flush=True)
        importlib.import_module(f"bench.{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
