"""``zhdedup scan`` as the installed console script: its output, a truncated input, and the peak memory of a
20,000-line run (started first, in the background, so that it overlaps the other tests)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrapy_zhdedup import DedupConfig, Deduper
from tests.support import zhtexts
from tests.support.helpers import gz_cut_after, write_jsonl
from tests.support.scans import ARTICLES, BAD, bad_file, oracle, read_verdicts, scan_records

ZHDEDUP = Path(sys.executable).with_name("zhdedup")
BIG_LINES = 20_000
MAX_RSS_MB = 600


@pytest.fixture(scope="module", autouse=True)
def big_scan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Starts `zhdedup scan` on 20,000 generated lines in the background; its peak RSS is measured
    by a parent that waits for it (``RUSAGE_CHILDREN``), so nothing but that run is counted."""
    workdir = tmp_path_factory.mktemp("big")
    rng = random.Random(20261121)
    pieces = zhtexts.snippets(8_000)
    lines: list[Any] = [{"id": f"doc-{i}", "text": p} for i, p in enumerate(pieces)]
    lines += [{"id": f"again-{i}", "text": rng.choice(pieces)} for i in range(8_000)]
    lines += [{"id": f"typo-{i}", "text": zhtexts.edit_chars(rng.choice(pieces), 1, seed=i)} for i in range(4_000)]
    rng.shuffle(lines)
    source = write_jsonl(workdir / "big.jsonl", lines)
    measure = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")
    proc = subprocess.Popen(
        [sys.executable, "-c", measure, str(ZHDEDUP), "scan", str(source), "-o", str(workdir / "out.jsonl"),
         "--store", str(workdir / "store"), "--workers", "1"],  # one process: its peak is the whole run's
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    state = {"proc": proc, "workdir": workdir, "lines": len(lines)}
    yield state
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_console_script(tmp_path: Path) -> None:
    """The installed `zhdedup` prints verdicts on stdout, bad lines and the summary on stderr."""
    records = scan_records()
    bad = bad_file(tmp_path).read_text(encoding="utf-8").splitlines()
    source = write_jsonl(tmp_path / "in.jsonl", records + bad)
    proc = subprocess.run([str(ZHDEDUP), "scan", str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    good = [*records, {"id": "first", "text": ARTICLES[0].text}, {"id": "last", "text": ARTICLES[1].text}]
    assert read_verdicts(proc.stdout) == oracle(good)
    for number, _, reason in BAD:
        assert f"{source}:{len(records) + number}: {reason}" in proc.stderr
    assert f"zhdedup scan: {len(good)} judged" in proc.stderr
    assert f"{len(BAD)} bad lines skipped" in proc.stderr


def test_20k_lines_run_with_bounded_memory(big_scan: dict[str, Any]) -> None:
    proc = big_scan["proc"]
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    peak_mb = int(stdout.strip().splitlines()[-1]) / 1024
    out = read_verdicts((big_scan["workdir"] / "out.jsonl").read_text(encoding="utf-8"))
    assert len(out) == big_scan["lines"] == BIG_LINES
    statuses = {o["status"] for o in out}
    assert statuses == {"unique", "exact", "near"}
    assert (big_scan["workdir"] / "store" / "index.npz").exists()
    assert peak_mb < MAX_RSS_MB, f"peak RSS {peak_mb:.0f} MB"


DAMAGED_LINES, READABLE = 5_000, 3_010


@pytest.fixture(scope="module")
def damaged_gz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """5,000 lines of news snippets, gzipped and cut so that exactly the first 3,010 can be read."""
    lines = [{"id": f"d{i}", "text": text} for i, text in enumerate(zhtexts.snippets(DAMAGED_LINES, size=60, step=100))]
    return gz_cut_after(tmp_path_factory.mktemp("damaged") / "in.jsonl.gz", lines, READABLE)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("store", [False, True])
def test_a_truncated_gz_input_is_judged_up_to_the_damage_for_any_workers(damaged_gz: Path, tmp_path: Path,
                                                                         workers: str, store: bool) -> None:
    """Every line before the cut is judged and printed (and kept with --store), then one line naming the file
    and the last line read, exit 2.  Two workers printed 2,560 of the 3,010, the error overtaking the lines
    still in the workers; before that, a 25-line EOFError traceback and exit 1."""
    kept = ["--store", str(tmp_path / "s")] if store else []
    proc = subprocess.run([str(ZHDEDUP), "scan", str(damaged_gz), "--workers", workers, *kept],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines() == [f"zhdedup: error: {damaged_gz}: cannot read past line {READABLE}: Compressed "
                                        "file ended before the end-of-stream marker was reached (a truncated or "
                                        "damaged .gz file?)"]
    assert [o["id"] for o in read_verdicts(proc.stdout)] == [f"d{i}" for i in range(READABLE)]
    if store:
        deduper = Deduper.open(DedupConfig(), tmp_path / "s")
        try:
            assert deduper.store.judged == READABLE  # what was read was judged and kept
        finally:
            deduper.close()


def test_a_setting_refused_with_worker_processes_is_the_same_one_line(tmp_path: Path) -> None:
    """``--shingle-size 0`` with two workers: it printed each worker's BrokenProcessPool traceback."""
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "国家统计局今天发布数据。"}])
    proc = subprocess.run([str(ZHDEDUP), "scan", str(source), "--workers", "2", "--shingle-size", "0"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["zhdedup: error: ZHDEDUP_SHINGLE_SIZE (--shingle-size) must be at least 1, not 0"]
