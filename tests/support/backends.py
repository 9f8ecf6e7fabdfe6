"""A third backend, as a user would write one: only ``judge`` (loaded by its dotted path in ``ZHDEDUP_BACKEND``)."""

from __future__ import annotations

from typing import Any

from scrapy_zhdedup import DedupConfig, Deduper, Verdict
from scrapy_zhdedup.pipelines.backends import Backend


class JudgeOnly(Backend):
    """The engine in memory; remembers the documents it was given."""

    def __init__(self) -> None:
        self.deduper = Deduper(DedupConfig())
        self.documents: list[dict[str, Any]] = []

    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        self.documents.append(document)
        return self.deduper.judge(doc_id, text=text, html=html)


class StoresDocuments(JudgeOnly):
    stores_documents = True
