"""The dead-letter file: documents Elasticsearch did not take, one JSON line each with why and when.

Two kinds of line, by ``stage``: ``lookup``, an item that could not be judged (the node away longer than
``ZHDEDUP_ES_OUTAGE_TIMEOUT``): a crawl did not deliver it, and ``zhdedup es replay --output`` delivers
it once judged; ``bulk``/``conflict``, a document judged (and delivered) but not stored.  Each line
names the ``mode`` of the run that wrote it, which the replay judges in (a drop-mode index never
gets a repeat from its replay).

Nothing may vanish between "judged" and "stored", so this file is the last resort, and it must
itself never fail silently: it is checked for writability when a run starts, and a failed write
raises :class:`DeadLetterError` naming the file (the caller stops; see elasticsearch_backend.py).

Several processes may share one file (crawlers, ``zhdedup es replay``), so every append holds an
exclusive ``flock``, and ``replay`` rewrites the file atomically under the same lock.  A writer
that waited for the lock while the file was replaced notices the new inode and appends to the new
file, so no line goes to an unlinked one.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from scrapy_zhdedup.files.atomic import atomic_write

from ..errors import DeadLetterError
from ..index.document import named
from .retry import retryable
from .stats import EsStats
from .writer import Action, describe

logger = logging.getLogger(__name__)

DEFAULT_NAME = "zhdedup-dead-letter.jsonl"
STAT = "zhdedup/dead_letter"  # items and documents not judged or not stored, all in the dead-letter file


@contextmanager
def locked(path: Path) -> Iterator[IO[bytes]]:
    """``path`` opened for appending under an exclusive lock, surviving a concurrent atomic replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        with path.open("a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                if os.fstat(fh.fileno()).st_ino != os.stat(path).st_ino:
                    continue  # replaced while we waited: lock the new file
            except FileNotFoundError:
                continue
            yield fh
            return


@dataclass
class DeadLetters:
    """Appends records to ``path`` and counts them (``retryable``: failures that may pass on a retry)."""

    path: Path
    index: str
    stats: EsStats
    mode: str = "annotate"  # the run's: ``drop`` stores first copies only
    count: int = 0
    retryable: int = 0
    unjudged: int = 0  # items not judged (stage ``lookup``): not delivered by a crawl

    def __post_init__(self) -> None:
        self.path = self.path.absolute()  # messages name it; a relative path depends on where one stands

    def check(self) -> None:
        """Raise :class:`DeadLetterError` unless the file can be appended to (leaves no empty file behind)."""
        existed = self.path.exists()
        try:
            with locked(self.path):
                pass
        except OSError as exc:
            raise DeadLetterError(
                f"the dead-letter file {self.path} cannot be written ({exc.strerror or exc}); documents "
                f"Elasticsearch does not take would be lost. Set ZHDEDUP_ES_DEAD_LETTER (--dead-letter) to a "
                f"writable path") from exc
        if not existed:
            self.path.unlink(missing_ok=True)

    def record(self, action: Action | None, doc_id: str | None, document: dict[str, Any], stage: str,
               error: Exception | dict[str, Any]) -> dict[str, Any]:
        status, reason = describe(error)
        if doc_id is None:
            doc_id = named(document)
        return {
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "index": self.index,
            "stage": stage, "mode": self.mode, "op": action.op if action else None, "_id": action.id if action else None,
            "doc_id": doc_id, "status": status, "reason": reason, "retryable": retryable(error),
            "document": document,
        }

    def write(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        data = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records).encode("utf-8")
        try:
            with locked(self.path) as fh:
                fh.write(data)
        except OSError as exc:
            raise DeadLetterError(
                f"{len(records)} document(s) Elasticsearch did not take could not be written to the dead-letter "
                f"file {self.path} ({exc.strerror or exc}); stopping so that nothing more is lost") from exc
        self.count += len(records)
        self.retryable += sum(r["retryable"] for r in records)
        self.unjudged += sum(r["stage"] == "lookup" for r in records)
        self.stats.inc_key(STAT, len(records))
        status = records[0]["status"]
        logger.error("zhdedup: %d document(s) not %s in Elasticsearch (%s); written to %s", len(records),
                     "judged" if records[0]["stage"] == "lookup" else "stored",
                     "no HTTP status" if status is None else f"HTTP {status}", self.path)

    def delivery_path(self) -> Path:
        """Where the replay the crawl prints appends the items it delivers (beside this file)."""
        return self.path.with_name(f"{self.path.stem}-delivered.jsonl")

    def replay_hint(self, url: str) -> str:
        """The command that stores these documents, in this run's mode, and delivers the items not judged."""
        output = f" --output {self.delivery_path()}" if self.unjudged else ""
        return f"zhdedup es replay {self.path} --url {url} --index {self.index} --mode {self.mode}{output}"

    def summary(self, url: str) -> str:
        """The line at close: what is in the file and the command that recovers it."""
        stored = self.count - self.unjudged
        parts = [f"{self.unjudged} items could not be judged and were not delivered"] if self.unjudged else []
        parts += [f"{stored} documents judged were not stored"] if stored else []
        deliver = (f"; it appends the new ones among those not delivered to {self.delivery_path()} (the rest of "
                   f"the feed)") if self.unjudged else ""
        return (f"{' and '.join(parts)} in Elasticsearch; they are in {self.path}. Once it answers, judge and store "
                f"them with: {self.replay_hint(url)}{deliver}")


def read(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The records of the file and its length in bytes when read (lines that are not JSON are kept as text)."""
    with locked(path) as fh:
        fh.seek(0)
        data = fh.read()
    records = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = {"unreadable": line}
        records.append(record if isinstance(record, dict) else {"unreadable": line})
    return records, len(data)


def keep_only(path: Path, kept: list[dict[str, Any]], read_upto: int) -> None:
    """Atomically replace the first ``read_upto`` bytes of the file with ``kept``; lines appended since stay."""
    with locked(path) as fh:
        fh.seek(0)
        appended = fh.read()[read_upto:]
        head = "".join((r["unreadable"] if "unreadable" in r else json.dumps(r, ensure_ascii=False)) + "\n"
                       for r in kept).encode("utf-8")

        def write(out: IO[bytes]) -> None:
            out.write(head + appended)

        atomic_write(path, write)  # an empty file: nothing left to replay
