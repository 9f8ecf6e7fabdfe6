"""README.md says what the code does: its generated blocks are current (its examples run as shown:
tests/integration/test_readme.py, tests/es/test_readme.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from types import ModuleType

from tests.support import README, ROOT


def update_readme() -> ModuleType:
    spec = importlib.util.spec_from_file_location("update_readme", ROOT / "scripts" / "update_readme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_blocks_are_current() -> None:
    """The settings table (every ZHDEDUP_* setting) and the --print-body example, as the code makes them."""
    assert update_readme().main(["--check"]) == 0, "README.md is stale: run .venv/bin/python scripts/update_readme.py"


def test_settings_table_lists_every_setting() -> None:
    from scrapy_zhdedup.config import PREFIX, DedupConfig, EsConfig, PipelineConfig

    text = README.read_text(encoding="utf-8")
    for cls in (PipelineConfig, DedupConfig, EsConfig):
        for f in dataclasses.fields(cls):
            assert f"| `{PREFIX}{f.name.upper()}`" in text








def test_the_files_it_names_under_tests_exist() -> None:
    """The README points at tests and their helpers by path (tests/<directory>/<module>.py): none may be stale."""
    named = set(re.findall(r"\btests/[\w/]+\.py\b", README.read_text(encoding="utf-8")))
    assert named and not {path for path in named if not (ROOT / path).is_file()}
