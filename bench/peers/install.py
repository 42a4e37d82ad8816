"""Install the project and the peers into the peers' own virtualenv; run by
that virtualenv's python (`make bench-peers`). Standard library only.

The project goes in with constraints.txt (minus the names
bench/peers_requirements.txt overrides), as `make install` puts it into
.venv; it must install. Then each peer on its own, pinned by
bench/peers_requirements.txt: a peer that fails to install is written to
`<venv>/peers-install.json` with pip's error, and the benchmark reports it
with that reason instead of dropping it; the others go on.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "bench" / "peers_requirements.txt"
CONSTRAINTS = ROOT / "constraints.txt"
REPORT = Path(sys.prefix) / "peers-install.json"

# Peer (as bench.peers.systems names it) -> the distributions it needs.
PEERS = {
    "langchain-postgres": ["langchain-postgres"],
    "openai-agents": ["openai-agents", "asyncpg"],
    "google-adk": ["google-adk", "asyncpg"],
    "langgraph": ["langgraph", "langgraph-checkpoint-postgres"],
}


def _name(line: str) -> str | None:
    """The normalised distribution name a `name==version` line pins."""
    line = line.split("#", 1)[0].strip()
    if "==" not in line:
        return None
    return re.sub(r"[-_.]+", "-", line.split("==", 1)[0].strip()).lower()


def constraints(out: Path) -> Path:
    """constraints.txt without the names bench/peers_requirements.txt pins."""
    overridden = {_name(line) for line in REQUIREMENTS.read_text().splitlines()} - {None}
    kept = [line for line in CONSTRAINTS.read_text().splitlines() if _name(line) not in overridden]
    out.write_text("\n".join(kept) + "\n")
    return out


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    return subprocess.run([*command, *args], capture_output=True, text=True, check=False)


def reason(result: subprocess.CompletedProcess[str]) -> str:
    """pip's first error and the resolver's explanation, else its last lines."""
    lines = [line.strip() for line in (result.stderr + result.stdout).splitlines()]
    lines = [line for line in lines if line and not line.startswith("WARNING")]
    errors = [line for line in lines if line.startswith("ERROR")][:1]
    if "The conflict is caused by:" in lines:
        at = lines.index("The conflict is caused by:")
        errors += [line for line in lines[at + 1 : at + 5] if not line.startswith("To fix")]
    return " ".join(errors or lines[-3:] or ["pip failed"])[:600]


def main() -> int:
    pinned = constraints(Path(sys.prefix) / "constraints.txt")
    project = pip("-c", str(pinned), "-c", str(REQUIREMENTS), "-e", f"{ROOT}[embedded]")
    if project.returncode != 0:
        print(f"installing the project failed: {reason(project)}", file=sys.stderr)
        return 1
    report: dict[str, dict[str, object]] = {}
    for peer, distributions in PEERS.items():
        result = pip("-c", str(pinned), "-c", str(REQUIREMENTS), *distributions)
        ok = result.returncode == 0
        report[peer] = {"installed": ok, "error": None if ok else reason(result)}
        print(f"peer {peer}: {'installed' if ok else 'NOT installed: ' + reason(result)}")
    REPORT.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
