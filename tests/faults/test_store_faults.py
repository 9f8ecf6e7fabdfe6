"""The embedded store under ordinary faults, with real processes: kill -9, torn logs, two writers,
other settings, unusable directories, old stores, a reader while the writer works.  Each asserts nothing
reported is lost."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from scrapy_zhdedup import DedupConfig, Deduper, StoreError
from scrapy_zhdedup.cli.main import main as cli_main
from scrapy_zhdedup.errors import StoreLockedError
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.store.embedded import INDEX_FILE, EmbeddedStore
from scrapy_zhdedup.store.log import LOG_FILE, read_log
from scrapy_zhdedup.store.meta import META_FILE
from tests.support import SUPPORT, judge_proc, zhtexts

pytestmark = pytest.mark.fault

JUDGE = SUPPORT / "judge_proc.py"
ARTICLES = zhtexts.articles(90)


def _corpus() -> list[dict[str, str]]:
    """Originals with exact repeats, edited and traditional reposts, in a seeded order."""
    docs = [{"id": a.id, "text": a.text} for a in ARTICLES]
    docs += [{"id": f"{a.id}-again", "text": a.text} for a in ARTICLES[:25]]
    docs += [{"id": f"{a.id}-typo", "text": zhtexts.edit_chars(a.text, 2, seed=i)} for i, a in enumerate(ARTICLES[25:50])]
    docs += [{"id": f"{a.id}-trad", "text": zhtexts.traditional(a.text)} for a in ARTICLES[50:65]]
    random.Random(5).shuffle(docs)
    return docs


CORPUS = _corpus()


def _uninterrupted() -> dict[str, dict[str, object]]:
    deduper = Deduper()
    return {d["id"]: judge_proc.judge(deduper, d["id"], d["text"]) for d in CORPUS}


def _write_corpus(path: Path) -> Path:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in CORPUS), encoding="utf-8")
    return path


def _judge_proc(store: Path, corpus: Path, start: int, compact_after: int, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(JUDGE), str(store), str(corpus), str(start), str(compact_after), *flags],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8")


def _stored_verdict(deduper: Deduper, doc_id: str) -> dict[str, object] | None:
    before = deduper.store.previous(doc_id)
    return None if before is None else {"id": doc_id, "status": before.status, "dup_of": before.dup_of,
                                        "distance": before.distance, "cluster": before.cluster}


# --- a reader while the writer works -----------------------------------------------------------------


def _view(store: Path) -> list[dict[str, object]]:
    """The verdicts a reader finds in the store now, as judge_proc reports them, in judging order."""
    view = EmbeddedStore.view(CandidateKeys.from_config(DedupConfig()), store)
    return [{"id": v.doc_id, "status": v.status, "dup_of": v.dup_of, "distance": v.distance, "cluster": v.cluster}
            for v in view.verdicts()]


def test_a_report_reads_a_store_its_writer_is_working_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``zhdedup report --store`` during a crawl or a scan: the writer holds the lock, snapshots and appends;
    the report reads a state the writer was in (the snapshot and the log's whole records after it), never
    fails with "in use by another writer", and the writer goes on to the same verdicts as alone."""
    corpus, store, page = _write_corpus(tmp_path / "corpus.jsonl"), tmp_path / "store", tmp_path / "report.html"
    expected = list(_uninterrupted().values())
    proc = _judge_proc(store, corpus, 0, 12_000, "--paced")  # a snapshot every ~30 documents
    assert proc.stdin is not None and proc.stdout is not None
    for judged in range(1, 121):  # the writer judges one document at a time, then waits, holding the lock
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == expected[judged - 1]
        if judged % 17 == 0:
            assert cli_main(["report", "--store", str(store), "-o", str(page)]) == 0, capsys.readouterr().err
            assert f'<td class="n" data-total="judged">{judged}</td>' in page.read_text(encoding="utf-8")
            assert _view(store) == expected[:judged]
    with pytest.raises(StoreLockedError):  # it is held all along: a second writer is still refused
        Deduper.open(DedupConfig(), store)
    proc.stdin.write("\n" * len(CORPUS))  # the rest without pause, read meanwhile
    proc.stdin.close()
    seen = []
    while proc.poll() is None:
        view = _view(store)
        assert view == expected[:len(view)]
        seen.append(len(view))
    proc.stdout.read()
    assert proc.wait() == 0, proc.stderr.read() if proc.stderr else ""
    assert seen == sorted(seen) and _view(store) == expected
    assert "in use" not in capsys.readouterr().err


# --- kill -9 ---------------------------------------------------------------------------------------


def test_kill_9_at_random_moments_loses_nothing_and_resumes_to_the_same_verdicts(tmp_path: Path) -> None:
    corpus, store = _write_corpus(tmp_path / "corpus.jsonl"), tmp_path / "store"
    rng = random.Random(20261122)
    kill_points = sorted(rng.sample(range(10, len(CORPUS) - 10), 3))
    reported: dict[str, dict[str, object]] = {}
    start = 0
    for kill_at in kill_points:
        proc = _judge_proc(store, corpus, start, 12_000)  # a snapshot every ~30 documents
        assert proc.stdout is not None
        lines = 0
        while start + lines < kill_at:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "judging process ended early"
            verdict = json.loads(line)
            reported[str(verdict["id"])] = verdict
            lines += 1
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout.read().splitlines(keepends=True):  # reported before it died
            if not line.endswith("\n"):
                continue  # cut short by the kill: never reported
            verdict = json.loads(line)
            reported[str(verdict["id"])] = verdict
            lines += 1
        assert proc.wait() == -signal.SIGKILL
        start += lines
        check = Deduper.open(DedupConfig(), store)
        lost = [doc_id for doc_id, v in reported.items() if _stored_verdict(check, doc_id) != v]
        check.close()
        assert lost == [], f"killed after {start} reported documents: {len(lost)} lost"
    proc = _judge_proc(store, corpus, start, 12_000)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    for line in out.splitlines():
        verdict = json.loads(line)
        reported[str(verdict["id"])] = verdict
    assert reported == _uninterrupted()
    again = Deduper.open(DedupConfig(), store)
    assert again.store.judged == len(CORPUS)  # every judged id once: the resumed overlap was answered, not re-added
    again.close()


# --- the log ---------------------------------------------------------------------------------------


def _abandoned_store(tmp_path: Path, n: int) -> Path:
    """A store whose writer died after judging ``n`` documents (no close: everything is in the log)."""
    store = tmp_path / "store"
    proc = _judge_proc(store, _write_corpus(tmp_path / "corpus.jsonl"), 0, 1 << 30, "--hold", "--only", str(n))
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "ready\n"
    proc.stdin.write("\n")
    proc.stdin.flush()
    for _ in range(n):  # then it waits, its n documents judged and nothing more, until it is killed
        assert proc.stdout.readline()
    proc.kill()
    proc.wait()
    return store


def _open_judged(store: Path) -> int:
    deduper = Deduper.open(DedupConfig(), store)
    judged = deduper.store.judged
    deduper.close()
    return judged


def test_a_torn_last_record_is_dropped_and_the_rest_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _abandoned_store(tmp_path, 20)
    log = store / LOG_FILE
    whole = read_log(log)
    judged = len(whole.records)
    assert judged >= 20 and whole.dropped_bytes == 0
    last = len(whole.records[-1].encode()) + 8
    with log.open("r+b") as fh:
        fh.truncate(whole.good_bytes - last // 2)
    assert _open_judged(store) == judged - 1
    assert "dropped a torn or damaged tail" in caplog.text
    deduper = Deduper.open(DedupConfig(), store)  # and the store goes on from there
    assert deduper.judge("new", text=ARTICLES[-1].text).status == "unique"
    deduper.close()
    assert _open_judged(store) == judged


@pytest.mark.parametrize("garbage", [b"\x00" * 3, b"\xff" * 64, random.Random(3).randbytes(5000)],
                         ids=["short-header", "bad-length", "random-bytes"])
def test_garbage_after_the_last_record_is_dropped(tmp_path: Path, garbage: bytes) -> None:
    store = _abandoned_store(tmp_path, 15)
    judged = len(read_log(store / LOG_FILE).records)
    with (store / LOG_FILE).open("ab") as fh:
        fh.write(garbage)
    assert _open_judged(store) == judged
    assert read_log(store / LOG_FILE).dropped_bytes == 0


def test_a_crash_between_snapshot_and_log_truncation_adds_nothing_twice(tmp_path: Path) -> None:
    store = _abandoned_store(tmp_path, 25)
    old_log = (store / LOG_FILE).read_bytes()
    judged = _open_judged(store)  # the clean close writes the snapshot and empties the log
    assert (store / LOG_FILE).stat().st_size == 0
    (store / LOG_FILE).write_bytes(old_log)  # as if the process died just before emptying it
    deduper = Deduper.open(DedupConfig(), store)
    assert deduper.store.judged == judged and len(deduper.store) <= judged
    assert deduper.judge("x-again", text=CORPUS[0]["text"]).status == "exact"
    deduper.close()


def test_a_snapshot_cut_short_by_a_crash_is_cleaned_up(tmp_path: Path) -> None:
    store = _abandoned_store(tmp_path, 5)
    (store / f".{INDEX_FILE}.k1l2.tmp").write_bytes(b"half a snapshot")
    assert _open_judged(store) == 5
    assert sorted(p.name for p in store.iterdir()) == [INDEX_FILE, "lock", LOG_FILE, META_FILE]


def test_a_gap_between_snapshot_and_log_is_a_store_error(tmp_path: Path) -> None:
    store = _abandoned_store(tmp_path, 10)
    log = (store / LOG_FILE).read_bytes()
    records = read_log(store / LOG_FILE).records
    first = len(records[0].encode()) + 8
    (store / LOG_FILE).write_bytes(log[first:])  # record 0 missing: the rest cannot be placed
    with pytest.raises(StoreError, match="does not follow the snapshot"):
        Deduper.open(DedupConfig(), store)


# --- what a rerun needs ----------------------------------------------------------------------------


def test_every_judged_id_is_remembered_with_its_verdict_across_compaction(tmp_path: Path) -> None:
    store = tmp_path / "store"
    deduper = Deduper.open(DedupConfig(), store)
    a, b = ARTICLES[0], ARTICLES[1]
    deduper.judge("a", text=a.text)
    deduper.judge("a-copy", text=a.text)
    deduper.judge("a-typo", text=zhtexts.edit_chars(a.text, 1, seed=1))
    deduper.judge("b", text=b.text)
    deduper.save()  # the first four in the snapshot, the new version of b below only in the log
    deduper.judge("b", text=zhtexts.edit_chars(b.text, 2, seed=2))
    deduper.store.close()
    again = Deduper.open(DedupConfig(), store)
    assert again.store.previous("never") is None
    got = {i: again.store.previous(i) or pytest.fail(f"{i} forgotten") for i in ("a", "a-copy", "a-typo", "b")}
    assert (got["a"].status, got["a"].dup_of, got["a"].distance, got["a"].cluster) == ("unique", None, None, "a")
    assert (got["a-copy"].status, got["a-copy"].dup_of, got["a-copy"].distance, got["a-copy"].cluster) == (
        "exact", "a", 0, "a")
    assert (got["a-typo"].status, got["a-typo"].dup_of, got["a-typo"].cluster) == ("near", "a", "a")
    assert got["b"].status == "unique" and got["b"].dup_of is None  # the new version of b, not a repeat of itself
    assert got["a-copy"].content_hash == got["a"].content_hash != got["a-typo"].content_hash
    assert again.store.judged == 5 and len(again.store) == 4
    again.close()


# --- who may open the store ------------------------------------------------------------------------


def test_a_second_writer_fails_at_open_and_the_first_keeps_its_data(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    store, corpus = tmp_path / "store", _write_corpus(tmp_path / "corpus.jsonl")
    first = _judge_proc(store, corpus, 0, 1 << 30, "--hold")
    assert first.stdout is not None and first.stdin is not None
    assert first.stdout.readline() == "ready\n"
    second_input = tmp_path / "other.jsonl"
    second_input.write_text(json.dumps({"id": "z", "text": ARTICLES[0].text}) + "\n", encoding="utf-8")
    assert cli_main(["scan", "--workers", "1", str(second_input), "--store", str(store), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{store}: the store is in use by another writer (pid {first.pid})" in err
    with pytest.raises(StoreLockedError):
        Deduper.open(DedupConfig(), store)
    first.stdin.write("\n")
    first.stdin.flush()
    out, errors = first.communicate()
    assert first.returncode == 0, errors
    assert _open_judged(store) == len(out.splitlines()) == len(CORPUS)


def test_the_lock_is_released_on_close_in_the_same_process(tmp_path: Path) -> None:
    one = Deduper.open(DedupConfig(), tmp_path)
    with pytest.raises(StoreLockedError, match=f"pid {os.getpid()}"):
        Deduper.open(DedupConfig(), tmp_path)
    one.close()
    Deduper.open(DedupConfig(), tmp_path).close()


def test_other_fingerprint_settings_name_each_difference(tmp_path: Path) -> None:
    Deduper.open(DedupConfig(), tmp_path).close()
    with pytest.raises(StoreError) as info:
        Deduper.open(DedupConfig(features="chars", shingle_size=2, passage_chars=30), tmp_path)
    message = str(info.value)
    assert "built with other fingerprint settings" in message
    for part in ("features: store 'sketch', now 'chars'", "shingle_size: store 3, now 2",
                 "passage_chars: store 20, now 30"):
        assert part in message
    assert "threshold" not in message
    # threshold, bands and the query-time passage settings may change
    Deduper.open(DedupConfig(threshold=5, bands=8, passage_share=0.5, similarity=0.8, containment=0.9),
                 tmp_path).close()


def test_a_path_that_is_a_file_is_an_error_at_open(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot use as a store directory"):
        Deduper.open(DedupConfig(), tmp_path / "file")
    with pytest.raises(StoreError, match="cannot use as a store directory"):
        Deduper.open(DedupConfig(), tmp_path / "file" / "store")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot write to: mode 555, or immutable for root (who ignores modes)."""
    path = tmp_path / "ro"
    path.mkdir(mode=0o555)
    if os.geteuid() != 0:
        yield path
        path.chmod(0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True).returncode:
        pytest.skip("running as root on a file system without chattr +i: cannot make a read-only directory")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_read_only_directory_is_an_error_at_open(read_only_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    out = tmp_path / "out.jsonl"
    assert cli_main(["scan", "--workers", "1", str(corpus), "--store", str(read_only_dir), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    reason = "Permission denied" if os.geteuid() != 0 else "Operation not permitted"
    assert f"zhdedup: error: {read_only_dir}: cannot create the lock file ({reason})" in err
    assert not out.exists()  # found before anything was judged or written


def test_a_format_1_store_is_refused_with_the_reason(tmp_path: Path) -> None:
    np.savez(tmp_path / INDEX_FILE, meta=np.frombuffer(b'{"format": 1, "count": 0}', dtype=np.uint8))
    (tmp_path / "bloom.bin").write_bytes(b"ZHDEDUP-BLOOM\n")
    with pytest.raises(StoreError, match=r"a format 1 store .* cannot be migrated"):
        Deduper.open(DedupConfig(), tmp_path)


def test_a_store_can_be_copied_once_closed(tmp_path: Path) -> None:
    """The lock file is only a lock: a copy of a closed store opens like the original."""
    deduper = Deduper.open(DedupConfig(), tmp_path / "a")
    deduper.judge("a", text=ARTICLES[0].text)
    deduper.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert _open_judged(tmp_path / "b") == 1


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1]", b'{"format": 2}', b'{"format": 5, "fingerprint": {}}'],
                         ids=["empty", "not-json", "a-list", "no-settings", "future-format"])
def test_damaged_store_metadata_is_a_store_error(tmp_path: Path, content: bytes) -> None:
    Deduper.open(DedupConfig(), tmp_path).close()
    (tmp_path / META_FILE).write_bytes(content)
    with pytest.raises(StoreError) as info:
        Deduper.open(DedupConfig(), tmp_path)
    assert str(tmp_path / META_FILE) in str(info.value)


def test_a_closed_store_refuses_to_remember(tmp_path: Path) -> None:
    """After close nothing more reaches the log, so accepting a document would forget it silently."""
    deduper = Deduper.open(DedupConfig(), tmp_path)
    deduper.close()
    with pytest.raises(StoreError, match="closed"):
        deduper.judge("late", text=ARTICLES[0].text)
