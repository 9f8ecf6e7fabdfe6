"""Band index, key table, Bloom filter and the embedded store, including its files on disk."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pytest
from pybloom_live import ScalableBloomFilter

from scrapy_zhdedup import DedupConfig, Deduper, StoreError, StoreFailedError
from scrapy_zhdedup.files.atomic import atomic_write
from scrapy_zhdedup.index.bandindex import BandIndex
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.bloom import ExactFilter
from scrapy_zhdedup.index.multimap import KeyTable
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.model import Features
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.simhash import hamming
from scrapy_zhdedup.store.embedded import INDEX_FILE, EmbeddedStore
from scrapy_zhdedup.store.log import LOG_FILE
from scrapy_zhdedup.store.meta import META_FILE
from scrapy_zhdedup.text.clean import content_hash
from tests.support import zhtexts

ARTICLES = zhtexts.articles(40)


def _flip(fp: int, bits: list[int]) -> int:
    for bit in bits:
        fp ^= 1 << bit
    return fp


def _within(index: BandIndex, fp: int, k: int) -> list[int]:
    """The candidates of ``fp`` within ``k`` bits, oldest first (the band keys may name a few beyond)."""
    return sorted(row for row in set(index.candidates(fp)) if hamming(index.fingerprint(row), fp) <= k)


# --- BandIndex ----------------------------------------------------------------------------------


def test_candidates_name_every_row_within_k() -> None:
    index = BandIndex(BandLayout(k=3))
    base = 0x9E3779B97F4A7C15
    assert index.candidates(base) == []  # empty index
    assert index.add(_flip(base, [1, 20, 40])) == 0
    assert index.add(_flip(base, [5])) == 1
    assert index.add(_flip(base, [2, 33, 50, 60])) == 2  # distance 4: beyond k
    assert _within(index, base, 3) == [0, 1]
    assert _within(index, _flip(base, [2, 33, 50, 60]), 3) == [2]
    assert _within(index, _flip(base, [5, 6, 7, 8, 9]), 3) == []  # 4 from row 1, more from the rest
    assert len(index) == 3 and index.fingerprint(1) == _flip(base, [5])


def test_candidates_reach_exactly_k_bits() -> None:
    rng = random.Random(11)
    for k in (0, 1, 3, 6):
        index = BandIndex(BandLayout(k=k))
        fp = rng.getrandbits(64)
        index.add(fp)
        assert set(index.candidates(_flip(fp, rng.sample(range(64), k)))) == {0}


def test_identical_rows_are_all_candidates() -> None:
    index = BandIndex(BandLayout(k=3))
    base = 0x0123456789ABCDEF
    for fp in (_flip(base, [3, 9]), _flip(base, [17, 44]), base, base):
        index.add(fp)
    assert _within(index, _flip(base, [3, 9, 17, 44]), 3) == [0, 1]  # both 2 bits away
    assert _within(index, base, 0) == [2, 3]


def test_candidates_agree_with_brute_force_on_many_rows() -> None:
    rng = np.random.default_rng(5)
    fps = rng.integers(0, 2**64, size=20_000, dtype=np.uint64, endpoint=False)
    index = BandIndex.from_fingerprints(BandLayout(k=3), fps)
    prng = random.Random(5)
    for _ in range(300):
        row = prng.randrange(len(fps))
        query = _flip(int(fps[row]), prng.sample(range(64), prng.randint(0, 5)))
        brute = np.flatnonzero(np.bitwise_count(fps ^ np.uint64(query)) <= 3).tolist()
        assert _within(index, query, 3) == brute


def test_bulk_build_equals_incremental_build() -> None:
    rng = random.Random(9)
    layout = BandLayout(k=3)
    fps = [rng.getrandbits(64) for _ in range(6_000)]
    fps += [_flip(fp, rng.sample(range(64), 2)) for fp in fps[:1_000]]  # near pairs
    incremental = BandIndex(layout)
    for fp in fps:
        incremental.add(fp)
    bulk = BandIndex.from_fingerprints(layout, np.array(fps, dtype=np.uint64))
    assert np.array_equal(bulk.fingerprints(), incremental.fingerprints())
    assert len(bulk) == len(incremental) == len(fps)
    for fp in fps[::7] + [_flip(fp, [0, 63]) for fp in fps[:500]] + [rng.getrandbits(64) for _ in range(300)]:
        assert sorted(bulk.candidates(fp)) == sorted(incremental.candidates(fp))
    # both keep accepting rows after the build
    assert bulk.add(fps[0]) == incremental.add(fps[0]) == len(fps)


# --- KeyTable ----------------------------------------------------------------------------------


def test_compaction_keeps_rows_oldest_first() -> None:
    table = KeyTable(np.uint32)
    rng = random.Random(3)
    expected: dict[int, list[int]] = {}
    for row in range(20_000):  # crosses the pending limit several times
        keys = {rng.randrange(500) for _ in range(3)}
        table.add_many(keys, row)
        for key in keys:
            expected.setdefault(key, []).append(row)
    for key in list(expected)[:50]:
        assert table.get_many([key]) == expected[key]
    table.compact()
    assert not table._pending
    for key in expected:
        assert table.get_many([key]) == expected[key]
    assert len(table) == sum(map(len, expected.values()))


def test_pending_and_compacted_rows_are_both_found() -> None:
    table = KeyTable(np.uint64)
    table.add_many([2**64 - 1, 7], 0)
    table.compact()
    table.add_many([2**64 - 1], 1)
    assert sorted(table.get_many([2**64 - 1])) == [0, 1]
    assert table.get_many([7, 8]) == [0]
    assert table.get_many([]) == []


def test_limit_skips_keys_shared_by_too_many_rows() -> None:
    table = KeyTable(np.uint32)
    for row in range(10):
        table.add_many([1], row)
        if row < 3:
            table.add_many([2], row)
        if row == 5:
            table.compact()  # key 1 is half compacted, half pending
    assert table.get_many([1, 2], limit=3) == [0, 1, 2]
    assert sorted(table.get_many([1, 2], limit=10)) == sorted([*range(10), 0, 1, 2])


def test_build_equals_adding() -> None:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 1000, size=5000).astype(np.uint32)
    rows = np.arange(5000, dtype=np.uint32)
    built = KeyTable.build(keys, rows)
    added = KeyTable(np.uint32)
    for k, r in zip(keys.tolist(), rows.tolist()):
        added.add_many([k], r)
    for key in range(0, 1000, 13):
        assert built.get_many([key]) == added.get_many([key])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_many_merges_equal_one_bulk_build(dtype: type[np.unsignedinteger], monkeypatch: pytest.MonkeyPatch) -> None:
    """Merging pending entries into the sorted arrays, again and again (rows oldest first within a
    key, limits counting both parts), gives the table one sort of every pair gives."""
    monkeypatch.setattr("scrapy_zhdedup.index.multimap._MIN_PENDING", 64)  # many merges, of many sizes
    rng = random.Random(7)
    top = int(np.iinfo(dtype).max)
    common = [rng.randrange(top + 1) for _ in range(40)] + [0, top]  # keys shared by many rows
    table = KeyTable(dtype)
    pairs: list[tuple[int, int]] = []
    merged_sizes = set()
    for row in range(6000):
        keys = {rng.choice(common) if rng.random() < 0.5 else rng.randrange(top + 1) for _ in range(rng.randrange(4))}
        table.add_many(keys, row)
        pairs += [(key, row) for key in keys]
        merged_sizes.add(len(table._rows))
        if row % 997 == 0:  # lookups over compacted and pending rows alike
            for key in common:
                rows = [r for k, r in pairs if k == key]
                for limit in (None, 3, 64):
                    assert table.get_many([key], limit=limit) == (rows if limit is None or len(rows) <= limit else [])
    assert len(merged_sizes) > 20
    keys_arr = np.array([k for k, _ in pairs], dtype=dtype)
    rows_arr = np.array([r for _, r in pairs], dtype=np.uint32)
    built_keys, built_rows = KeyTable.build(keys_arr, rows_arr).arrays()
    merged_keys, merged_rows = table.arrays()
    assert merged_keys.dtype == built_keys.dtype and merged_rows.dtype == built_rows.dtype == np.uint32
    assert np.array_equal(merged_keys, built_keys) and np.array_equal(merged_rows, built_rows)
    assert len(table) == len(pairs)
    reloaded_keys, reloaded_rows = KeyTable.build(merged_keys, merged_rows).arrays()  # sorted already: kept as is
    assert np.array_equal(reloaded_keys, built_keys) and np.array_equal(reloaded_rows, built_rows)


# --- Bloom filter ------------------------------------------------------------------------------


def test_bloom_round_trip() -> None:
    bloom = ExactFilter(error_rate=0.01, initial_capacity=1000)
    hashes = [content_hash(a.text) for a in ARTICLES]
    for h in hashes:
        assert not bloom.add(h)
    assert bloom.add(hashes[0])  # already there
    again = ExactFilter.from_bytes(bloom.to_bytes(), error_rate=0.01, initial_capacity=1000)
    assert all(h in again for h in hashes)
    assert len(again) == len(bloom) and again.error_rate == 0.01 and again.initial_capacity == 1000
    assert sum(content_hash(f"{a.text}。") in again for a in ARTICLES) <= 2


def test_bloom_sets_the_bits_pybloom_live_sets() -> None:
    """Tests then adds (the store's order) through filters that grow: the same answers and bytes as
    pybloom-live's own ``in`` and ``add``, so stores written before open the same."""
    bloom = ExactFilter(error_rate=0.01, initial_capacity=50)
    plain = ScalableBloomFilter(initial_capacity=50, error_rate=0.01, mode=ScalableBloomFilter.LARGE_SET_GROWTH)
    rng = random.Random(7)
    keys = [f"{rng.getrandbits(128):032x}" for _ in range(1500)]
    for i, key in enumerate(keys):
        again = keys[rng.randrange(i + 1)]  # some repeats
        for k in (key, again):
            assert (k in bloom) == (k in plain)
            assert bloom.add(k) == plain.add(k)
    assert len(plain.filters) > 2
    payload = io.BytesIO()
    plain.tofile(payload)
    assert bloom.to_bytes() == payload.getvalue()


@pytest.mark.parametrize("kwargs", [{"error_rate": 0}, {"error_rate": 1}, {"initial_capacity": 0}])
def test_bloom_settings_are_checked(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="bloom"):
        ExactFilter(**kwargs)


# --- EmbeddedStore -----------------------------------------------------------------------------


def _features(text: str) -> Features:
    return Fingerprinter(DedupConfig()).features(text)


def test_store_matches_name_the_earlier_document_and_its_cluster() -> None:
    store = EmbeddedStore(CandidateKeys(BandLayout(k=3)))
    text = ARTICLES[0].text
    a = _features(text)
    b = _features(zhtexts.edit_chars(text, 8, seed=1))
    c = _features(zhtexts.edit_chars(zhtexts.edit_chars(text, 8, seed=1), 2, seed=2))
    store.add("a", "a" * 32, a)
    near_b = store.find_near(b)
    assert near_b is not None
    assert (near_b.doc_id, near_b.cluster, near_b.distance) == ("a", "a", hamming(a.fingerprint, b.fingerprint))
    store.add("b", "b" * 32, b, repeats=near_b)
    near_c = store.find_near(c)
    assert near_c is not None and near_c.doc_id == "a"  # b repeats a: only a, the original, is a candidate
    store.add("c", "c" * 32, c, repeats=near_c)
    exact = store.find_exact("c" * 32)
    assert (exact.doc_id, exact.cluster, exact.distance) == ("c", "a", 0)
    assert store.find_exact("d" * 32) is None
    assert len(store) == 3


def _judge_all(deduper: Deduper, docs: list[tuple[str, str]]) -> list[tuple]:
    return [(v.doc_id, v.status, v.dup_of, v.distance, v.cluster)
            for v in (deduper.judge(doc_id, text=text) for doc_id, text in docs)]


def _docs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    first = [(a.id, a.text) for a in ARTICLES[:30]]
    first += [(f"{a.id}-typo", zhtexts.edit_chars(a.text, 1, seed=i)) for i, a in enumerate(ARTICLES[:10])]
    second = [(f"{a.id}-again", a.text) for a in ARTICLES[:30]]  # exact repeats
    second += [(f"{a.id}-trad", zhtexts.traditional(a.text)) for a in ARTICLES[10:20]]
    second += [(a.id, a.text) for a in ARTICLES[30:]]  # new
    return first, second


def test_save_and_open_give_the_same_verdicts(tmp_path: Path) -> None:
    first, second = _docs()
    one_run = Deduper()
    expected = _judge_all(one_run, first + second)

    run1 = Deduper.open(DedupConfig(), tmp_path)
    assert _judge_all(run1, first) == expected[: len(first)]
    run1.close()
    assert (tmp_path / INDEX_FILE).exists() and (tmp_path / META_FILE).exists()
    assert (tmp_path / LOG_FILE).stat().st_size == 0  # a clean close compacts the log into the snapshot
    run2 = Deduper.open(DedupConfig(), tmp_path)
    assert len(run2.store) == len(run1.store) and run2.store.judged == len(first)
    assert _judge_all(run2, second) == expected[len(first):]
    statuses = {s for _, s, *_ in expected[len(first):]}
    assert "exact" in statuses and "unique" in statuses


def test_a_failed_snapshot_leaves_the_store_growing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot writes views of the live arrays; a failed write (its traceback kept, as here) must not
    leave them pinned, or the next document could not be appended."""
    first, second = _docs()
    expected = _judge_all(Deduper(), first + second)
    run = Deduper.open(DedupConfig(), tmp_path)
    assert _judge_all(run, first) == expected[: len(first)]

    def disk_full(file: BinaryIO, **arrays: np.ndarray) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(np, "savez", disk_full)
        with pytest.raises(StoreFailedError, match=r"index.npz: cannot write the snapshot \(disk full\); nothing is") as failed:
            run.save()
    assert failed.value.__traceback__ is not None
    assert _judge_all(run, second) == expected[len(first):]
    run.close()
    run = Deduper.open(DedupConfig(), tmp_path)
    assert run.store.judged == len(first) + len(second)
    run.close()


def test_saving_twice_and_reopening_keeps_everything(tmp_path: Path) -> None:
    first, second = _docs()
    run = Deduper.open(DedupConfig(), tmp_path)
    _judge_all(run, first)
    run.save()
    run.save()
    run.close()
    run = Deduper.open(DedupConfig(), tmp_path)
    _judge_all(run, second)
    run.close()
    run = Deduper.open(DedupConfig(), tmp_path)
    uninterrupted = _judge_all(Deduper(), first + second)
    assert len(run.store) == sum(status != "exact" for _, status, *_ in uninterrupted)
    assert _judge_all(run, first + second) == uninterrupted  # judged before: the stored verdicts


def test_simhash_bands_switched_on_for_a_store_built_without_them(tmp_path: Path) -> None:
    """Stores keep fingerprints, not band keys, when the bands are off; reopened with them on, the
    band tables are built on load and name a text reachable through no other key."""
    layout, fp = BandLayout(k=3), 0x9E3779B97F4A7C15
    summary = Fingerprinter(DedupConfig()).features(ARTICLES[0].text).sketch
    stored, query = Features(fp, [], summary, []), Features(_flip(fp, [7]), [], summary, [])
    store = EmbeddedStore.open(CandidateKeys(layout), tmp_path)
    store.add("a", content_hash("a"), stored)
    assert store.find_near(query) is None
    with pytest.raises(ValueError, match="no band keys"):  # the fingerprints only
        store._rows.near.bands.candidates(query.fingerprint)
    store.close()
    store = EmbeddedStore.open(CandidateKeys(layout, simhash_bands=True), tmp_path)
    match = store.find_near(query)
    assert match is not None and (match.doc_id, match.distance) == ("a", 1)
    store.close()


def test_empty_store_round_trip(tmp_path: Path) -> None:
    Deduper.open(DedupConfig(), tmp_path).close()
    again = Deduper.open(DedupConfig(), tmp_path)
    assert len(again.store) == 0
    assert again.judge("x", text=ARTICLES[0].text).status == "unique"


def test_memory_only_store_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    deduper = Deduper.open(DedupConfig(), None)
    deduper.judge("x", text=ARTICLES[0].text)
    deduper.save()
    assert list(tmp_path.iterdir()) == []


def test_ids_with_unicode_and_blank_parts_survive(tmp_path: Path) -> None:
    run = Deduper.open(DedupConfig(), tmp_path)
    ids = ["https://新闻.example/文章?id=1", "0", "  ", "a\tb"]
    for doc_id, article in zip(ids, ARTICLES):
        run.judge(doc_id, text=article.text)
    run.close()
    again = Deduper.open(DedupConfig(), tmp_path)
    assert [again.judge(f"r{i}", text=a.text).dup_of for i, a in enumerate(ARTICLES[:4])] == ids
    with pytest.raises(ValueError, match="NUL"):
        again.judge("a\x00b", text=ARTICLES[5].text)
    with pytest.raises(ValueError, match="no usable"):  # one rule for ids everywhere: never empty
        again.judge("", text=ARTICLES[6].text)


def test_changing_the_threshold_between_runs(tmp_path: Path) -> None:
    """The band tables are rebuilt for the new k: reopening with another threshold works, and the
    verdicts are the sketch's, whatever k (the bands only name candidates)."""
    probe = Deduper(DedupConfig(threshold=3))
    pairs = []
    for i, article in enumerate(ARTICLES):
        edited = zhtexts.edit_chars(article.text, 8, seed=i)
        a, b = (probe.fingerprinter.fingerprint(probe.fingerprinter.clean(text=t)) for t in (article.text, edited))
        if 4 <= bin(a ^ b).count("1") <= 8:
            pairs.append((article, edited))
    assert len(pairs) >= 3

    run1 = Deduper.open(DedupConfig(threshold=3), tmp_path / "s")
    for article, _ in pairs:
        run1.judge(article.id, text=article.text)
    run1.close()
    shutil.copytree(tmp_path / "s", tmp_path / "narrow")  # each run below remembers what it judges
    narrow = Deduper.open(DedupConfig(threshold=3), tmp_path / "narrow")
    wide = Deduper.open(DedupConfig(threshold=8), tmp_path / "s")
    for store in (narrow, wide):
        verdicts = [store.judge(f"{a.id}-e", text=e) for a, e in pairs]
        assert [(v.status, v.dup_of) for v in verdicts] == [("near", a.id) for a, _ in pairs]
        assert all(4 <= v.distance <= 8 for v in verdicts)


def test_changing_the_band_count_between_runs(tmp_path: Path) -> None:
    run1 = Deduper.open(DedupConfig(bands=4), tmp_path)
    for a in ARTICLES[:10]:
        run1.judge(a.id, text=a.text)
    run1.close()
    run2 = Deduper.open(DedupConfig(bands=7), tmp_path)
    verdicts = [run2.judge(f"{a.id}-1", text=zhtexts.edit_chars(a.text, 1, seed=3)) for a in ARTICLES[:10]]
    assert sum(v.dup_of == a.id for v, a in zip(verdicts, ARTICLES)) >= 8


# --- files that cannot be used -----------------------------------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    deduper = Deduper.open(DedupConfig(), tmp_path / "store")
    for a in ARTICLES[:5]:
        deduper.judge(a.id, text=a.text)
    deduper.close()
    return tmp_path / "store"


def _npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _edited_index(saved: Path, **replace: np.ndarray) -> bytes:
    with np.load(saved / INDEX_FILE) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays.update(replace)
    return _npz(**arrays)


def _assert_store_error(directory: Path, name: str) -> None:
    with pytest.raises(StoreError) as info:
        Deduper.open(DedupConfig(), directory)
    message = str(info.value)
    assert str(directory / name) in message
    assert "Move or delete this file" in message and "--store" in message
    assert info.value.path == directory / name


def _bytes_flipped(data: bytes, at: float) -> bytes:
    out = bytearray(data)
    out[int(len(out) * at)] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize("corrupt", [
    pytest.param(lambda raw, saved: raw[: len(raw) // 2], id="truncated-half"),
    pytest.param(lambda raw, saved: raw[:-20], id="truncated-tail"),
    pytest.param(lambda raw, saved: b"", id="empty"),
    pytest.param(lambda raw, saved: random.Random(1).randbytes(4096), id="random-bytes"),
    pytest.param(lambda raw, saved: _flipped_in_array(raw, "fingerprints.npy"), id="flipped-fingerprint-byte"),
    pytest.param(lambda raw, saved: _flipped_in_array(raw, "ids.npy"), id="flipped-id-byte"),
    pytest.param(lambda raw, saved: _npz(weights=np.arange(5)), id="zip-without-our-arrays"),
    pytest.param(lambda raw, saved: _zip_with_text(), id="zip-with-a-text-file"),
    pytest.param(lambda raw, saved: pickle.dumps({"fingerprints": [1, 2, 3]}), id="pickle"),
    pytest.param(lambda raw, saved: _edited_index(saved, fingerprints=np.arange(2, dtype=np.uint64)),
                 id="inconsistent-lengths"),
    pytest.param(lambda raw, saved: _edited_index(saved, roots=np.array([0, 1, 2, 3, 99], dtype=np.uint32)),
                 id="root-out-of-range"),
    pytest.param(lambda raw, saved: _edited_index(saved, meta=np.frombuffer(b"{not json", dtype=np.uint8)),
                 id="meta-not-json"),
    pytest.param(lambda raw, saved: _edited_index(
        saved, meta=np.frombuffer(json.dumps({"format": 99, "count": 5}).encode(), dtype=np.uint8)),
                 id="future-format"),
])
def test_corrupt_index_file_is_a_store_error(saved: Path, corrupt: Callable[[bytes, Path], bytes]) -> None:
    path = saved / INDEX_FILE
    path.write_bytes(corrupt(path.read_bytes(), saved))
    _assert_store_error(saved, INDEX_FILE)


def _flipped_in_array(raw: bytes, member: str) -> bytes:
    """One byte changed inside an array's data (the zip CRC must catch it)."""
    info = zipfile.ZipFile(io.BytesIO(raw)).getinfo(member)
    start = raw.index(b"\x93NUMPY", info.header_offset)
    return _bytes_flipped(raw, (start + 128 + 3) / len(raw))


def _zip_with_text() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "这不是索引文件")
    return buf.getvalue()


def _npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.arange(5, dtype=np.uint64))
    return buf.getvalue()


@pytest.mark.parametrize("corrupt", [
    pytest.param(lambda saved: _npy(), id="single-npy-array"),
    pytest.param(lambda saved: _edited_index(saved, ids=np.frombuffer(b"\xff\xfe\x00a\x00b\x00c\x00d", dtype=np.uint8)),
                 id="ids-not-utf8"),
    pytest.param(lambda saved: _edited_index(saved, meta=np.frombuffer(b"[1, 2]", dtype=np.uint8)), id="meta-a-list"),
    pytest.param(lambda saved: _edited_index(
        saved, meta=np.frombuffer(json.dumps({"format": 2, "rows": "five", "entries": 5}).encode(), dtype=np.uint8)),
                 id="count-not-a-number"),
])
def test_foreign_or_edited_index_file_is_a_store_error(saved: Path, corrupt: Callable[[Path], bytes]) -> None:
    """Anything that is not our index must be a StoreError with the reset hint, never a bare TypeError."""
    (saved / INDEX_FILE).write_bytes(corrupt(saved))
    _assert_store_error(saved, INDEX_FILE)


def test_a_directory_where_the_index_file_should_be(saved: Path) -> None:
    (saved / INDEX_FILE).unlink()
    (saved / INDEX_FILE).mkdir()
    _assert_store_error(saved, INDEX_FILE)


# --- the Bloom false-positive path --------------------------------------------------------------


def test_a_bloom_filter_that_does_not_match_the_index_is_a_store_error(saved: Path) -> None:
    """The filter lives in the snapshot; one from another generation (here: empty) is refused, never trusted."""
    (saved / INDEX_FILE).write_bytes(_edited_index(saved, bloom=np.frombuffer(ExactFilter().to_bytes(), dtype=np.uint8)))
    with pytest.raises(StoreError, match="Bloom filter does not hold"):
        Deduper.open(DedupConfig(), saved)


def test_the_reloaded_bloom_filter_knows_every_stored_text(saved: Path) -> None:
    run = Deduper.open(DedupConfig(), saved)
    assert [run.judge(f"{a.id}-again", text=a.text).status for a in ARTICLES[:5]] == ["exact"] * 5
    assert run.store.bloom_false_positives == 0


def test_real_bloom_false_positive_is_counted() -> None:
    store = EmbeddedStore(CandidateKeys(BandLayout(k=3)), ExactFilter(error_rate=0.5, initial_capacity=1))
    for article in ARTICLES[:20]:
        store.add(article.id, content_hash(article.text), _features(article.text))
    rng = random.Random(4)
    probes = [f"{rng.getrandbits(128):032x}" for _ in range(200)]
    false_positive = [h for h in probes if h in store.bloom]
    assert false_positive, "a Bloom filter this small must answer yes for some unseen hashes"
    for h in false_positive:
        assert store.find_exact(h) is None
    assert store.bloom_false_positives == len(false_positive)


# --- atomic replacement ---------------------------------------------------------------------------


def test_a_failed_save_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / INDEX_FILE
    atomic_write(target, lambda fh: fh.write(b"old contents"))

    def fail_halfway(fh: BinaryIO) -> None:
        fh.write(b"new half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail_halfway)
    assert target.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == [INDEX_FILE]


def test_a_view_read_while_the_writer_replaces_the_snapshot_reads_again(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer renames a new snapshot into place, then empties the log: a view that read the old
    snapshot and then the emptied log would miss every document between; it sees the snapshot changed
    and reads both again."""
    from scrapy_zhdedup.store import embedded

    writer = Deduper.open(DedupConfig(), tmp_path)
    for a in ARTICLES[:20]:
        writer.judge(a.id, text=a.text)
    writer.save()
    for a in ARTICLES[20:30]:  # in the log, after the snapshot
        writer.judge(a.id, text=a.text)
    reads = []

    def read_log_meanwhile(path: Path) -> embedded.ReadResult:
        if not reads:  # the first view has read the snapshot: the writer judges on and snapshots
            for a in ARTICLES[30:]:
                writer.judge(a.id, text=a.text)
            writer.save()
        reads.append(path)
        return embedded.read_log(path)

    monkeypatch.setattr(embedded, "_read_log", read_log_meanwhile)
    view = EmbeddedStore.view(CandidateKeys.from_config(DedupConfig()), tmp_path)
    assert len(reads) == 2 and [v.doc_id for v in view.verdicts()] == [a.id for a in ARTICLES]
    assert [v for v in view.verdicts()] == [writer.store.previous(a.id) for a in ARTICLES]
    writer.close()


def test_a_store_of_the_word_simhash_is_refused_naming_the_rebuild(tmp_path: Path) -> None:
    """Issue 40 made the default SimHash of the sketch's hashes, so a store written before it (its sketch version
    without "-simhash2") holds fingerprints of another kind: refused in one line that says what to run."""
    Deduper.open(DedupConfig(), tmp_path).close()
    meta = json.loads((tmp_path / META_FILE).read_text())
    meta["fingerprint"].update(features="auto", sketch="oph128x16-char4-bands16x2of64")  # as main wrote it
    (tmp_path / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(StoreError) as refused:
        Deduper.open(DedupConfig(), tmp_path)
    message = str(refused.value)
    assert "sketch: store 'oph128x16-char4-bands16x2of64', now 'oph128x16-char4-bands16x2of64-simhash2'" in message
    assert "scan the same input again into a new store directory" in message and "\n" not in message
