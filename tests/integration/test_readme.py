"""The README's library example, run as a program, prints what the README shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.unit.test_readme import README


def test_the_library_example_prints_what_it_shows_and_the_same_verdicts_when_run_again(tmp_path: Path) -> None:
    """Issue 33, item 8: the README said a second run finds every text ``exact``; it prints the same verdicts."""

    text = README.read_text(encoding="utf-8")
    section = text[text.index("## As a library"):text.index("## From the command line")]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shown = re.search(r"```text\n(.*?)```", section, re.S)
    assert code is not None and shown is not None
    (tmp_path / "example.py").write_text(code.group(1), encoding="utf-8")
    runs = [subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, check=True).stdout for _ in range(2)]
    assert runs[0] == shown.group(1)
    assert runs[1] == shown.group(1).replace(" None\n", " same\n")
    assert "run it again and each id gets the verdict it was given" in section
