"""The pure step (:class:`Fingerprinter`: text → :class:`~scrapy_zhdedup.judge.Prepared`) and the
embedded judge (:class:`Deduper`: that step, :func:`~scrapy_zhdedup.judge.judge` and an
:class:`~scrapy_zhdedup.store.EmbeddedStore`).

Order matters for speed: the content hash needs only the cleaned text, so exact repeats are
answered before the costly part (segmentation and fingerprint) is ever run.
"""

from __future__ import annotations

from pathlib import Path

from .config import DedupConfig
from .features import Featurizer
from .fingerprint import SimHasher
from .furniture import without_furniture
from .judge import Features, Prepared, Verdict, judge
from .passages import passage_keys
from .sketch import sketch
from .store import EmbeddedStore
from .text import TextCleaner, content_hash
from .validate import check_id, check_unicode


class Fingerprinter:
    """Clean text → SimHash of weighted words, MinHash sketch of characters, passage keys (pure: safe
    to call from worker threads)."""

    def __init__(self, config: DedupConfig) -> None:
        self.cleaner = TextCleaner(extractor=config.extractor,
                                   traditional_to_simplified=config.traditional_to_simplified)
        self.max_chars = config.max_chars
        self.featurizer = Featurizer(config.features, short_text_chars=config.short_text_chars,
                                     shingle_size=config.shingle_size)
        self.hasher = SimHasher()
        self.use_passages = config.passages
        self.passage_chars = config.passage_chars

    def prepare(self, doc_id: str, *, text: str | None = None, html: str | bytes | None = None,
                encoding: str | None = None) -> Prepared:
        """Clean and hash one document (its text kept as written too); its features are computed when first needed.

        Raises EmptyTextError when nothing is left to judge, InvalidDocumentError for an id or text no
        store can keep (validate.py).
        """
        doc_id = check_id(doc_id)
        for what, value in (("the text", text), ("the page", html)):
            if isinstance(value, str):  # before cleaning: OpenCC and the hash encode it as UTF-8
                check_unicode(what, value)
        cleaned = self.cleaner.cleaned(text=text, html=html, encoding=encoding)
        return Prepared(doc_id, cleaned.normal, content_hash(cleaned.normal), cleaned.written, self)

    def clean(self, *, text: str | None = None, html: str | bytes | None = None,
              encoding: str | None = None) -> str:
        return self.cleaner.clean(text=text, html=html, encoding=encoding)

    def fingerprint(self, clean_text: str) -> int:
        """SimHash of the first ``max_chars`` characters (the content hash covers the whole text)."""
        text = clean_text[: self.max_chars]
        if self.featurizer.mode_for(text) == "words":
            return self.hasher(self.featurizer.words(text))
        return self.hasher(self.featurizer.chars(text), cache=False)  # shingles seldom repeat: not cached

    def passages(self, clean_text: str) -> list[int]:
        return passage_keys(clean_text[: self.max_chars], self.passage_chars) if self.use_passages else []

    def features(self, clean_text: str) -> Features:
        """Everything a near lookup needs, from the first ``max_chars`` characters without the furniture
        lines (furniture.py: who published it, not what it says)."""
        text = without_furniture(clean_text[: self.max_chars])
        return Features.of(self.fingerprint(text), self.passages(text), sketch(text))


class Deduper:
    """Judges documents in arrival order against everything judged before, on the embedded store."""

    def __init__(self, config: DedupConfig | None = None, store: EmbeddedStore | None = None) -> None:
        self.config = config or DedupConfig()
        self.fingerprinter = Fingerprinter(self.config)
        self.store = store if store is not None else EmbeddedStore(
            self.config.keys, rule=self.config.rule)

    @classmethod
    def open(cls, config: DedupConfig, store_dir: str | Path | None) -> Deduper:
        store = EmbeddedStore.open(config.keys, Path(store_dir) if store_dir else None,
                                   error_rate=config.bloom_error_rate, initial_capacity=config.bloom_capacity,
                                   rule=config.rule, config=config)
        return cls(config, store)

    def check(self, doc_id: str, *, text: str | None = None, html: str | bytes | None = None,
              encoding: str | None = None) -> Verdict:
        """Judge and remember one document (errors: :meth:`Fingerprinter.prepare`)."""
        return judge(self.fingerprinter.prepare(doc_id, text=text, html=html, encoding=encoding), self.store)

    def save(self) -> None:
        """Snapshot the store (each verdict is already in its log); the store stays open."""
        self.store.save()

    def close(self) -> None:
        """Snapshot the store and release its directory lock."""
        self.store.close()
