"""The decision for one document: unique, an exact repeat, or a near repeat of an earlier one.

Order matters for speed: the content hash needs only the cleaned text, so exact repeats are
answered before the costly part (segmentation and fingerprint) is ever run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from .config import DedupConfig
from .features import Featurizer
from .fingerprint import SimHasher
from .passages import passage_keys
from .store import EmbeddedStore, Match
from .text import TextCleaner, content_hash

Status = Literal["unique", "exact", "near"]


@dataclass(frozen=True)
class Verdict:
    doc_id: str
    status: Status
    dup_of: str | None
    distance: int | None
    cluster: str
    content_hash: str
    fingerprint: int | None  # None for exact repeats: never computed

    @property
    def is_duplicate(self) -> bool:
        return self.status != "unique"

    def record(self) -> dict[str, Any]:
        """The ``zhdedup scan`` output line."""
        return {"id": self.doc_id, "status": self.status, "dup_of": self.dup_of, "distance": self.distance}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict_for(doc_id: str, content_hash: str, fingerprint: int | None, match: Match | None,
                exact: bool = False) -> Verdict:
    """The one place a match becomes a verdict (shared by the embedded and Elasticsearch paths)."""
    if match is None:
        return Verdict(doc_id, "unique", None, None, doc_id, content_hash, fingerprint)
    return Verdict(doc_id, "exact" if exact else "near", match.doc_id, match.distance, match.cluster,
                   content_hash, fingerprint)


class Fingerprinter:
    """Clean text → weighted features → 64-bit SimHash (pure: safe to call from worker threads)."""

    def __init__(self, config: DedupConfig) -> None:
        self.cleaner = TextCleaner(extractor=config.extractor,  # type: ignore[arg-type]
                                   traditional_to_simplified=config.traditional_to_simplified,
                                   max_chars=config.max_chars)
        self.featurizer = Featurizer(config.features, short_text_chars=config.short_text_chars,  # type: ignore[arg-type]
                                     shingle_size=config.shingle_size)
        self.hasher = SimHasher()
        self.use_passages = config.passages
        self.passage_chars = config.passage_chars

    def clean(self, *, text: str | None = None, html: str | bytes | None = None,
              encoding: str | None = None) -> str:
        return self.cleaner.clean(text=text, html=html, encoding=encoding)

    def fingerprint(self, clean_text: str) -> int:
        return self.hasher(self.featurizer(clean_text))

    def passages(self, clean_text: str) -> list[int]:
        return passage_keys(clean_text, self.passage_chars) if self.use_passages else []


class Deduper:
    """Judges documents in arrival order against everything judged before, on the embedded store."""

    def __init__(self, config: DedupConfig | None = None, store: EmbeddedStore | None = None) -> None:
        self.config = config or DedupConfig()
        self.fingerprinter = Fingerprinter(self.config)
        self.store = store if store is not None else EmbeddedStore(
            self.config.layout, passage_share=self.config.passage_share,
            passage_threshold=self.config.passage_threshold)

    @classmethod
    def open(cls, config: DedupConfig, store_dir: str | Path | None) -> Deduper:
        store = EmbeddedStore.open(config.layout, Path(store_dir) if store_dir else None,
                                   error_rate=config.bloom_error_rate, initial_capacity=config.bloom_capacity,
                                   passage_share=config.passage_share, passage_threshold=config.passage_threshold,
                                   config=config)
        return cls(config, store)

    def check(self, doc_id: str, *, text: str | None = None, html: str | bytes | None = None,
              encoding: str | None = None) -> Verdict:
        """Judge and remember one document. Raises EmptyTextError when nothing is left to judge."""
        if "\x00" in doc_id:
            raise ValueError("document ids may not contain NUL characters")
        clean = self.fingerprinter.clean(text=text, html=html, encoding=encoding)
        digest = content_hash(clean)
        exact = self.store.find_exact(digest)
        if exact is not None:
            self.store.add_repeat(doc_id, digest, exact)
            return verdict_for(doc_id, digest, None, exact, exact=True)
        fp = self.fingerprinter.fingerprint(clean)
        passages = self.fingerprinter.passages(clean)
        near = self.store.find_near(fp, passages)
        self.store.add(doc_id, digest, fp, passages, near)
        return verdict_for(doc_id, digest, fp, near)

    def save(self) -> None:
        """Snapshot the store (each verdict is already in its log); the store stays open."""
        self.store.save()

    def close(self) -> None:
        """Snapshot the store and release its directory lock."""
        self.store.close()
