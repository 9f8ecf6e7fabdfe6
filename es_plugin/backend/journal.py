"""Judged documents not yet stored, kept on disk until they are: a writer killed meanwhile loses none.

The bulk buffer holds a lookup batch's judged documents until they are written and their keys
claimed, which happens before their verdicts are returned (buffer.py).  A process killed in that time
(``kill -9``, the OOM killer) took along the documents not yet written, and the claims of those
written: a crawl that does not fetch those pages again (a ``JOBDIR``, an incremental crawl) never
stores them, and an ``es ingest`` rerun skips the stored ones, whose reposts would then find no
claim.  So each buffered action is also appended to a journal file beside the dead-letter file, one
file per batch, removed once the batch is written (or dead-lettered) and its originals' keys claimed.
Every writer keeps one (a crawl, ``es ingest``, ``es replay``), and the next writer of the same index
with the same dead-letter location writes what a dead writer's journal holds before it judges
anything, through the same bulk path: a document already stored is a 409 naming itself, and is
claimed like one written now (batchwriter.py), keeping a stamp it had claimed with (registry.py).  The
index ends as if the dead writer had finished the batch.  A line is the bulk's own JSON encoding
(orjson) written with one unbuffered ``write``: ~24 µs a news document, against ~46 µs through
``json`` and a buffered file.

A writer holds an exclusive ``flock`` on its journal's lock file while it lives (the kernel drops it
when the process dies), so a live writer's journal is never taken.  A journal that cannot be written
(a full disk) is given up with a warning: the documents are still written as usual, only a kill
before they are would lose them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scrapy_zhdedup.errors import StoreError
from scrapy_zhdedup.files.locks import file_stem, unheld

from ..client import serializers
from .writer import Action

logger = logging.getLogger(__name__)

PREFIX = ".zhdedup-pending"


def _stem(index: str) -> str:
    """The index's name as a file name may hold it, and a digest of it, so no two indices share a stem."""
    return file_stem(PREFIX, index)


class Journal:
    """This writer's journal: ``record`` each buffered action, ``done`` a written batch, ``close`` at the end."""

    def __init__(self, directory: Path, index: str) -> None:
        self.directory = directory
        self.name = f"{_stem(index)}{uuid.uuid4().hex[:16]}"
        self._lock: int | None = None
        self._files: dict[int, int] = {}  # batch -> descriptor, appended to unbuffered (one write a document)
        self._json = serializers()["application/json"]  # the bulk's own: whatever it can write, this keeps
        self._broken = False

    def _path(self, seq: int) -> Path:
        return self.directory / f"{self.name}.{seq}.jsonl"

    def open(self) -> None:
        self._lock = os.open(self.directory / f"{self.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh name: never held by another

    def record(self, seq: int, action: Action) -> None:
        """Append ``action`` to batch ``seq``'s file, as far as the operating system (a killed process's
        writes survive it; a power cut's may not)."""
        if self._broken or self._lock is None:
            return
        try:
            fd = self._files.get(seq)
            if fd is None:
                fd = self._files[seq] = os.open(self._path(seq), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            line = memoryview(self._json.dumps({"op": action.op, "id": action.id, "body": action.body,
                                                "index": action.index}) + b"\n")
            while line:
                line = line[os.write(fd, line):]
        except OSError as exc:
            self._give_up(seq, exc)

    def done(self, seq: int) -> None:
        """Batch ``seq`` is written or dead-lettered: its file goes.  Never raises: the buffer's writer
        task calls it, and the documents are stored already."""
        fd = self._files.pop(seq, None)
        if fd is not None:
            try:
                os.close(fd)
                self._path(seq).unlink(missing_ok=True)
            except OSError as exc:
                self._give_up(seq, exc)

    def _give_up(self, seq: int, exc: OSError) -> None:
        if not self._broken:
            self._broken = True
            logger.warning("zhdedup: cannot keep the journal of buffered documents at %s (%s); they are still "
                           "written to Elasticsearch, but a kill before that would lose them",
                           self._path(seq), exc.strerror or exc)

    def close(self) -> None:
        """At the end of a run: the journal goes unless a batch was left unwritten (the next writer
        takes it over)."""
        with contextlib.suppress(OSError):  # a journal given up on stays for a look; nothing depends on it
            for fd in self._files.values():
                os.close(fd)
            if self._lock is not None and not self._files:
                (self.directory / f"{self.name}.lock").unlink(missing_ok=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


@contextmanager
def orphans(directory: Path, index: str) -> Iterator[list[list[Action]]]:
    """The batches of ``index`` left by writers that are gone, oldest journal first and in batch order
    within one, each journal locked meanwhile; removed when the block ends without an error."""
    taken: list[tuple[int, Path, list[Path]]] = []
    mine = re.compile(re.escape(_stem(index)) + r"[0-9a-f]{16}\.lock")  # not those of an index named "<index>-…"
    try:
        locks = sorted((p for p in directory.glob(f"{_stem(index)}*.lock") if mine.fullmatch(p.name)),
                       key=lambda p: (p.stat().st_mtime, p.name))
    except OSError:
        locks = []
    batches: list[list[Action]] = []
    try:
        for lock, fd in unheld(locks, os.O_RDWR):
            name = lock.name[: -len(".lock")]
            files = sorted(directory.glob(f"{name}.*.jsonl"), key=lambda p: int(p.name.split(".")[-2]))
            taken.append((fd, lock, files))
            batches += [_read(path) for path in files]
        yield batches
        for _, lock, files in taken:
            for path in files:
                path.unlink(missing_ok=True)
            lock.unlink(missing_ok=True)
    finally:
        for fd, _, _ in taken:
            os.close(fd)


def _read(path: Path) -> list[Action]:
    """A batch file's actions; a last line cut short (a full disk) was never buffered and is skipped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    actions = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            actions.append(Action(record["op"], record["id"], record["body"], record["index"]))
        except (ValueError, KeyError, TypeError) as exc:
            if number < len(lines):
                raise StoreError(f"{path}:{number}", f"not a journal line ({exc})", hint=(
                    "Nothing was taken from it; move the file away to go on without its documents.")) from None
            logger.warning("zhdedup: %s:%d: a journal line cut short, skipped", path, number)
    return actions
