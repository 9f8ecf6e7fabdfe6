"""README.md says what the code does: its generated blocks are current, and its search block runs as shown."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from elasticsearch import Elasticsearch

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TYPHOON = "第二十号台风今天下午在海南文昌沿海登陆，登陆时中心附近最大风力十二级，当地已转移群众两万多人。" * 6
FOOTBALL = "主队球员陆续登场，比赛风格硬朗，看台上的球迷高声呐喊，客队最终以一比二告负。" * 6  # 台 风 登 陆, no word


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


def test_the_library_example_prints_what_it_shows_and_the_same_verdicts_when_run_again(tmp_path: Path) -> None:
    """Issue 33, item 8: the README said a second run finds every text ``exact``; it prints the same verdicts."""
    import sys

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
