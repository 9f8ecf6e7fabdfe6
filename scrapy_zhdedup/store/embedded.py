"""The embedded store: what the engine remembers when no server is configured.

Per stored document it keeps the near index (nearindex.py: fingerprint, MinHash sketch and its
keys, passage keys when on), a 64-bit prefix of the content hash (exact lookups that name the earlier document), the row of its
cluster's first document; per judged document (exact repeats included) its id, content hash and
verdict, so a rerun can answer an id it has judged before.  README gives the bytes per document.

On disk (``DIR/``): ``store.json`` (format and fingerprint settings, meta.py), ``lock``
(one writer, lock.py), ``index.npz`` (the snapshot: numpy arrays read without pickle, the
Bloom filter inside so it always matches the index, replaced atomically) and ``log.bin``
(every document judged since the snapshot, log.py).  Opening loads the snapshot and
replays the log; saving writes a new snapshot and empties the log, and happens by itself when
the log outgrows the snapshot.  Band tables are rebuilt on load, so the threshold may change.
"""

from __future__ import annotations

import json
import logging
import traceback
import zipfile
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..config import DedupConfig
from ..errors import StoreError, StoreFailedError
from ..index.multimap import KeyTable
from ..index.nearindex import CandidateKeys, NearIndex
from ..model import REASONS, Features, Match, Prepared, Sketch, Status, Verdict, rounded
from ..similarity.rule import NearRule
from ..similarity.sketch import features_of
from .bloom import ExactFilter
from .files import atomic_write
from .lock import DirectoryLock
from .log import LOG_FILE, LogRecord, LogWriter, read_log
from .meta import FORMAT, META_FILE, check_or_record, fingerprint_settings

logger = logging.getLogger(__name__)

INDEX_FILE = "index.npz"
_OLD_BLOOM_FILE = "bloom.bin"  # format 1 kept the filter beside the index
_NEAR_ARRAYS = ("fingerprints", "sketches", "shingles", "sketch_keys", "sketch_rows", "passage_keys", "passage_rows")
_ARRAYS = ("meta", *_NEAR_ARRAYS, "roots", "ids", "entry_hashes", "entry_rows", "entry_status", "entry_match",
           "entry_distance", "entry_similarity", "entry_contained", "entry_reason", "bloom")
COMPACT_AFTER_BYTES = 64 << 20  # log size that triggers a snapshot (or the snapshot's size, if larger)
STATUSES: tuple[Status, ...] = ("unique", "exact", "near")
_BLOOM_SAMPLE = 1000  # stored texts checked against the loaded Bloom filter (all of them would cost seconds at 1M)


def _id_key(doc_id: str) -> int:
    """Key of the in-memory id table (rebuilt on every load, so the salted, cached str hash is fine)."""
    return hash(doc_id) & 0xFFFF_FFFF_FFFF_FFFF


class EmbeddedStore:
    """The :class:`~scrapy_zhdedup.judge.Store` in this process: compact numpy tables, saved to a directory."""

    def __init__(self, keys: CandidateKeys, bloom: ExactFilter | None = None, directory: Path | None = None, *,
                 rule: NearRule | None = None) -> None:
        """A memory-only store; :meth:`open` gives one persisted in a directory."""
        self.keys = keys
        self.rule = rule or NearRule()
        self.bloom = bloom if bloom is not None else ExactFilter()
        self.directory = directory
        self.bloom_false_positives = 0
        self.compact_after_bytes = COMPACT_AFTER_BYTES
        self._near = NearIndex(keys, self.rule)
        self._exact = KeyTable(np.uint64)
        self._roots = array("I")  # per row: row of the first document of its cluster
        self._row_entry = array("I")  # per row: its entry
        # per entry (every judged document, in order):
        self._ids: list[str] = []
        self._entry_hashes = bytearray()  # 16 bytes each
        self._entry_rows = array("i")  # its row, -1 for an exact repeat
        self._entry_status = array("B")  # index into STATUSES
        self._entry_match = array("i")  # row it repeats, -1 if unique
        self._entry_distance = array("B")
        self._entry_similarity = array("B")  # percent
        self._entry_contained = array("B")  # percent
        self._entry_reason = array("B")  # 0: unique, else 1 + index into REASONS
        self._id_table = KeyTable(np.uint64)  # id hash -> entries
        self._log: LogWriter | None = None
        self._lock: DirectoryLock | None = None
        self._closed = False
        self._snapshot_bytes = 0

    def __len__(self) -> int:
        """Stored (indexed) documents; exact repeats are remembered but not indexed."""
        return len(self._roots)

    @property
    def judged(self) -> int:
        return len(self._ids)

    @staticmethod
    def _hash_key(content_hash: str) -> int:
        return int(content_hash[:16], 16)

    def find_exact(self, content_hash: str) -> Match | None:
        if content_hash not in self.bloom:
            return None
        rows = self._exact.get_many([self._hash_key(content_hash)])
        if not rows:
            self.bloom_false_positives += 1
            return None
        return self._match(min(rows), 0)

    def find_near(self, features: Features, exclude: str | None = None) -> Match | None:
        """The most similar earlier text the rule accepts (nearindex.py)."""
        rows = {self._entry_rows[e] for e in self._entries(exclude)} if exclude is not None else ()
        hit = self._near.nearest(features, rows)
        if hit is None:
            return None
        return Match(self._row_id(hit.row), self.cluster(hit.row), hit.distance, hit.similarity, hit.contained,
                     hit.reason, hit.row)

    def _row_id(self, row: int) -> str:
        return self._ids[self._row_entry[row]]

    def cluster(self, row: int) -> str:
        """Cluster id of a row: the id of its cluster's first document."""
        return self._row_id(self._roots[row])

    def _match(self, row: int, distance: int) -> Match:
        return Match(self._row_id(row), self.cluster(row), distance, row=row)

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        """Index a first copy or near repeat; an exact repeat is only remembered (its first copy answers for it)."""
        if verdict.status == "exact":
            assert match is not None
            self.add_repeat(prepared.doc_id, prepared.digest, match)
        else:
            self.add(prepared.doc_id, prepared.digest, prepared.featured(None), match)

    def add(self, doc_id: str, content_hash: str, features: Features, repeats: Match | None = None) -> None:
        """Remember a document: unique (an original, a candidate for later texts), or a near repeat of
        ``repeats``, whose cluster it joins (kept for its verdict and exact copies, never a candidate)."""
        row = len(self._roots)
        if repeats is None:
            record = LogRecord(len(self._ids), row, 0, -1, 0, 0, 0, 0, row, features.fingerprint,
                            bytes.fromhex(content_hash), list(features.passages), features.sketch.to_bytes(), doc_id)
        else:
            root = self._roots[repeats.row] if repeats.row >= 0 else row  # -1: an earlier document not kept here
            record = LogRecord(len(self._ids), row, 2, repeats.row, repeats.distance, _percent(repeats.similarity),
                            _percent(repeats.contained), 1 + REASONS.index(repeats.reason), root,
                            features.fingerprint, bytes.fromhex(content_hash), list(features.passages),
                            features.sketch.to_bytes(), doc_id)
        self._record(record, features)

    def add_repeat(self, doc_id: str, content_hash: str, match: Match) -> None:
        """Remember an exact repeat of ``match`` (not indexed: the first copy answers for it)."""
        self._record(LogRecord(len(self._ids), -1, 1, match.row, 0, 100, 100, 1 + REASONS.index("exact"), 0, 0,
                            bytes.fromhex(content_hash), [], b"", doc_id))

    def _entries(self, doc_id: str) -> list[int]:
        """Every entry (judgement) recorded for ``doc_id``, oldest first."""
        return sorted(e for e in self._id_table.get_many([_id_key(doc_id)]) if self._ids[e] == doc_id)

    def previous(self, doc_id: str) -> Verdict | None:
        """The last verdict recorded for ``doc_id``, or None if it was never judged."""
        entries = self._entries(doc_id)
        if not entries:
            return None
        entry = entries[-1]
        row, match = self._entry_rows[entry], self._entry_match[entry]
        return Verdict(
            doc_id=doc_id,
            status=STATUSES[self._entry_status[entry]],
            dup_of=None if match < 0 else self._row_id(match),
            distance=None if match < 0 else self._entry_distance[entry],
            cluster=self.cluster(row if row >= 0 else match),
            content_hash=self._entry_hashes[16 * entry : 16 * entry + 16].hex(),
            fingerprint=self._near.bands.fingerprint(row) if row >= 0 else None,
            similarity=None if match < 0 else self._entry_similarity[entry] / 100,
            contained=None if match < 0 else self._entry_contained[entry] / 100,
            reason=None if match < 0 else REASONS[self._entry_reason[entry] - 1],
        )

    def verdicts(self) -> Iterator[Verdict]:
        """Every judged id's last verdict, in the order the ids were first judged (``zhdedup report``)."""
        for doc_id in dict.fromkeys(self._ids):
            verdict = self.previous(doc_id)
            assert verdict is not None
            yield verdict

    def _record(self, record: LogRecord, features: Features | None = None) -> None:
        """The one way state changes: written to the log (if persisted), then applied in memory
        (``features``: the record's own, when the caller has them, so they are not decoded again)."""
        if self._closed:
            raise StoreError(self.directory, "the store is closed; open it again to remember more documents",
                             hint="Call close() only once the run is over.")
        if len(record.content_hash) != 16:
            raise ValueError(f"content hashes are 128-bit hex strings, not {record.content_hash.hex()!r}")
        if "\x00" in record.doc_id:
            raise ValueError("document ids may not contain NUL characters")
        if self._log is not None:
            try:
                self._log.append(record)  # encodes first: an id that is not UTF-8 fails before anything changes
            except OSError as exc:  # a full disk: the log is cut back to its last whole record
                raise StoreFailedError(
                    f"{self._log.path}: cannot remember {record.doc_id!r} ({exc.strerror or exc}); every document "
                    f"judged before it is kept. Free space (or fix the directory), then run again with the "
                    f"same store") from exc
        else:
            record.doc_id.encode("utf-8")
        self._apply(record, features)
        if self._log is not None and self._log.size > max(self.compact_after_bytes, self._snapshot_bytes):
            self.save()

    def _apply(self, record: LogRecord, features: Features | None = None) -> None:
        if record.row >= 0:
            if features is None:  # replaying the log
                features = features_of(record.fingerprint, record.passages, Sketch.from_bytes(record.sketch))
            self._near.add(features, original=record.status == STATUSES.index("unique"))
            self._roots.append(record.root)
            self._row_entry.append(record.entry)
            self._exact.add_many([int.from_bytes(record.content_hash[:8], "big")], record.row)
            self.bloom.add(record.content_hash.hex())
        self._ids.append(record.doc_id)
        self._entry_hashes += record.content_hash
        self._entry_rows.append(record.row)
        self._entry_status.append(record.status)
        self._entry_match.append(record.match)
        self._entry_distance.append(record.distance)
        self._entry_similarity.append(record.similarity)
        self._entry_contained.append(record.contained)
        self._entry_reason.append(record.reason)
        self._id_table.add_many([_id_key(record.doc_id)], record.entry)

    def save(self) -> None:
        """Write a snapshot of everything (atomically), then empty the log; no-op for a memory-only store."""
        if self._log is None or self.directory is None:
            return
        if self._log.size == 0 and (self.directory / INDEX_FILE).exists():
            self._log.sync()
            return
        meta = {"format": FORMAT, "rows": len(self._roots), "entries": len(self._ids), "layout": self.keys.layout.to_dict(),
                "bloom": {"error_rate": self.bloom.error_rate, "initial_capacity": self.bloom.initial_capacity}}
        # Views of the live arrays, not copies (a copy of the sketches alone is 120 MB at 1M documents);
        # nothing can append meanwhile: the store has one thread, and an array exporting its buffer
        # refuses to grow.  They are dropped before this returns, even if the write fails.
        arrays: dict[str, Any] = {
            "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            **self._near.arrays(),
            "roots": np.frombuffer(self._roots, dtype=np.uint32),
            "ids": np.frombuffer("\x00".join(self._ids).encode("utf-8"), dtype=np.uint8),
            "entry_hashes": np.frombuffer(self._entry_hashes, dtype=np.uint8),
            "entry_rows": np.frombuffer(self._entry_rows, dtype=np.int32),
            "entry_status": np.frombuffer(self._entry_status, dtype=np.uint8),
            "entry_match": np.frombuffer(self._entry_match, dtype=np.int32),
            "entry_distance": np.frombuffer(self._entry_distance, dtype=np.uint8),
            "entry_similarity": np.frombuffer(self._entry_similarity, dtype=np.uint8),
            "entry_contained": np.frombuffer(self._entry_contained, dtype=np.uint8),
            "entry_reason": np.frombuffer(self._entry_reason, dtype=np.uint8),
            "bloom": np.frombuffer(self.bloom.to_bytes(), dtype=np.uint8),
        }

        def write(fh: BinaryIO) -> None:
            np.savez(fh, **arrays)

        try:
            atomic_write(self.directory / INDEX_FILE, write)
        except BaseException as exc:
            traceback.clear_frames(exc.__traceback__)  # the writer's frames hold the views too
            if isinstance(exc, OSError):
                raise StoreFailedError(
                    f"{self.directory / INDEX_FILE}: cannot write the snapshot ({exc.strerror or exc}); nothing is "
                    f"lost, {LOG_FILE} keeps every document since the last snapshot. Free space, then run again "
                    f"with the same store") from exc
            raise
        finally:
            arrays.clear()
        self._snapshot_bytes = (self.directory / INDEX_FILE).stat().st_size
        self._log.clear()  # a crash before this line replays records the snapshot has: they are skipped

    def close(self) -> None:
        """Save, then release the directory for the next writer; the store takes no more documents."""
        self._closed = True
        try:
            self.save()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    @classmethod
    def open(cls, keys: CandidateKeys, directory: Path | None, *, error_rate: float = 0.001,
             initial_capacity: int = 100_000, rule: NearRule | None = None,
             config: DedupConfig | Mapping[str, Any] | None = None, fsync_interval: float = 1.0) -> EmbeddedStore:
        """Open (locked) the store in ``directory``, creating it if needed; ``None`` gives a memory-only store.

        ``config`` gives the fingerprint settings the directory must have been built with (default
        settings if None).  Every problem (locked, read-only, not a directory, other settings,
        damaged files) is a StoreError here, before any work is done.
        """
        bloom = ExactFilter(error_rate=error_rate, initial_capacity=initial_capacity)
        store = cls(keys, bloom, None if directory is None else Path(directory), rule=rule)
        if store.directory is None:
            return store
        try:
            store.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(store.directory, f"cannot use as a store directory ({exc.strerror})",
                             hint="Point ZHDEDUP_STORE_DIR / --store at a writable directory.") from exc
        store._lock = DirectoryLock(store.directory)
        try:
            store._load(config, fsync_interval)
        except BaseException:
            store._lock.release()
            raise
        return store

    def _load(self, config: DedupConfig | Mapping[str, Any] | None, fsync_interval: float) -> None:
        assert self.directory is not None
        directory = self.directory
        if not (directory / META_FILE).exists() and ((directory / INDEX_FILE).exists()
                                                     or (directory / _OLD_BLOOM_FILE).exists()):
            raise StoreError(directory, "a format 1 store (index.npz + bloom.bin, written before version 0.2): "
                             "it did not record its fingerprint settings and cannot be migrated",
                             hint="Rebuild it by scanning its corpus again into a new --store / ZHDEDUP_STORE_DIR.")
        for stale in (*directory.glob(f".{INDEX_FILE}.*.tmp"), *directory.glob(f".{META_FILE}.*.tmp")):
            stale.unlink(missing_ok=True)  # a snapshot cut short by a crash; we hold the lock, so nobody writes it
        try:
            check_or_record(directory, fingerprint_settings(config))
        except OSError as exc:
            raise StoreError(directory, f"cannot write the store metadata ({exc.strerror})",
                             hint="Make the directory writable or point ZHDEDUP_STORE_DIR / --store elsewhere.") from exc
        if (directory / INDEX_FILE).exists():
            self._load_snapshot(directory / INDEX_FILE)
            self._snapshot_bytes = (directory / INDEX_FILE).stat().st_size
        log_path = directory / LOG_FILE
        try:
            log = read_log(log_path)
        except OSError as exc:
            raise StoreError(log_path, f"unreadable log ({exc.strerror})") from exc
        if log.dropped_bytes:
            logger.warning("%s: dropped a torn or damaged tail of %d bytes after %d whole records (a write "
                           "cut short by a crash)", log_path, log.dropped_bytes, len(log.records))
        for record in log.records:
            if record.entry < len(self._ids):
                continue  # already in the snapshot (a crash between snapshot and log truncation)
            if record.entry != len(self._ids) or record.row not in (-1, len(self._roots)):
                raise StoreError(log_path, f"log record for entry {record.entry} / row {record.row} does not follow "
                                 f"the snapshot ({len(self._ids)} entries, {len(self._roots)} rows)")
            self._apply(record)
        try:
            self._log = LogWriter(log_path, log.good_bytes, fsync_interval)
        except OSError as exc:
            raise StoreError(log_path, f"cannot open the log for writing ({exc.strerror})",
                             hint="Make the directory writable or point ZHDEDUP_STORE_DIR / --store elsewhere.") from exc

    def _load_snapshot(self, path: Path) -> None:
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
            if meta.get("format") != FORMAT:
                raise StoreError(path, f"index format {meta.get('format')!r} is not supported (expected {FORMAT})")
            rows, entries = int(meta["rows"]), int(meta["entries"])
            ids = data["ids"].tobytes().decode("utf-8").split("\x00") if entries else []
            bloom = ExactFilter.from_bytes(data["bloom"].tobytes(), **meta["bloom"])
        except (TypeError, ValueError, KeyError) as exc:
            raise StoreError(path, f"damaged index metadata, ids or Bloom filter ({exc})") from exc
        fps, roots = data["fingerprints"], data["roots"]
        e_hashes, e_rows, e_match = data["entry_hashes"], data["entry_rows"].astype(np.int32), data["entry_match"]
        stored = np.flatnonzero(e_rows >= 0)
        if (not (len(fps) == len(roots) == rows == len(stored))
                or not (len(ids) == len(e_rows) == len(data["entry_status"]) == len(e_match)
                        == len(data["entry_distance"]) == len(data["entry_similarity"])
                        == len(data["entry_contained"]) == len(data["entry_reason"]) == entries)
                or len(e_hashes) != 16 * entries or (rows and roots.max() >= rows)
                or (entries and e_match.max() >= rows) or not np.array_equal(e_rows[stored], np.arange(rows))):
            raise StoreError(path, "inconsistent index arrays (truncated or edited file)")
        hashes = e_hashes.reshape(-1, 16)
        sample = stored[np.linspace(0, rows - 1, min(rows, _BLOOM_SAMPLE)).astype(np.int64)] if rows else stored
        if not all(hashes[entry].tobytes().hex() in bloom for entry in sample.tolist()):
            raise StoreError(path, "the Bloom filter does not hold the stored texts (edited or mixed-up file)")
        row_keys = hashes[stored, :8].copy().view(">u8").ravel().astype(np.uint64)
        try:
            self._near = NearIndex.from_arrays(self.keys, self.rule, {name: data[name] for name in _NEAR_ARRAYS},
                                               originals=data["entry_status"][stored] == STATUSES.index("unique"))
        except ValueError as exc:
            raise StoreError(path, f"inconsistent index arrays ({exc})") from exc
        self._exact = KeyTable.build(row_keys, np.arange(rows, dtype=np.uint32))
        self._roots = array("I", roots.astype(np.uint32).tobytes())
        self._row_entry = array("I", stored.astype(np.uint32).tobytes())
        self._ids = ids
        self._entry_hashes = bytearray(e_hashes.tobytes())
        self._entry_rows = array("i", e_rows.tobytes())
        self._entry_status = array("B", data["entry_status"].astype(np.uint8).tobytes())
        self._entry_match = array("i", e_match.astype(np.int32).tobytes())
        self._entry_distance = array("B", data["entry_distance"].astype(np.uint8).tobytes())
        self._entry_similarity = array("B", data["entry_similarity"].astype(np.uint8).tobytes())
        self._entry_contained = array("B", data["entry_contained"].astype(np.uint8).tobytes())
        self._entry_reason = array("B", data["entry_reason"].astype(np.uint8).tobytes())
        id_keys = np.fromiter((_id_key(i) for i in ids), dtype=np.uint64, count=entries)
        self._id_table = KeyTable.build(id_keys, np.arange(entries, dtype=np.uint32))
        self.bloom = bloom


def _percent(share: float) -> int:
    """A reported share (two decimals) as the byte the store keeps."""
    return round(100 * rounded(share))
