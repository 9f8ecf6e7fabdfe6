"""The embedded store: what the engine remembers when no server is configured.

Per document it keeps the fingerprint (band index), its passage keys (passages.py), a 64-bit
prefix of the content hash (exact lookups that name the earlier document), the row of its
cluster's first document and its id; README gives the bytes per document.  Saved as two files, each replaced atomically:
``index.npz`` (numpy arrays, read without pickle so a foreign file cannot run code) and
``bloom.bin``.  Band tables are rebuilt on load, so changing the threshold between runs is safe.
"""

from __future__ import annotations

import json
import zipfile
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from .bandindex import BandIndex, Hit
from .bands import BandLayout
from .bloom import ExactFilter
from .errors import StoreError
from .judge import Match, NearRule, closest
from .keytable import KeyTable
from .persist import atomic_write

if TYPE_CHECKING:
    from .judge import Prepared, Verdict

INDEX_FILE = "index.npz"
BLOOM_FILE = "bloom.bin"
_FORMAT = 1
_ARRAYS = ("meta", "fingerprints", "hash_keys", "roots", "ids", "passage_keys", "passage_rows")
MAX_PASSAGE_POSTINGS = 64  # a passage in more documents than this is boilerplate, not evidence


def nearest_with_passages(near: BandIndex, passage_table: KeyTable, fingerprint: int, passages: Sequence[int],
                          rule: NearRule) -> Hit | None:
    """Candidates through the band keys and through shared passages, judged by ``rule`` (also used for
    Elasticsearch's not-yet-searchable buffer and by reconcile)."""
    band_rows = near.candidates(fingerprint)
    votes = Counter(passage_table.get_many(list(passages), limit=MAX_PASSAGE_POSTINGS)) if passages else Counter()
    if not band_rows and not votes:
        return None
    rows, distances = near.distances([*band_rows, *votes], fingerprint)
    in_bands = set(band_rows)
    accepted = []
    for row, distance in zip(rows.tolist(), distances.tolist()):
        if distance <= rule.widest and distance <= rule.limit(row in in_bands, votes[row], len(passages)):
            accepted.append((distance, row, Hit(row, distance)))
    return closest(accepted)


class EmbeddedStore:
    """The :class:`~scrapy_zhdedup.judge.Store` in this process: compact numpy tables, saved to a directory."""

    def __init__(self, layout: BandLayout, bloom: ExactFilter | None = None, directory: Path | None = None,
                 *, passage_share: float = 0.2, passage_threshold: int = 12) -> None:
        self.layout = layout
        self.passage_share = passage_share
        self.passage_threshold = passage_threshold
        self.rule = NearRule(layout.k, passage_share, passage_threshold)
        self.bloom = bloom if bloom is not None else ExactFilter()
        self.directory = directory
        self.bloom_false_positives = 0
        self._near = BandIndex(layout)
        self._exact = KeyTable(np.uint64)
        self._passages = KeyTable(np.uint32)
        self._ids: list[str] = []
        self._roots = array("I")  # row of the first document of each row's cluster

    def __len__(self) -> int:
        return len(self._ids)

    @staticmethod
    def _hash_key(content_hash: str) -> int:
        return int(content_hash[:16], 16)

    def find_exact(self, content_hash: str) -> Match | None:
        if content_hash not in self.bloom:
            return None
        rows = self._exact.get_many([self._hash_key(content_hash)])
        if not rows:
            self.bloom_false_positives += 1  # or a Bloom file that outlived its index file
            return None
        return self._match(min(rows), 0)

    def find_near(self, fingerprint: int, passages: Sequence[int] = ()) -> Match | None:
        """Closest earlier text: within k through the bands, or through shared passages."""
        hit = nearest_with_passages(self._near, self._passages, fingerprint, passages, self.rule)
        return None if hit is None else self._match(hit.row, hit.distance)

    def cluster(self, row: int) -> str:
        """Cluster id of a row: the id of its cluster's first document."""
        return self._ids[self._roots[row]]

    def _match(self, row: int, distance: int) -> Match:
        return Match(self._ids[row], self.cluster(row), distance, row)

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        """Exact repeats add nothing: their first copy answers for them."""
        if verdict.status != "exact":
            self.add(prepared.doc_id, prepared.digest, prepared.fingerprint, prepared.passages, match)

    def add(self, doc_id: str, content_hash: str, fingerprint: int, passages: Sequence[int] = (),
            repeats: Match | None = None) -> None:
        """Remember a document; ``repeats`` puts it in the cluster of the document it repeats."""
        row = self._near.add(fingerprint)
        if passages:
            self._passages.add_many(passages, row)
        self._ids.append(doc_id)
        self._roots.append(row if repeats is None else self._roots[repeats.row])
        self._exact.add_many([self._hash_key(content_hash)], row)
        self.bloom.add(content_hash)

    def nbytes(self) -> dict[str, int]:
        """Memory by part, for the README's bytes-per-document figures."""
        ids = sum(len(i.encode()) + 49 for i in self._ids) + 8 * len(self._ids)  # str objects + list slots
        return {
            "band_index": self._near.nbytes(),
            "passage_index": self._passages.nbytes(),
            "exact_index": self._exact.nbytes(),
            "clusters": 4 * len(self._roots),
            "ids": ids,
            "bloom": self.bloom.nbytes(),
        }

    # -- persistence -------------------------------------------------------------------------

    def save(self) -> None:
        """Write both files atomically; no-op for a memory-only store."""
        if self.directory is None:
            return
        self._near.compact()
        exact_keys, exact_rows = self._exact.arrays()
        hash_keys = np.zeros(len(self._ids), dtype=np.uint64)
        hash_keys[exact_rows] = exact_keys
        passage_keys, passage_rows = self._passages.arrays()
        meta = {"format": _FORMAT, "count": len(self._ids), "layout": self.layout.to_dict()}
        arrays = {
            "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            "fingerprints": self._near.fingerprints(),
            "hash_keys": hash_keys,
            "roots": np.frombuffer(self._roots, dtype=np.uint32).copy(),
            "ids": np.frombuffer("\x00".join(self._ids).encode("utf-8"), dtype=np.uint8),
            "passage_keys": passage_keys,
            "passage_rows": passage_rows,
        }

        def write(fh: BinaryIO) -> None:
            np.savez(fh, **arrays)

        atomic_write(self.directory / INDEX_FILE, write)
        self.bloom.save(self.directory / BLOOM_FILE)

    @classmethod
    def open(cls, layout: BandLayout, directory: Path | None, *, error_rate: float = 0.001,
             initial_capacity: int = 100_000, passage_share: float = 0.2,
             passage_threshold: int = 12) -> EmbeddedStore:
        """Load the store saved in ``directory`` if there is one, else start empty."""
        fresh_bloom = ExactFilter(error_rate=error_rate, initial_capacity=initial_capacity)
        options: dict[str, Any] = {"passage_share": passage_share, "passage_threshold": passage_threshold}
        if directory is None:
            return cls(layout, fresh_bloom, **options)
        directory = Path(directory)
        index_path, bloom_path = directory / INDEX_FILE, directory / BLOOM_FILE
        bloom = ExactFilter.load(bloom_path) if bloom_path.exists() else fresh_bloom
        store = cls(layout, bloom, directory, **options)
        if index_path.exists():
            store._load_index(index_path)
        return store

    def _load_index(self, path: Path) -> None:
        try:
            loaded = np.load(path, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                raise StoreError(path, "not a scrapy-zhdedup index (a single numpy array, not an .npz archive)")
            with loaded as npz:
                missing = [name for name in _ARRAYS if name not in npz.files]
                if missing:
                    raise StoreError(path, f"not a scrapy-zhdedup index (missing {', '.join(missing)})")
                data = {name: npz[name] for name in _ARRAYS}
        except StoreError:
            raise
        except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as exc:
            raise StoreError(path, f"unreadable index file ({type(exc).__name__}: {exc})") from exc
        try:
            meta = json.loads(data["meta"].tobytes())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            if meta.get("format") != _FORMAT:
                raise StoreError(path, f"index format {meta.get('format')!r} is not supported (expected {_FORMAT})")
            count = int(meta.get("count", -1))
            ids = data["ids"].tobytes().decode("utf-8").split("\x00") if count else []
        except (TypeError, ValueError) as exc:
            raise StoreError(path, f"damaged index metadata or ids ({exc})") from exc
        fps, keys, roots = data["fingerprints"], data["hash_keys"], data["roots"]
        p_keys, p_rows = data["passage_keys"].astype(np.uint32), data["passage_rows"].astype(np.uint32)
        if (not (len(ids) == len(fps) == len(keys) == len(roots) == count) or len(p_keys) != len(p_rows)
                or (count and roots.max() >= count) or (len(p_rows) and p_rows.max() >= count)):
            raise StoreError(path, "inconsistent index arrays (truncated or edited file)")
        self._near = BandIndex.from_fingerprints(self.layout, fps)
        self._exact = KeyTable.build(keys.astype(np.uint64), np.arange(count, dtype=np.uint32))
        self._passages = KeyTable.build(p_keys, p_rows)
        self._roots = array("I", roots.astype(np.uint32).tobytes())
        self._ids = ids
