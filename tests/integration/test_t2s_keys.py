"""The keys text/t2s.py ships are those of the installed OpenCC (read with its opencc_dict tool: a process)."""

from __future__ import annotations

from pathlib import Path

import opencc
import pytest

from scrapy_zhdedup.text import t2s, t2s_keys

CONFIG = Path(opencc.OpenCC("t2s").config)
TOOL = Path(opencc.__file__).parent / "clib" / "bin" / "opencc_dict"


@pytest.mark.skipif(not TOOL.is_file(), reason="this OpenCC install ships no opencc_dict tool")
def test_the_shipped_keys_are_those_of_the_installed_dictionaries() -> None:
    """Fails when OpenCC's dictionaries change: run scripts/update_t2s_keys.py (meanwhile every text converts)."""
    assert t2s.digest(CONFIG) == t2s_keys.DIGEST
    assert t2s.derive(CONFIG, TOOL) == (t2s_keys.CHARACTERS, t2s_keys.PHRASES, t2s_keys.PHRASE_CHARACTERS)
