"""The pure step: text → :class:`~scrapy_zhdedup.model.Prepared` (clean, hash), and its features.

Order matters for speed: the content hash needs only the cleaned text, so exact repeats are
answered before the costly part (the features) is ever run.  By default (``features = "sketch"``) the
SimHash is made from the sketch's own shingle hashes: one pass of numpy over the text, no segmentation
(jieba's words and their weights cost about five times the sketch per news article, benchmarks/README.md,
and decide nothing the sketch does not).  Words are segmented only when a setting asks for word features.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..config import DedupConfig, WordMode
from ..model import Features, Prepared, Sketch
from ..text.clean import TextCleaner, content_hash
from ..text.furniture import without_furniture
from ..text.validate import check_id, check_unicode
from .passages import passage_keys
from .simhash import SimHasher, of_shingle_hashes, of_shingle_hashes_many
from .sketch import band_keys_many, features_of, shingle_hashes, shingle_hashes_many, sketch_of_hashes, sketches_of_hashes

if TYPE_CHECKING:
    from .words import Featurizer


class Fingerprinter:
    """Clean text → SimHash (of the sketch's shingle hashes, or of weighted words or shingles), MinHash sketch
    of characters, passage keys (pure: safe to call from worker threads)."""

    def __init__(self, config: DedupConfig) -> None:
        self.cleaner = TextCleaner(extractor=config.extractor,
                                   traditional_to_simplified=config.traditional_to_simplified)
        self.max_chars = config.max_chars
        self.featurizer = None if config.features == "sketch" else _featurizer(config.features, config)
        self.hasher = SimHasher()
        self.use_passages = config.passages
        self.passage_chars = config.passage_chars

    def prepare(self, doc_id: str, *, text: str | None = None, html: str | bytes | None = None,
                encoding: str | None = None) -> Prepared:
        """Clean and hash one document (its text kept as written too); its features are computed when first
        needed (:meth:`features`).

        Raises EmptyTextError when nothing is left to judge, InvalidDocumentError for an id or text no
        store can keep (validate.py).
        """
        doc_id = check_id(doc_id)
        for what, value in (("the text", text), ("the page", html)):
            if isinstance(value, str):  # before cleaning: OpenCC and the hash encode it as UTF-8
                check_unicode(what, value)
        return self.prepare_checked(doc_id, text=text, html=html, encoding=encoding)

    def prepare_checked(self, doc_id: str, *, text: str | None = None, html: str | bytes | None = None,
                        encoding: str | None = None, written: bool = True) -> Prepared:
        """:meth:`prepare` of a document whose id and text were checked where they were read
        (``files.inputs.parse_line``): checking encodes the whole page or text as UTF-8 once more.
        ``written=False``: the text as written is not made (left empty) for a caller that stores no text."""
        if not written:
            clean = self.cleaner.clean(text=text, html=html, encoding=encoding)
            return Prepared(doc_id, clean, content_hash(clean), "")
        cleaned = self.cleaner.cleaned(text=text, html=html, encoding=encoding)
        return Prepared(doc_id, cleaned.normal, content_hash(cleaned.normal), cleaned.written)

    def clean(self, *, text: str | None = None, html: str | bytes | None = None,
              encoding: str | None = None) -> str:
        return self.cleaner.clean(text=text, html=html, encoding=encoding)

    @property
    def segments(self) -> bool:
        """Whether fingerprints need jieba's words (and so its dictionaries, ~0.3 s to load: workers.py)."""
        return self.featurizer is not None and self.featurizer.mode != "chars"

    @property
    def batches(self) -> bool:
        """Whether features are cheaper made for a whole batch of documents, exact repeats included
        (:meth:`featured`), than one at a time for those that need them: true of the default (the sketch's
        hashes, ~80 µs a news article in batches of 64 against ~200 alone), not of word features, whose
        segmentation costs the same per text either way."""
        return self.featurizer is None

    def fingerprint(self, clean_text: str) -> int:
        """SimHash of the first ``max_chars`` characters (the content hash covers the whole text)."""
        text = clean_text[: self.max_chars]
        if self.featurizer is None:
            return of_shingle_hashes(shingle_hashes(text))
        if self.featurizer.mode_for(text) == "words":
            return self.hasher(self.featurizer.words(text))
        return self.hasher(self.featurizer.chars(text), cache=False)  # shingles seldom repeat: not cached

    def passages(self, clean_text: str) -> list[int]:
        return passage_keys(clean_text[: self.max_chars], self.passage_chars) if self.use_passages else []

    def features(self, clean_text: str) -> Features:
        """Everything a near lookup needs, from the first ``max_chars`` characters without the furniture
        lines (furniture.py: who published it, not what it says)."""
        text = without_furniture(clean_text[: self.max_chars])
        hashes = shingle_hashes(text)  # by default the SimHash's features too: made once, for both
        fingerprint = of_shingle_hashes(hashes) if self.featurizer is None else self.fingerprint(text)
        return features_of(fingerprint, self.passages(text), sketch_of_hashes(hashes))

    def features_many(self, clean_texts: Sequence[str]) -> list[Features]:
        """:meth:`features` of each text, the same values: the shingle hashes, sketches, band keys and SimHashes
        of all the texts made in one pass of numpy calls (sketch.py), a few dozen calls per batch instead of
        per text.  64 news articles cost about half of what they cost one at a time, 64 short reviews a sixth;
        a batch of one costs twice :meth:`features` (benchmarks/README.md, issue 40)."""
        if not clean_texts:
            return []
        texts = [without_furniture(clean[: self.max_chars]) for clean in clean_texts]
        hashes, bounds = shingle_hashes_many(texts)  # by default the SimHash's features too: made once, for both
        values, shingles = sketches_of_hashes(hashes, bounds)
        keys = band_keys_many(values).tolist()
        if self.featurizer is None:
            fingerprints = of_shingle_hashes_many(hashes, bounds)
        else:
            fingerprints = [self.fingerprint(text) for text in texts]
        return [Features(fingerprint, self.passages(text), Sketch(v, n), k)
                for fingerprint, text, v, n, k in zip(fingerprints, texts, values, shingles, keys)]

    def featured(self, documents: Iterable[Prepared]) -> None:
        """Features computed for every document that does not carry them yet, in one batch (:meth:`features_many`),
        once per distinct text (the repeats of a batch share them)."""
        missing = [document for document in documents if document.features is None]
        if not missing:
            return
        texts = list(dict.fromkeys(document.clean for document in missing))
        made = dict(zip(texts, self.features_many(texts))).__getitem__
        for document in missing:
            document.featured(made)


def _featurizer(mode: WordMode, config: DedupConfig) -> Featurizer:
    """Words and shingles for a SimHash of word features; words.py (its CJK classes, ~4 ms to compile) is
    imported only then."""
    from .words import Featurizer

    return Featurizer(mode, short_text_chars=config.short_text_chars, shingle_size=config.shingle_size)
