"""The embedded store: what the engine remembers when no server is configured.

Per stored document (a row, rows.py) the near index, a prefix of the content hash and its
cluster's first row; per judged document (an entry, entries.py; exact repeats included) its id,
content hash and verdict, so a rerun can answer an id it has judged before.  README gives the bytes
per document.

On disk (``DIR/``): ``store.json`` (format and fingerprint settings, meta.py), ``lock`` (one
writer, lock.py), ``index.npz`` (the snapshot, snapshot.py) and ``log.bin`` (every document judged
since the snapshot, log.py).  Opening loads the snapshot and replays the log; saving writes a new
snapshot and empties the log, and happens by itself when the log outgrows the snapshot.  Band
tables are rebuilt on load, so the threshold may change.  :meth:`EmbeddedStore.view` reads what a
store holds while its writer works on (``zhdedup report --store`` during a crawl).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..config import DedupConfig
from ..errors import StoreError, StoreFailedError
from ..fingerprint_settings import fingerprint_settings
from ..index.bloom import ExactFilter
from ..index.nearindex import CandidateKeys
from ..model import Features, Match, Prepared, Sketch, Verdict
from ..similarity.rule import NearRule
from ..similarity.sketch import features_of
from .entries import ARRAYS as ENTRY_ARRAYS
from .entries import STATUS_CODES, Entries, percent, reason_code
from .lock import DirectoryLock
from .log import LOG_FILE, LogRecord, LogWriter, ReadResult, read_log
from .meta import FORMAT, META_FILE, check, check_or_record
from .rows import ARRAYS as ROW_ARRAYS
from .rows import Rows
from .snapshot import INDEX_FILE, checked, read_snapshot, write_snapshot

logger = logging.getLogger(__name__)

_OLD_BLOOM_FILE = "bloom.bin"  # format 1 kept the filter beside the index
_ARRAYS = (*ROW_ARRAYS, "roots", "ids", *ENTRY_ARRAYS, "bloom")
COMPACT_AFTER_BYTES = 64 << 20  # log size that triggers a snapshot (or the snapshot's size, if larger)


class EmbeddedStore:
    """The :class:`~scrapy_zhdedup.judge.Store` in this process: compact numpy tables, saved to a directory."""

    def __init__(self, keys: CandidateKeys, bloom: ExactFilter | None = None, directory: Path | None = None, *,
                 rule: NearRule | None = None) -> None:
        """A memory-only store; :meth:`open` gives one persisted in a directory."""
        self.keys = keys
        self.rule = rule or NearRule()
        self.directory = directory
        self.compact_after_bytes = COMPACT_AFTER_BYTES
        self._rows = Rows(keys, self.rule, bloom if bloom is not None else ExactFilter())  # per stored document
        self._entries = Entries()  # per entry: every judged document, in order
        self._log: LogWriter | None = None
        self._lock: DirectoryLock | None = None
        self._closed = False
        self._snapshot_bytes = 0

    def __len__(self) -> int:
        """Stored (indexed) documents; exact repeats are remembered but not indexed."""
        return len(self._rows)

    @property
    def judged(self) -> int:
        return len(self._entries)

    @property
    def bloom(self) -> ExactFilter:
        return self._rows.bloom

    @property
    def bloom_false_positives(self) -> int:
        return self._rows.false_positives

    def find_exact(self, content_hash: str) -> Match | None:
        row = self._rows.find_exact(content_hash)
        return None if row is None else self._match(row, 0)

    def find_near(self, features: Features, exclude: str | None = None) -> Match | None:
        """The most similar earlier text the rule accepts (nearindex.py)."""
        rows = {self._entries.row(e) for e in self._entries.of(exclude)} if exclude is not None else ()
        hit = self._rows.near.nearest(features, rows)
        if hit is None:
            return None
        return Match(self._row_id(hit.row), self.cluster(hit.row), hit.distance, hit.similarity, hit.contained,
                     hit.reason, hit.row)

    def row_of(self, doc_id: str) -> int:
        """The row of ``doc_id``'s last indexed judgement, -1 if it has none."""
        return max((self._entries.row(e) for e in self._entries.of(doc_id)), default=-1)

    def _row_id(self, row: int) -> str:
        return self._entries.ids[self._rows.entry[row]]

    def cluster(self, row: int) -> str:
        """Cluster id of a row: the id of its cluster's first document."""
        return self._row_id(self._rows.roots[row])

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
        row = len(self._rows)
        if repeats is None:
            record = LogRecord(len(self._entries), row, STATUS_CODES["unique"], -1, 0, 0, 0, 0, row,
                               features.fingerprint, bytes.fromhex(content_hash), list(features.passages),
                               features.sketch.to_bytes(), doc_id)
        else:
            root = self._rows.roots[repeats.row] if repeats.row >= 0 else row  # -1: an earlier document not kept here
            record = LogRecord(len(self._entries), row, STATUS_CODES["near"], repeats.row, repeats.distance,
                               percent(repeats.similarity), percent(repeats.contained), reason_code(repeats.reason), root,
                               features.fingerprint, bytes.fromhex(content_hash), list(features.passages),
                               features.sketch.to_bytes(), doc_id)
        self._record(record, features)

    def add_repeat(self, doc_id: str, content_hash: str, match: Match) -> None:
        """Remember an exact repeat of ``match`` (not indexed: the first copy answers for it)."""
        self._record(LogRecord(len(self._entries), -1, STATUS_CODES["exact"], match.row, 0, 100, 100, reason_code("exact"),
                               0, 0, bytes.fromhex(content_hash), [], b"", doc_id))

    def previous(self, doc_id: str) -> Verdict | None:
        """The last verdict recorded for ``doc_id``, or None if it was never judged."""
        judgements = self._entries.of(doc_id)
        if not judgements:
            return None
        entry = judgements[-1]
        entries = self._entries
        row, match = entries.row(entry), entries.match(entry)
        distance, similarity, contained, reason = entries.measures(entry) if match >= 0 else (None, None, None, None)
        return Verdict(
            doc_id=doc_id,
            status=entries.status(entry),
            dup_of=None if match < 0 else self._row_id(match),
            distance=distance,
            cluster=self.cluster(row if row >= 0 else match),
            content_hash=entries.content_hash(entry),
            fingerprint=self._rows.near.bands.fingerprint(row) if row >= 0 else None,
            similarity=similarity,
            contained=contained,
            reason=reason,
        )

    def verdicts(self) -> Iterator[Verdict]:
        """Every judged id's last verdict, in the order the ids were first judged (``zhdedup report``)."""
        for doc_id in dict.fromkeys(self._entries.ids):
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
            self._rows.add(record, features, original=record.status == STATUS_CODES["unique"])
        self._entries.append(record)

    def save(self) -> None:
        """Write a snapshot of everything (atomically), then empty the log; no-op for a memory-only store."""
        if self._log is None or self.directory is None:
            return
        if self._log.size == 0 and (self.directory / INDEX_FILE).exists():
            self._log.sync()
            return
        meta = {"format": FORMAT, "rows": len(self._rows), "entries": len(self._entries),
                "layout": self.keys.layout.to_dict(),
                "bloom": {"error_rate": self.bloom.error_rate, "initial_capacity": self.bloom.initial_capacity}}
        # Views of the live arrays, not copies (a copy of the sketches alone is 120 MB at 1M documents);
        # nothing can append meanwhile: the store has one thread, and an array exporting its buffer
        # refuses to grow.  write_snapshot drops them before it returns, even if the write fails.
        write_snapshot(self.directory / INDEX_FILE, meta, {
            **self._rows.arrays(),
            **self._entries.arrays(),
            "bloom": np.frombuffer(self.bloom.to_bytes(), dtype=np.uint8),
        })
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
        log = _read_log(log_path)
        if log.dropped_bytes:
            logger.warning("%s: dropped a torn or damaged tail of %d bytes after %d whole records (a write "
                           "cut short by a crash)", log_path, log.dropped_bytes, len(log.records))
        self._replay(log_path, log.records)
        try:
            self._log = LogWriter(log_path, log.good_bytes, fsync_interval)
        except OSError as exc:
            raise StoreError(log_path, f"cannot open the log for writing ({exc.strerror})",
                             hint="Make the directory writable or point ZHDEDUP_STORE_DIR / --store elsewhere.") from exc

    def _replay(self, log_path: Path, records: list[LogRecord]) -> None:
        for record in records:
            if record.entry < len(self._entries):
                continue  # already in the snapshot (a crash between snapshot and log truncation)
            if record.entry != len(self._entries) or record.row not in (-1, len(self._rows)):
                raise StoreError(log_path, f"log record for entry {record.entry} / row {record.row} does not follow "
                                 f"the snapshot ({len(self._entries)} entries, {len(self._rows)} rows)")
            self._apply(record)

    @classmethod
    def view(cls, keys: CandidateKeys, directory: Path, *, rule: NearRule | None = None,
             config: DedupConfig | Mapping[str, Any] | None = None) -> EmbeddedStore:
        """What the store in ``directory`` holds now, to read only, without its lock: a writer (a crawl, a
        scan) may be at work on it.  The snapshot is replaced whole (a rename) and the log is appended
        whole CRC-framed records, so the snapshot and the log's whole records after it are a state the
        writer was in (a record being written is not one yet).  The writer renames a new snapshot into
        place before it empties the log, so a log is read with the snapshot it follows only if the
        snapshot is the same file once the log is read; else both are read again.  Nothing is written:
        the view remembers nothing more (it is closed)."""
        if not (directory / META_FILE).is_file():
            raise StoreError(directory, f"not a store (no {META_FILE})")
        check(directory, fingerprint_settings(config))
        snapshot, log_path = directory / INDEX_FILE, directory / LOG_FILE
        while True:
            store = cls(keys, None, None, rule=rule)
            store._closed = True
            before = _file_id(snapshot)
            if before is not None:
                store._load_snapshot(snapshot)
            log = _read_log(log_path)
            if _file_id(snapshot) == before:
                store._replay(log_path, log.records)
                return store

    def _load_snapshot(self, path: Path) -> None:
        meta, data = read_snapshot(path, _ARRAYS)
        ids, bloom, stored, hashes = checked(path, meta, data)
        try:
            self._rows = Rows.from_arrays(self.keys, self.rule, bloom, data, stored, hashes[stored],
                                          originals=data["entry_status"][stored] == STATUS_CODES["unique"])
        except ValueError as exc:
            raise StoreError(path, f"inconsistent index arrays ({exc})") from exc
        self._entries = Entries.from_arrays(ids, data)


def _read_log(path: Path) -> ReadResult:
    try:
        return read_log(path)
    except OSError as exc:
        raise StoreError(path, f"unreadable log ({exc.strerror})") from exc


def _file_id(path: Path) -> tuple[int, int, int] | None:
    """Which file ``path`` is (a rename puts another there), None if there is none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns
