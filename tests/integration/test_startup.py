"""What ``zhdedup`` sets up before numpy is loaded (issue 40): importing the command line loads no numpy, so
its one-OpenBLAS-thread default reaches numpy, and a user's own setting is kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT

PROBE = "import os, sys, scrapy_zhdedup.cli; print('numpy' in sys.modules, os.environ['OPENBLAS_NUM_THREADS'])"


def _probe(**env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    clean["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.split()


def test_the_command_line_sets_one_openblas_thread_before_numpy_loads() -> None:
    assert _probe() == ["False", "1"]


def test_a_users_openblas_setting_is_kept() -> None:
    assert _probe(OPENBLAS_NUM_THREADS="4") == ["False", "4"]


def test_the_packages_names_are_imported_when_used() -> None:
    import scrapy_zhdedup
    from scrapy_zhdedup.deduper import Deduper

    assert scrapy_zhdedup.Deduper is Deduper
    assert all(getattr(scrapy_zhdedup, name) for name in scrapy_zhdedup.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Dedupr'"):
        scrapy_zhdedup.Dedupr  # noqa: B018
