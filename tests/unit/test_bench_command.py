"""`python -m bench`: help and a misspelt name are answered, never a traceback."""

from __future__ import annotations

import pytest

from bench.__main__ import main


def test_help_lists_the_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--help"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    assert "write_path" in out
    assert "frameworks" in out


def test_an_unknown_name_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["write_pth"])
    assert ended.value.code == 2
    assert "no benchmark named write_pth" in capsys.readouterr().err
