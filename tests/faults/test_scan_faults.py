"""``zhdedup scan`` under ordinary faults, as real processes: kill -9 and resume, a rerun, bad records,
a full disk under the store or the output, an output that names the input, standard input, a pipe, gzip.

Each fault test counts what was lost (documents reported by a killed run but forgotten by its store)
and compares the verdicts after resuming with an uninterrupted run over the same input.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scrapy_zhdedup import DedupConfig, Deduper
from tests.support import zhtexts
from tests.support.helpers import on_a_small_disk, write_jsonl
from tests.support.waiting import wait_until

pytestmark = pytest.mark.fault

ZHDEDUP = Path(sys.executable).with_name("zhdedup")
ARTICLES = zhtexts.articles(60)


def _corpus() -> list[dict[str, Any]]:
    """Originals, with exact and near repeats of earlier ones mixed in (about a third are repeats)."""
    rng = random.Random(7)
    docs: list[dict[str, Any]] = []
    for i, a in enumerate(ARTICLES):
        docs.append({"id": a.id, "text": a.text})
        if i % 3 == 1:
            earlier = ARTICLES[rng.randrange(i + 1)]
            docs.append({"id": f"{a.id}-copy", "text": zhtexts.full_width(earlier.text)})
        if i % 3 == 2:
            earlier = ARTICLES[rng.randrange(i + 1)]
            docs.append({"id": f"{a.id}-typo", "text": zhtexts.edit_chars(earlier.text, 1, seed=i)})
    return docs


CORPUS = _corpus()


def _scan(*args: str | Path, stdin: bytes | None = None, workers: int = 1) -> subprocess.CompletedProcess[bytes]:
    """One process unless the test is about the workers (starting them costs about a second per run)."""
    return subprocess.run([str(ZHDEDUP), "scan", "--workers", str(workers), *map(str, args)], input=stdin,
                          capture_output=True, timeout=300, check=False)


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (the worker pool and its resource tracker)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _wait_until_gone(pids: list[int]) -> None:
    wait_until(lambda: not any(_running(p) for p in pids), f"end of processes {pids} after their parent")


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has exited, whoever reaps it


def _lines(data: bytes | str) -> list[dict[str, Any]]:
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_at_random_moments_then_rerun_loses_nothing_and_says_the_same(tmp_path: Path, workers: int) -> None:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    uninterrupted = _scan(corpus, "--store", tmp_path / "fresh")
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    expected = _lines(uninterrupted.stdout)
    assert len(expected) == len(CORPUS)

    store = tmp_path / "store"
    rng = random.Random(20261122)
    reported: list[dict[str, Any]] = []
    for _ in range(3):  # each run is killed after a random number of further verdicts
        proc = subprocess.Popen([str(ZHDEDUP), "scan", str(corpus), "--store", str(store), "--workers", str(workers)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        stop_after = rng.randrange(5, 30)
        seen: list[dict[str, Any]] = []
        for raw in proc.stdout:
            seen.append(json.loads(raw))
            if len(seen) >= len(reported) + stop_after:
                break
        workers_of_the_run = _children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert seen == expected[: len(seen)]  # a resumed run says what the first run said
        assert len(workers_of_the_run) >= workers - 1
        _wait_until_gone(workers_of_the_run)  # orphaned workers leave on their own
        reported = max(reported, seen, key=len)

    remembered = Deduper.open(DedupConfig(), store)
    try:
        lost = [r["id"] for r in reported if remembered.store.previous(r["id"]) is None]
    finally:
        remembered.close()
    assert lost == []

    resumed = _scan(corpus, "--store", store, "-o", tmp_path / "out.jsonl", workers=workers)
    assert resumed.returncode == 0, resumed.stderr
    assert _lines((tmp_path / "out.jsonl").read_text(encoding="utf-8")) == expected
    assert b"judged before (stored verdicts)" in resumed.stderr


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Long enough (10,000 snippets, seconds of judging) that a signal sent after the tenth verdict lands mid-run."""
    texts = zhtexts.snippets(10_000, size=60, step=100)
    return write_jsonl(tmp_path_factory.mktemp("long") / "corpus.jsonl",
                       [{"id": f"s{i}", "text": text} for i, text in enumerate(texts)])


def _interrupted(command: list[str]) -> tuple[int, list[dict[str, Any]], list[str]]:
    """``command`` sent a real SIGINT after its tenth verdict: its exit status, every verdict it printed, its
    standard error lines."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    seen = [json.loads(proc.stdout.readline()) for _ in range(10)]
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()  # through the reader readline() filled (communicate() would skip its buffer)
    err = proc.stderr.read()  # one line: it cannot fill the pipe while stdout is being read
    proc.wait(timeout=120)
    return proc.returncode, seen + _lines(rest), err.decode().splitlines()


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_says_how_far_it_got_and_the_rerun_resumes(long_corpus: Path, tmp_path: Path, workers: int) -> None:
    """A real SIGINT mid-run: one line, exit 130, the verdicts printed so far kept in the store, and the same
    command again finishes with the output of an uninterrupted run (it exited 130 saying nothing)."""
    expected = _lines(_scan(long_corpus, workers=workers).stdout)
    store = tmp_path / "store"
    code, seen, err = _interrupted([str(ZHDEDUP), "scan", str(long_corpus), "--store", str(store),
                                    "--workers", str(workers)])
    assert code == 130
    assert err == [f"zhdedup: interrupted after {len(seen)} documents; rerun the same command to resume"]
    assert 10 <= len(seen) < len(expected) and seen == expected[: len(seen)]
    resumed = _scan(long_corpus, "--store", store, workers=workers)
    assert resumed.returncode == 0, resumed.stderr
    assert _lines(resumed.stdout) == expected
    assert b"judged before (stored verdicts)" in resumed.stderr


def test_ctrl_c_without_a_store_says_nothing_is_kept(long_corpus: Path) -> None:
    code, seen, err = _interrupted([str(ZHDEDUP), "scan", str(long_corpus), "--workers", "1"])
    assert code == 130
    assert err == [f"zhdedup: interrupted after {len(seen)} documents; nothing is kept without --store: rerun the "
                   "same command to start again"]


def test_a_rerun_on_the_same_store_repeats_its_verdicts(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS[:40])
    first = _scan(corpus, "--store", tmp_path / "store")
    again = _scan(corpus, "--store", tmp_path / "store")
    assert first.returncode == again.returncode == 0
    assert _lines(again.stdout) == _lines(first.stdout)
    assert not any(v["dup_of"] == v["id"] for v in _lines(again.stdout))
    assert b"40 judged before (stored verdicts)" in again.stderr


def test_a_bad_record_in_the_middle_is_a_bad_line_and_the_rest_is_kept(tmp_path: Path) -> None:
    docs: list[Any] = [json.dumps(d, ensure_ascii=False) for d in CORPUS[:20]]
    docs.insert(7, json.dumps({"id": "nul\x00id", "text": ARTICLES[50].text}))
    docs.insert(12, '{"id": "\\ud800", "text": "孤立的代理项不能写成UTF-8。"}')
    docs.insert(15, '{"id": "surrogate-text", "text": "\\udfff 正文"}')
    docs.insert(17, '{"id": "surrogate-page", "html": "<p>\\ud800 正文</p>"}')  # checked once, where it is read
    corpus = write_jsonl(tmp_path / "corpus.jsonl", docs)
    run = _scan(corpus, "--store", tmp_path / "store")
    assert run.returncode == 0, run.stderr
    err = run.stderr.decode()
    assert f"{corpus}:8: the id contains a NUL character" in err
    assert f"{corpus}:13: the id contains a lone surrogate" in err
    assert f"{corpus}:16: \"text\" contains a lone surrogate" in err
    assert f"{corpus}:18: \"html\" contains a lone surrogate" in err
    assert _lines(run.stdout) == _lines(_scan(write_jsonl(tmp_path / "good.jsonl", CORPUS[:20])).stdout)
    again = _scan(corpus, "--store", tmp_path / "store")  # the store of the run was kept
    assert b"20 judged before" in again.stderr


def test_a_full_disk_under_the_store_stops_the_scan_naming_the_file_and_a_rerun_loses_nothing(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    expected = _lines(_scan(corpus).stdout)
    disk, kept, out = tmp_path / "disk", tmp_path / "kept", tmp_path / "out.jsonl"
    cmd = [ZHDEDUP, "scan", "--workers", "1", corpus, "--store", disk / "store", "-o", out]
    full = subprocess.run(on_a_small_disk(cmd, disk, "16k", keep=kept), capture_output=True, timeout=300, check=False)
    err = full.stderr.decode()
    assert full.returncode == 2, err
    assert f"{disk / 'store' / 'log.bin'}: cannot remember " in err and "No space left on device" in err, err
    assert "Traceback" not in err and not out.exists()
    resumed = _scan(corpus, "--store", kept / "store", "-o", out)  # the same store, with room
    assert resumed.returncode == 0, resumed.stderr
    assert _lines(out.read_text(encoding="utf-8")) == expected
    remembered = re.search(rb"(\d+) judged before", resumed.stderr)
    assert remembered and 0 < int(remembered.group(1)) < len(CORPUS), resumed.stderr


def test_a_full_disk_under_the_output_names_it_and_leaves_no_partial_file(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    expected = _lines(_scan(corpus).stdout)
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    cmd = [ZHDEDUP, "scan", "--workers", "1", corpus, "--store", tmp_path / "store", "-o", disk / "out.jsonl"]
    full = subprocess.run(on_a_small_disk(cmd, disk, "4k", keep=kept), capture_output=True, timeout=300, check=False)
    err = full.stderr.decode()
    assert full.returncode == 2, err
    assert f"{disk / 'out.jsonl'}: cannot write the output (No space left on device)" in err, err
    assert list(kept.iterdir()) == []  # neither a partial output nor its temporary file
    resumed = _scan(corpus, "--store", tmp_path / "store")
    assert resumed.returncode == 0, resumed.stderr
    assert _lines(resumed.stdout) == expected
    to_stdout = ["sh", "-c", 'exec "$@" > "$0"', disk / "out.jsonl", ZHDEDUP, "scan", corpus]
    full = subprocess.run(on_a_small_disk(to_stdout, disk, "4k"), capture_output=True, timeout=300, check=False)
    assert full.returncode == 2 and b"cannot write to standard output (No space left on device)" in full.stderr


def test_output_naming_the_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", CORPUS[:5])
    before = corpus.read_bytes()
    run = _scan(corpus, "-o", corpus)
    assert run.returncode == 2
    assert b"is the input" in run.stderr
    assert corpus.read_bytes() == before
    link = tmp_path / "link.jsonl"
    link.symlink_to(corpus)
    assert _scan(corpus, "-o", link).returncode == 2 and corpus.read_bytes() == before


def test_output_appears_only_when_the_run_ends(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", CORPUS)
    out = tmp_path / "out.jsonl"
    out.write_text("previous result\n", encoding="utf-8")
    # The input comes through a pipe whose last line is held back, so the run is still going when it is killed:
    # read from the file, a scan this fast could end (and rename its output into place) before the kill.
    proc = subprocess.Popen([str(ZHDEDUP), "scan", "-", "-o", str(out), "--store", str(tmp_path / "s"), "--workers", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    proc.stdin.write(b"".join(corpus.read_bytes().splitlines(keepends=True)[:-1]))
    proc.stdin.flush()
    log = tmp_path / "s" / "log.bin"
    wait_until(lambda: log.exists() and log.stat().st_size > 2000, "few documents judged", proc=proc)  # then killed
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdin.close()
    assert proc.returncode == -signal.SIGKILL  # killed mid-run, not after it ended
    assert out.read_text(encoding="utf-8") == "previous result\n"  # never a truncated file
    assert _scan(corpus, "-o", out).returncode == 0
    assert len(_lines(out.read_text(encoding="utf-8"))) == len(CORPUS)


def test_standard_input_a_pipe_and_gzip(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", CORPUS[:25])
    expected = _lines(_scan(corpus).stdout)
    assert _lines(_scan("-", stdin=corpus.read_bytes()).stdout) == expected
    cat = subprocess.Popen(["cat", str(corpus)], stdout=subprocess.PIPE)
    piped = subprocess.run([str(ZHDEDUP), "scan", "/dev/stdin"], stdin=cat.stdout, capture_output=True, timeout=300,
                           check=False)
    cat.wait()
    assert piped.returncode == 0, piped.stderr
    assert _lines(piped.stdout) == expected
    packed = tmp_path / "c.jsonl.gz"
    packed.write_bytes(gzip.compress(corpus.read_bytes()))
    assert _lines(_scan(packed).stdout) == expected


def test_an_input_where_nothing_can_be_judged_exits_non_zero(tmp_path: Path) -> None:
    corpus = tmp_path / "utf16.jsonl"
    corpus.write_bytes("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in CORPUS[:5]).encode("utf-16"))
    run = _scan(corpus)
    assert run.returncode == 1
    assert b"could be judged" in run.stderr and f"{corpus}:1:".encode() in run.stderr
