"""The worker pool: results in input order, errors as values, verdicts independent of the worker count."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scrapy_zhdedup import DedupConfig, EmptyTextError
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.model import Prepared
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.workers import Job, PreparePool, Texts, TurnBatcher, prepare_job, prepared_by
from tests.support import ROOT, zhtexts
from tests.support.probes import inherited
from tests.support.zhtexts import edit_chars, news_page, with_attribution

ARTICLES = zhtexts.articles(40)


def jobs() -> list[Job]:
    """Originals, reposts (near and exact), a page, an empty text: in an order that mixes them."""
    out: list[Job] = []
    for i, a in enumerate(ARTICLES):
        out.append(Job(f"a{i}", a.text, None))
        if i % 3 == 0:
            out.append(Job(f"n{i}", edit_chars(with_attribution(a.text), 4, seed=i), None))
        if i % 5 == 0:
            out.append(Job(f"e{i}", " " + a.text, None))
        if i % 7 == 0:
            out.append(Job(f"h{i}", None, news_page(a.title, a.text)))
    out.insert(5, Job("empty", "   ", None))
    return out


def verdicts(workers: int) -> list[tuple[str, str | None, int | None] | str]:
    deduper = Deduper(DedupConfig())
    out: list[tuple[str, str | None, int | None] | str] = []
    with PreparePool(DedupConfig(), prepare_job, workers=workers, chunk=3) as pool:
        for job, prepared in zip(jobs(), pool.map(jobs())):
            if isinstance(prepared, Exception):
                out.append(type(prepared).__name__)
                continue
            assert prepared.doc_id == job.doc_id  # in input order
            v = deduper.judge_prepared(prepared)
            out.append((v.status, v.dup_of, v.distance))
    return out


def test_two_workers_judge_exactly_like_one() -> None:
    one = verdicts(1)
    assert one == verdicts(2)
    assert {v if isinstance(v, str) else v[0] for v in one} == {"unique", "near", "exact", "EmptyTextError"}
    # and like the engine judging one document at a time
    deduper = Deduper(DedupConfig())
    engine = []
    for doc_id, text, html in jobs():
        try:
            v = deduper.judge(doc_id, text=text, html=html)
            engine.append((v.status, v.dup_of, v.distance))
        except EmptyTextError:
            engine.append("EmptyTextError")
    assert one == engine


def _fingerprint_len(fingerprinter: Fingerprinter, text: str) -> int:
    if text == "boom":
        raise ValueError("bad record")
    return len(fingerprinter.clean(text=text))


def test_a_bad_record_is_a_value_and_the_input_is_read_lazily() -> None:
    read: list[int] = []

    def endless() -> Iterator[str]:
        n = 0
        while True:
            read.append(n)
            yield "boom" if n == 2 else "中文" * (n + 1)
            n += 1

    with PreparePool(DedupConfig(), _fingerprint_len, workers=2, chunk=4) as pool:
        results = pool.map(endless())
        first = [next(results) for _ in range(5)]
    assert first[:2] == [2, 4] and isinstance(first[2], ValueError) and first[3:] == [8, 10]
    assert len(read) <= 2 * 4 * 4 + 4 + 1  # the window: workers x 4 chunks of 4, plus one being cut


@pytest.mark.parametrize("text", [True, False, "written"])
def test_features_travel_back_from_the_workers(text: Texts) -> None:
    with PreparePool(DedupConfig(), prepare_job, workers=2, text=text) as pool:
        [prepared] = list(pool.map([Job("a", ARTICLES[0].text, None)]))
    assert isinstance(prepared, Prepared) and prepared.features is not None
    fingerprinter = Fingerprinter(DedupConfig())
    local = fingerprinter.prepare("a", text=ARTICLES[0].text)
    features = fingerprinter.features(local.clean)
    assert prepared.features._replace(sketch=None) == features._replace(sketch=None)
    assert prepared.features.sketch.to_bytes() == features.sketch.to_bytes()
    assert prepared.digest == local.digest and prepared.clean == (local.clean if text is True else "")
    assert prepared.written == (local.written if text else "") and local.written != local.clean  # width kept


@pytest.mark.parametrize("features", ["sketch", "auto"])
def test_one_worker_computes_a_chunks_features_together_unless_they_are_words(features: str) -> None:
    """With the default features the pool of one worker makes each chunk's in one batch (exact repeats too), the
    same values as one at a time; word features are left to the judge, which skips exact repeats."""
    config = DedupConfig(features=features)
    fingerprinter = Fingerprinter(config)
    with PreparePool(config, prepare_job, workers=1, chunk=4) as pool:
        results = [r for r in pool.map(jobs()) if isinstance(r, Prepared)]
    if features == "auto":
        assert all(r.features is None for r in results)
        return
    for prepared in results:
        assert prepared.features is not None
        alone = fingerprinter.features(prepared.clean)
        assert prepared.features._replace(sketch=None) == alone._replace(sketch=None)
        assert prepared.features.sketch.to_bytes() == alone.sketch.to_bytes()


def test_the_items_of_one_turn_go_together_and_each_result_comes_back_to_its_future() -> None:
    """TurnBatcher: nothing is sent until the turn ends (the callback it scheduled runs), then every item
    of the turn at once; a bad item is its own error value; the next turn schedules again."""
    turns_ended: list[Callable[[], None]] = []
    with PreparePool(DedupConfig(), _fingerprint_len, workers=2) as pool:
        batcher = TurnBatcher(pool, turns_ended.append)
        futures = [batcher.submit(text) for text in ["中文", "boom", "中文字", "一二三四", "五"]]
        assert len(turns_ended) == 1 and not any(f.done() for f in futures)
        turns_ended[0]()
        results = [f.result(timeout=60) for f in futures]
        later = batcher.submit("六七")
        assert len(turns_ended) == 2
        turns_ended[1]()
        assert later.result(timeout=60) == 2
    assert results[0] == 2 and isinstance(results[1], ValueError) and results[2:] == [3, 4, 1]


def _dies_once(fingerprinter: Fingerprinter, text: str) -> int:
    """Kills its worker the first time it sees ``die:<marker file>``, as the OOM killer would."""
    if text.startswith("die:") and not os.path.exists(text[4:]):
        Path(text[4:]).touch()
        os._exit(1)
    return len(text)


def test_items_lost_with_a_killed_worker_are_sent_again_to_a_new_pool(tmp_path: Path) -> None:
    turns_ended: list[Callable[[], None]] = []
    items = ["一二", f"die:{tmp_path / 'died'}", "三四五", "六"]
    with PreparePool(DedupConfig(), _dies_once, workers=2) as pool:
        batcher = TurnBatcher(pool, turns_ended.append)
        futures = [batcher.submit(text) for text in items]
        turns_ended[0]()
        results = [prepared_by(pool, future, item) for future, item in zip(futures, items)]
    assert results == [len(text) for text in items] and (tmp_path / "died").exists()


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        PreparePool(DedupConfig(), prepare_job, workers=0)


FORKED = """
import sys
import xml.dom.minidom
from scrapy_zhdedup import DedupConfig
from scrapy_zhdedup.workers import PreparePool
from tests.support.probes import inherited
with PreparePool(DedupConfig(), inherited, workers=2, fork=sys.argv[1] == "fork") as pool:
    print(sorted(set(pool.map(range(64)))))
"""


@pytest.mark.parametrize(("asked", "inherited"), [("fork", True), ("spawn", False)])
def test_scan_workers_are_forked_with_the_modules_imported(asked: str, inherited: bool) -> None:
    """``fork=True`` in a one-thread process (a fresh interpreter, as `zhdedup scan` is): the workers
    start with what the parent imported; spawned ones import it again."""
    out = subprocess.run([sys.executable, "-c", FORKED, asked], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out.strip() == str([inherited])


def test_fork_is_not_used_beside_another_thread() -> None:
    pool: PreparePool[int, bool] = PreparePool(DedupConfig(), inherited, workers=2, fork=True)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert pool._start_method() == "spawn"  # the other thread could hold a lock the workers would inherit held
    finally:
        stop.set()
        other.join()
