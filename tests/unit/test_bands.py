"""Band layouts: every pair within k shares a table key (pigeonhole), and the keys are consistent."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scrapy_zhdedup.index.bandindex import BandIndex
from scrapy_zhdedup.index.bands import BandLayout, default_blocks

LAYOUTS = [(0, 1), (0, 4), (1, 2), (2, 4), (3, 4), (3, 5), (3, 8), (4, 6), (5, 8), (6, 7), (8, 10)]


def _flip(fp: int, n: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), n):
        fp ^= 1 << bit
    return fp


def _share_a_key(layout: BandLayout, a: int, b: int) -> bool:
    return bool(set(layout.table_keys(a)) & set(layout.table_keys(b)))


@pytest.mark.parametrize(("k", "blocks"), LAYOUTS)
def test_every_pair_within_k_shares_a_table_key(k: int, blocks: int) -> None:
    layout = BandLayout(k=k, blocks=blocks)
    rng = random.Random(f"{k}/{blocks}")
    for _ in range(300):
        a = rng.getrandbits(64)
        b = _flip(a, rng.randint(0, k), rng)
        assert _share_a_key(layout, a, b)


@pytest.mark.parametrize(("k", "blocks"), [(3, 4), (3, 5), (2, 4)])
def test_worst_case_flips_spread_over_k_blocks_still_share_a_key(k: int, blocks: int) -> None:
    """One flipped bit in each of k different blocks: exactly blocks - k blocks stay equal."""
    layout = BandLayout(k=k, blocks=blocks)
    rng = random.Random(0)
    masks = layout._block_masks
    for _ in range(200):
        a = rng.getrandbits(64)
        b = a
        for shift, width in (masks[i] for i in rng.sample(range(blocks), k)):
            b ^= 1 << (shift + rng.randrange(width))
        assert _share_a_key(layout, a, b)


@pytest.mark.parametrize(("k", "blocks"), [(3, 5), (3, 4), (2, 3)])
def test_pairs_beyond_k_may_or_may_not_share_a_key(k: int, blocks: int) -> None:
    layout = BandLayout(k=k, blocks=blocks)
    rng = random.Random(1)
    shared = {True: 0, False: 0}
    for _ in range(400):
        a = rng.getrandbits(64)
        shared[_share_a_key(layout, a, _flip(a, rng.randint(k + 1, k + 3), rng))] += 1
    assert shared[True] and shared[False]
    # all bits in one block: far apart, yet a key in common (the index verifies the distance)
    shift, width = layout._block_masks[0]
    a = rng.getrandbits(64)
    assert _share_a_key(layout, a, a ^ (((1 << width) - 1) << shift))


def test_random_far_pairs_rarely_share_a_key() -> None:
    layout = BandLayout(k=3)
    rng = random.Random(2)
    hits = sum(_share_a_key(layout, rng.getrandbits(64), rng.getrandbits(64)) for _ in range(2000))
    assert hits <= 2


def test_blocks_cover_all_64_bits_once() -> None:
    for k, blocks in LAYOUTS:
        masks = BandLayout(k=k, blocks=blocks)._block_masks
        covered = 0
        for shift, width in masks:
            block = ((1 << width) - 1) << shift
            assert not covered & block
            covered |= block
        assert covered == 2**64 - 1
        assert max(w for _, w in masks) - min(w for _, w in masks) <= 1


def test_default_blocks_and_table_count() -> None:
    layout = BandLayout(k=3)
    assert layout.blocks == default_blocks(3) == 5
    assert len(layout.tables) == 10  # C(5, 2)
    assert len(layout.field_names) == 10 == len(layout.keys(123)) == len(layout.terms(123))
    assert BandLayout(k=3, blocks=4).tables == [(0,), (1,), (2,), (3,)]


@pytest.mark.parametrize(("k", "blocks"), [(-1, 3), (3, 3), (4, 3), (3, 65), (64, 64)])
def test_invalid_layouts_raise(k: int, blocks: int) -> None:
    with pytest.raises(ValueError, match=r"ZHDEDUP_BANDS \(--bands\)"):
        BandLayout(k=k, blocks=blocks)


@pytest.mark.parametrize(("k", "blocks"), [(1, 64), (1, 32), (2, 20)])
def test_layouts_whose_keys_do_not_fit_64_bits_are_refused_up_front(k: int, blocks: int) -> None:
    """Table number + key wider than 64 bits cannot go in the embedded index: say so, do not crash on add."""
    with pytest.raises(ValueError, match="64"):
        index = BandIndex(BandLayout(k=k, blocks=blocks))
        index.add(2**64 - 1)
        index.candidates(2**64 - 1)


def test_to_dict_from_dict_round_trip() -> None:
    for k, blocks in LAYOUTS:
        layout = BandLayout(k=k, blocks=blocks)
        again = BandLayout.from_dict(layout.to_dict())
        assert again == layout
        assert again.tables == layout.tables and again.keys(2**64 - 2) == layout.keys(2**64 - 2)


def test_from_dict_refuses_another_version() -> None:
    data = BandLayout().to_dict()
    with pytest.raises(ValueError, match="version"):
        BandLayout.from_dict({**data, "version": 99})
    with pytest.raises(ValueError, match="version"):
        BandLayout.from_dict({k: v for k, v in data.items() if k != "version"})


@pytest.mark.parametrize(("k", "blocks"), LAYOUTS)
def test_table_keys_array_equals_table_keys_per_row(k: int, blocks: int) -> None:
    layout = BandLayout(k=k, blocks=blocks)
    rng = random.Random(3)
    fps = [0, 1, 2**63, 2**64 - 1] + [rng.getrandbits(64) for _ in range(300)]
    array = layout.table_keys_array(np.array(fps, dtype=np.uint64))
    assert array.shape == (len(fps), len(layout.tables))
    for row, fp in zip(array.tolist(), fps):
        assert row == layout.table_keys(fp)


def test_keys_and_terms_agree() -> None:
    layout = BandLayout(k=3)
    fp = 0x0123456789ABCDEF
    assert list(layout.terms(fp).values()) == [format(key, "x") for key in layout.keys(fp)]
    key_bits = layout.key_bits
    assert [tk & ((1 << key_bits) - 1) for tk in layout.table_keys(fp)] == layout.keys(fp)
    assert [tk >> key_bits for tk in layout.table_keys(fp)] == list(range(len(layout.tables)))
