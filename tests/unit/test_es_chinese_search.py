"""The Chinese search presets without a node: the mapping an analysis plugin's preset writes, and how a
``jieba`` query is segmented and normalised (the search itself on the real node: tests/es/test_es_chinese_search.py)."""

from __future__ import annotations

from typing import cast

import pytest

from es_plugin.index.chinese import SearchText
from es_plugin.index.template import template_body
from scrapy_zhdedup.config import Analysis
from scrapy_zhdedup.index.bands import BandLayout


@pytest.mark.parametrize(("analysis", "expected"), [
    ("smartcn", {"analyzer": "smartcn"}),
    ("ik", {"analyzer": "ik_max_word", "search_analyzer": "ik_smart"}),
])
def test_plugin_presets_map_the_text_with_the_plugin(analysis: str, expected: dict[str, str]) -> None:
    """Our node has neither plugin: only the mapping body is checked."""
    search = SearchText("content", cast(Analysis, analysis))
    props = template_body("news", BandLayout(k=3), search=search)["template"]["mappings"]["properties"]
    assert props["content"] == {"type": "text", **expected} and props["title"] == props["content"]
    assert search.query_text("台风 登陆") == "台风 登陆" and search.searched(["title", "content"]) == ["title", "content"]


def test_jieba_queries_are_segmented_and_normalised() -> None:
    search = SearchText()
    assert search.query_text("臺風登陸") == "台风 登陆"
    assert search.query_text("ＡＢＣ 公司，上市") == "abc 公司 上市"
    assert search.searched(["title", "text"]) == ["title", "zhdedup.words"]
