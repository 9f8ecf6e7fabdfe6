"""The install a user gets: a light core, optional parts behind named extras, typed packages, a licence."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import es_plugin
import scrapy_zhdedup
from scrapy_zhdedup import Deduper
from scrapy_zhdedup.config import DedupConfig
from tests.support import ROOT

DIST = "scrapy-zhdedup"


def _requirement_names(extra: str | None) -> set[str]:
    """Names required by the core (extra=None) or by one extra, from the installed metadata."""
    reqs = [Requirement(line) for line in metadata.requires(DIST) or []]
    if extra is None:
        return {r.name.lower() for r in reqs if r.marker is None}
    return {r.name.lower() for r in reqs if r.marker is not None and r.marker.evaluate({"extra": extra})}


def test_core_install_leaves_out_the_optional_parts() -> None:
    core = _requirement_names(None)
    assert {"scrapy", "jieba", "rjieba", "pybloom-live"} <= core
    assert not core & {"elasticsearch", "trafilatura", "simhash"}


def test_each_optional_part_has_its_extra() -> None:
    assert _requirement_names("es") == {"elasticsearch"}
    assert _requirement_names("trafilatura") == {"trafilatura"}
    # The test suite needs everything: the Elasticsearch backend, trafilatura, and simhash as the reference.
    assert {DIST, "simhash"} <= _requirement_names("test")




def test_trafilatura_extractor_without_trafilatura_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # what `import trafilatura` meets when it is absent
    with pytest.raises(ImportError, match=r'pip install "scrapy-zhdedup\[trafilatura\]"'):
        Deduper(DedupConfig(extractor="trafilatura"))


@pytest.mark.parametrize("package", [scrapy_zhdedup, es_plugin])
def test_packages_are_marked_typed(package: object) -> None:
    assert (Path(package.__file__).parent / "py.typed").is_file()  # type: ignore[attr-defined]  # a module object, known to have __file__


def test_licence_file_matches_the_metadata() -> None:
    assert metadata.metadata(DIST)["License-Expression"] == "MIT"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_the_description_names_what_decides_today() -> None:
    """Issue 33, item 9: it still said "(Bloom filter + SimHash bands)", which are off by default."""
    import re

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    description = re.search(r'^description = "(.*)"$', pyproject, re.M).group(1)  # type: ignore[union-attr]
    assert "SimHash bands" not in description and "MinHash" in description
