"""The doc-runner's reading of Markdown: which blocks run, which are skipped
and why, and what of a console transcript is run."""

from __future__ import annotations

from pathlib import Path

from tests.docs.blocks import blocks, runnable
from tests.docs.runner import _commands_of_transcript

DOC = """\
# A page

```python
print("runs")
```

<!-- doc-runner: skip — needs a GPU -->
```sh
nvidia-smi
```

```json
{"shown": true}
```

- in a list:

  ```bash
  echo indented
  ```

```python
# requires: no_such_module_here
import no_such_module_here
```
"""


def test_blocks_kinds_markers_and_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(DOC)
    found = blocks(page)
    assert [(b.kind, b.line) for b in found] == [
        ("python", 3),
        ("sh", 8),
        ("", 12),
        ("sh", 18),
        ("python", 22),
    ]
    run = runnable(page)
    assert [b.name for b in run] == [
        "page.md:3:python",
        "page.md:8:sh",
        "page.md:18:sh",
        "page.md:22:python",
    ]
    assert run[0].skip_reason() is None
    assert run[1].skip_reason() == "needs a GPU"
    assert run[2].code == "echo indented\n"
    assert run[3].skip_reason() == "needs no_such_module_here, not installed here"


def test_a_transcript_runs_its_commands_only() -> None:
    transcript = "$ convo keys create --tenant acme \\\n    --name laptop\ncreated key …\ncs_abc\n"
    assert _commands_of_transcript(transcript) == (
        "convo keys create --tenant acme \\\n    --name laptop\n"
    )
    plain = "echo one\necho two\n"
    assert _commands_of_transcript(plain) == plain
