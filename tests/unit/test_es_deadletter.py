"""The dead-letter file on its own: checked at start, appends counted, replay's rewrite keeps what others appended."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import BinaryIO

import pytest

from es_plugin.backend.deadletter import STAT, DeadLetters, keep_only, locked, read
from es_plugin.backend.stats import EsStats
from es_plugin.backend.writer import Action
from es_plugin.errors import DeadLetterError
from scrapy_zhdedup.files.atomic import atomic_write
from tests.support.helpers import Stats


def letters(path: Path, stats: Stats | None = None) -> DeadLetters:
    return DeadLetters(path, "news", EsStats(stats))


def bulk_record(box: DeadLetters, doc_id: str, status: int, error_type: str) -> dict[str, object]:
    action = Action("create", f"h-{doc_id}", {"url": doc_id, "zhdedup": {"doc_id": doc_id}})
    return box.record(action, None, action.body or {}, "bulk", {"status": status, "error": {"type": error_type}})


def test_unwritable_location_is_refused_at_check_naming_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    box = letters(blocker / "dead.jsonl")
    with pytest.raises(DeadLetterError, match=str(blocker / "dead.jsonl")):
        box.check()
    with pytest.raises(DeadLetterError, match=r"1 document\(s\) .* could not be written"):
        box.write([bulk_record(box, "a", 400, "mapper_parsing_exception")])


def test_check_leaves_no_file_and_paths_are_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    box = letters(Path("dead.jsonl"))
    box.check()
    assert box.path == tmp_path / "dead.jsonl" and not box.path.exists()


def test_writes_are_counted_and_retryable_ones_told_apart(tmp_path: Path) -> None:
    stats = Stats()
    box = letters(tmp_path / "dead.jsonl", stats)
    box.write([bulk_record(box, "a", 403, "cluster_block_exception"), bulk_record(box, "b", 400, "mapper_parsing")])
    assert (box.count, box.retryable, stats[STAT]) == (2, 1, 2)
    records, _ = read(box.path)
    assert [(r["doc_id"], r["retryable"]) for r in records] == [("a", True), ("b", False)]


def test_rewrite_keeps_lines_appended_after_the_read(tmp_path: Path) -> None:
    box = letters(tmp_path / "dead.jsonl")
    box.write([bulk_record(box, doc, 503, "unavailable") for doc in ("a", "b", "c")])
    records, size = read(box.path)
    box.write([bulk_record(box, "d", 503, "unavailable")])  # e.g. a crawl still running, or a refused replay
    keep_only(box.path, [records[1]], size)
    assert [json.loads(line)["doc_id"] for line in box.path.read_text().splitlines()] == ["b", "d"]
    box.write([bulk_record(box, "e", 503, "unavailable")])  # appends go to the new file, not the replaced one
    assert [r["doc_id"] for r in read(box.path)[0]] == ["b", "d", "e"]
    keep_only(box.path, [], box.path.stat().st_size)
    assert box.path.exists() and box.path.read_bytes() == b""  # nothing left to replay; replaying it is a no-op


def test_a_writer_waiting_for_the_lock_follows_the_replaced_file(tmp_path: Path) -> None:
    path = tmp_path / "dead.jsonl"
    path.write_bytes(b'{"doc_id": "old"}\n')
    box = letters(path)
    writer = threading.Thread(target=lambda: box.write([bulk_record(box, "late", 503, "unavailable")]))

    def rewrite(fh: BinaryIO) -> None:
        fh.write(b'{"doc_id": "kept"}\n')

    with locked(path):  # what replay's rewrite holds while it replaces the file
        writer.start()  # blocks on the lock of the file about to be replaced (or comes after: same result)
        atomic_write(path, rewrite)
    writer.join()
    assert [r["doc_id"] for r in read(path)[0]] == ["kept", "late"]
