"""The embedded path, imported in a fresh interpreter, leaves the optional parts out."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT


def test_embedded_path_imports_neither_elasticsearch_nor_trafilatura() -> None:
    code = (
        "import sys, scrapy_zhdedup.pipelines, scrapy_zhdedup.deduper; "
        "print(sorted(m for m in ('elasticsearch', 'elastic_transport', 'trafilatura') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
