"""The README's library example, run as a program, prints what the README shows; its install from a
checkout installs a package that works outside the checkout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support import README, ROOT


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


def test_pip_install_from_a_clone_gives_a_zhdedup_that_works_outside_it(tmp_path: Path) -> None:
    """Issue 42, finding 5: the README's ``pip install .`` in a clone (the index may not carry the package):
    the wheel built from a fresh clone holds every module and the report's page, and ``zhdedup`` run from
    elsewhere scans and reports with it (its dependencies from this environment)."""
    install = README.read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "git clone" in install and "pip install ." in install and 'pip install -e ".[es]"' in install
    clone, wheels, site = tmp_path / "clone", tmp_path / "wheels", tmp_path / "site"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(clone)], check=True, timeout=600,
                   capture_output=True)
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), *map(str, wheels.glob("*.whl"))],
                   check=True, timeout=300, capture_output=True)
    (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "国家统计局今天发布数据。"}\n'
                                      '{"id": "b", "text": "國家統計局今天發佈數據。"}\n', encoding="utf-8")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    for argv in (["scan", "c.jsonl", "-o", "v.jsonl"], ["report", "v.jsonl", "--input", "c.jsonl", "-o", "r.html"]):
        run = subprocess.run([sys.executable, "-m", "scrapy_zhdedup.cli", *argv], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr
    where = subprocess.run([sys.executable, "-c", "import scrapy_zhdedup.files.atomic as m; print(m.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site)) and '"status": "exact"' in (tmp_path / "v.jsonl").read_text(encoding="utf-8")
