"""The embedded judge: :class:`Deduper` = the pure step (:class:`~scrapy_zhdedup.similarity.fingerprinter.Fingerprinter`),
:func:`~scrapy_zhdedup.judge.judge` and an :class:`~scrapy_zhdedup.store.embedded.EmbeddedStore`."""

from __future__ import annotations

from pathlib import Path

from .config import DedupConfig
from .index.nearindex import CandidateKeys
from .judge import judge
from .model import Prepared, Verdict
from .similarity.fingerprinter import Fingerprinter
from .similarity.rule import NearRule
from .store.embedded import EmbeddedStore


class Deduper:
    """Judges documents in arrival order against everything judged before, on the embedded store."""

    def __init__(self, config: DedupConfig | None = None, store: EmbeddedStore | None = None) -> None:
        self.config = config or DedupConfig()
        self.fingerprinter = Fingerprinter(self.config)
        self.store = store if store is not None else EmbeddedStore(
            CandidateKeys.from_config(self.config), rule=NearRule.from_config(self.config))

    @classmethod
    def open(cls, config: DedupConfig, store_dir: str | Path | None) -> Deduper:
        store = EmbeddedStore.open(CandidateKeys.from_config(config), Path(store_dir) if store_dir else None,
                                   error_rate=config.bloom_error_rate, initial_capacity=config.bloom_capacity,
                                   rule=NearRule.from_config(config), config=config)
        return cls(config, store)

    def judge(self, doc_id: str, *, text: str | None = None, html: str | bytes | None = None,
              encoding: str | None = None) -> Verdict:
        """Judge and remember one document (errors: :meth:`Fingerprinter.prepare`)."""
        return self.judge_prepared(self.fingerprinter.prepare(doc_id, text=text, html=html, encoding=encoding))

    def judge_prepared(self, prepared: Prepared) -> Verdict:
        """Judge and remember one document prepared here or by a worker process (workers.py), its features
        computed by :attr:`fingerprinter` if it needs them and does not carry them."""
        return judge(prepared, self.store, self.fingerprinter.features)

    def save(self) -> None:
        """Snapshot the store (each verdict is already in its log); the store stays open."""
        self.store.save()

    def close(self) -> None:
        """Snapshot the store and release its directory lock."""
        self.store.close()
