"""The console's files, read as text (no browser, no database): shipped in
the wheel, and written so that the page never parses data as HTML and
needs nothing the Content-Security-Policy forbids."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

from api.console import CONTENT_SECURITY_POLICY, STATIC

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(path for path in STATIC.rglob("*") if path.is_file())
SCRIPTS = [path for path in FILES if path.suffix == ".js"]
# Ways of turning a string into markup or code.
MARKUP_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|srcdoc"
)


def test_every_file_is_shipped_in_the_wheel() -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = settings["package-data"]["api"]
    package = ROOT / "api"
    unshipped = [
        str(path.relative_to(package))
        for path in FILES
        if not any(fnmatch(str(path.relative_to(package)), pattern) for pattern in patterns)
    ]
    assert not unshipped, f"add to [tool.setuptools.package-data] api: {unshipped}"
    assert {"index.html", "console.css", "main.js", "api.js", "dom.js"} <= {p.name for p in FILES}


def test_no_script_puts_a_string_into_the_page_as_markup() -> None:
    for path in SCRIPTS:
        text = path.read_text()
        found = MARKUP_SINKS.findall(text)
        assert not found, f"{path.name}: {found}"


def test_the_page_has_nothing_inline() -> None:
    page = (STATIC / "index.html").read_text()
    for script in re.findall(r"<script\b[^>]*>", page):
        assert "src=" in script, script
    assert re.search(r"<script\b[^>]*>\s*[^<\s]", page) is None  # no inline code
    assert "<style" not in page
    assert re.search(r"\sstyle=", page) is None
    assert re.search(r"\son[a-z]+=", page) is None
    assert re.search(r"https?://", page) is None  # nothing from elsewhere
    for path in SCRIPTS:
        assert re.search(r"""from\s+["']https?:""", path.read_text()) is None, path.name


def test_the_policy_allows_only_this_origin() -> None:
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "unsafe-eval" not in CONTENT_SECURITY_POLICY
