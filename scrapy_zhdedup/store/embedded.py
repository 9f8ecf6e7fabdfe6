"""The embedded store: what the engine remembers when no server is configured, the memory of judged
documents (``memory/store.py``) kept in a directory.

On disk (``DIR/``): ``store.json`` (format and fingerprint settings, meta.py), ``lock`` (one
writer, lock.py), ``index.npz`` (the snapshot, snapshot.py) and ``log.bin`` (every document judged
since the snapshot, log.py).  Opening loads the snapshot and replays the log; saving writes a new
snapshot and empties the log, and happens by itself when the log outgrows the snapshot.  Band
tables are rebuilt on load, so the threshold may change.  :meth:`EmbeddedStore.view` reads what a
store holds while its writer works on (``zhdedup report --store`` during a crawl).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..config import DedupConfig
from ..errors import StoreError, StoreFailedError
from ..fingerprint_settings import fingerprint_settings
from ..index.bloom import ExactFilter
from ..index.nearindex import CandidateKeys
from ..memory.entries import ARRAYS as ENTRY_ARRAYS
from ..memory.entries import STATUS_CODES, Entries
from ..memory.record import Record
from ..memory.rows import ARRAYS as ROW_ARRAYS
from ..memory.rows import Rows
from ..memory.store import MemoryStore
from ..model import Features
from ..similarity.rule import NearRule
from .lock import DirectoryLock
from .log import LOG_FILE, LogWriter, ReadResult, read_log
from .meta import FORMAT, META_FILE, check, check_or_record
from .snapshot import INDEX_FILE, checked, read_snapshot, write_snapshot

logger = logging.getLogger(__name__)

_OLD_BLOOM_FILE = "bloom.bin"  # format 1 kept the filter beside the index
_ARRAYS = (*ROW_ARRAYS, "roots", "ids", *ENTRY_ARRAYS, "bloom")
COMPACT_AFTER_BYTES = 64 << 20  # log size that triggers a snapshot (or the snapshot's size, if larger)


class EmbeddedStore(MemoryStore):
    """The :class:`~scrapy_zhdedup.memory.store.MemoryStore`, saved to a directory."""

    def __init__(self, keys: CandidateKeys, bloom: ExactFilter | None = None, directory: Path | None = None, *,
                 rule: NearRule | None = None) -> None:
        """A memory-only store; :meth:`open` gives one persisted in a directory."""
        super().__init__(keys, bloom, rule=rule)
        self.directory = directory
        self.compact_after_bytes = COMPACT_AFTER_BYTES
        self._log: LogWriter | None = None
        self._lock: DirectoryLock | None = None
        self._closed = False
        self._snapshot_bytes = 0

    def _record(self, record: Record, features: Features | None = None) -> None:
        """As the memory's, refused once the store is closed, and saved once the log outgrows the snapshot."""
        if self._closed:
            raise StoreError(self.directory, "the store is closed; open it again to remember more documents",
                             hint="Call close() only once the run is over.")
        super()._record(record, features)
        if self.saves_within(0):
            self.save()

    def saves_within(self, log_bytes: int) -> bool:
        """Whether this many more bytes of log would make the store write a snapshot (:meth:`save`: seconds on
        a large store), for a caller that must not wait that long."""
        return self._log is not None and self._log.size + log_bytes > max(self.compact_after_bytes,
                                                                            self._snapshot_bytes)

    def _keep(self, record: Record) -> None:
        """Written to the log (if persisted) before anything changes."""
        if self._log is None:
            super()._keep(record)
            return
        try:
            self._log.append(record)  # encodes first: an id that is not UTF-8 fails before anything changes
        except OSError as exc:  # a full disk: the log is cut back to its last whole record
            raise StoreFailedError(
                f"{self._log.path}: cannot remember {record.doc_id!r} ({exc.strerror or exc}); every document "
                f"judged before it is kept. Free space (or fix the directory), then run again with the "
                f"same store") from exc

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

    def _replay(self, log_path: Path, records: list[Record]) -> None:
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
