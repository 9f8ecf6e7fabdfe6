"""The journal of buffered documents on its own: what a dead writer left is taken over, a live writer's never."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from es_plugin.backend.journal import Journal, orphans
from es_plugin.backend.writer import Action
from scrapy_zhdedup.errors import StoreError


def action(i: int) -> Action:
    return Action("create", f"h{i}", {"text": f"正文{i}", "zhdedup": {"doc_id": f"d{i}"}})


def dead_writer(directory: Path, index: str, batches: list[list[int]]) -> Journal:
    """A journal whose writer died with ``batches`` unwritten: its lock dropped, its files left."""
    journal = Journal(directory, index)
    journal.open()
    for seq, ids in enumerate(batches):
        for i in ids:
            journal.record(seq, action(i))
    for fd in journal._files.values():
        os.close(fd)
    assert journal._lock is not None
    os.close(journal._lock)  # what the kernel does for a killed process
    return journal


def test_a_dead_writers_batches_are_taken_over_in_order_and_then_removed(tmp_path: Path) -> None:
    dead_writer(tmp_path, "news", [[0, 1], [2]])
    dead_writer(tmp_path, "news-2024", [[9]])
    with orphans(tmp_path, "news") as batches:
        assert [[a.id for a in batch] for batch in batches] == [["h0", "h1"], ["h2"]]
        assert batches[0][1] == action(1)
    assert sorted(p.name.split("-")[3] for p in tmp_path.iterdir()) == ["2024", "2024"]  # its lock and batch
    with orphans(tmp_path, "news") as batches:
        assert batches == []


def test_a_live_writers_journal_is_not_taken_and_a_clean_close_leaves_nothing(tmp_path: Path) -> None:
    live = Journal(tmp_path, "news")
    live.open()
    live.record(0, action(0))
    with orphans(tmp_path, "news") as batches:
        assert batches == []
    live.done(0)
    live.close()
    assert list(tmp_path.iterdir()) == []


def test_an_error_while_storing_them_keeps_the_dead_writers_journal(tmp_path: Path) -> None:
    dead_writer(tmp_path, "news", [[0]])
    with pytest.raises(RuntimeError), orphans(tmp_path, "news"):
        raise RuntimeError("the node went away")
    with orphans(tmp_path, "news") as batches:
        assert [[a.id for a in batch] for batch in batches] == [["h0"]]


def test_a_last_line_cut_short_is_skipped_and_a_bad_line_before_it_named(tmp_path: Path) -> None:
    journal = dead_writer(tmp_path, "news", [[0, 1]])
    batch = tmp_path / f"{journal.name}.0.jsonl"
    whole = batch.read_text(encoding="utf-8")
    batch.write_text(whole[:-20], encoding="utf-8")
    with orphans(tmp_path, "news") as batches:
        assert [[a.id for a in b] for b in batches] == [["h0"]]
    journal = dead_writer(tmp_path, "news", [[0, 1]])
    batch = tmp_path / f"{journal.name}.0.jsonl"
    batch.write_text("{oops\n" + whole, encoding="utf-8")
    with pytest.raises(StoreError, match=rf"{batch.name}:1: not a journal line"), orphans(tmp_path, "news"):
        pass
