"""The README's search block, run as shown against a real node."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from tests.support import README

TYPHOON = "第二十号台风今天下午在海南文昌沿海登陆，登陆时中心附近最大风力十二级，当地已转移群众两万多人。" * 6


FOOTBALL = "主队球员陆续登场，比赛风格硬朗，看台上的球迷高声呐喊，客队最终以一比二告负。" * 6  # 台 风 登 陆, no word


@pytest.fixture
def news(es_client: Elasticsearch, es_url: str, tmp_path: Path) -> Iterator[str]:
    """The README's index "news", under a unique name, with a typhoon report and a football report."""
    from es_plugin.commands.ingest import ingest
    from es_plugin.index.template import template_name
    from scrapy_zhdedup.config import DedupConfig, EsConfig

    index = f"zhdedup-test-readme-{uuid.uuid4().hex[:10]}"
    corpus = tmp_path / "news.jsonl"
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"id": "typhoon", "title": "台风登陆海南", "text": TYPHOON},
        {"id": "football", "title": "主队一比二告负", "text": FOOTBALL},
    ]), encoding="utf-8")
    ingest([corpus], DedupConfig(), EsConfig(es_url=es_url, es_index=index, es_dead_letter=str(tmp_path / "d.jsonl")),
           checkpoint_dir=tmp_path / "ck")
    yield index
    es_client.indices.delete(index=index)
    es_client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))


@pytest.mark.es
def test_the_search_block_runs_as_shown(news: str, es_url: str) -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- print-body:start -->\n```bash\n(.*?)```\n<!-- print-body:end -->", text, re.S)
    assert block is not None
    command = block.group(1).replace("http://127.0.0.1:9200/news/", f"{es_url}/{news}/")
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True)
    hits = json.loads(proc.stdout)["hits"]["hits"]
    assert [h["_source"]["zhdedup"]["doc_id"] for h in hits] == ["typhoon"]  # not the football report
