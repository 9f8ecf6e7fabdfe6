"""Band layout: which bit groups of a fingerprint are indexed so that near pairs meet exactly.

The 64 bits are cut into ``blocks`` contiguous blocks.  Two fingerprints within Hamming
distance ``k`` differ in at most ``k`` blocks, so they agree exactly on at least
``blocks - k`` of them (pigeonhole).  Each table indexes one combination of
``blocks - k`` blocks, so every near pair shares at least one table key (Manku, Jain &
Das Sarma 2007).  ``blocks = k + 1`` is plain pigeonhole (k+1 tables of 64/(k+1) bits);
more blocks give longer keys (fewer random candidates) at the price of more tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from math import comb
from typing import Any

import numpy as np

from ..config import DedupConfig, setting_name
from ..errors import ConfigError
from ..similarity.simhash import BITS

LAYOUT_VERSION = 1
MAX_TABLES = 128  # keys computed per document, and keyword fields per index on Elasticsearch


def _problem(k: int, blocks: int, bits: int) -> str | None:
    """Why ``k`` and ``blocks`` make no usable layout, or None: the key of the widest table (its ``blocks - k``
    widest blocks) and the table number must fit 64 bits, and there are at most MAX_TABLES tables."""
    if not 0 <= k < blocks <= bits:
        return f"is not a layout (the bands must be more than the threshold and at most {bits})"
    tables = comb(blocks, k)
    base, extra = divmod(bits, blocks)
    key_bits = (blocks - k) * base + min(extra, blocks - k)
    if tables > 1 and key_bits + max(1, (tables - 1).bit_length()) > 64:
        return f"needs {key_bits + max(1, (tables - 1).bit_length())}-bit band keys, more than 64"
    if tables > MAX_TABLES:
        return f"needs {tables} band tables, more than {MAX_TABLES}"
    return None


def default_blocks(k: int) -> int:
    """k + 2 blocks: at k=3 that is 10 tables of 25-26 bits (measured in benchmarks/lookup.py)."""
    return k + 2


@dataclass(frozen=True)
class BandLayout:
    k: int = 3
    blocks: int = field(default=0)
    bits: int = BITS

    @classmethod
    def from_config(cls, config: DedupConfig) -> BandLayout:
        """The layout the settings give (``ZHDEDUP_THRESHOLD``, ``ZHDEDUP_BANDS``)."""
        return cls(k=config.threshold, blocks=config.bands)

    def __post_init__(self) -> None:
        if self.blocks == 0:
            object.__setattr__(self, "blocks", default_blocks(self.k))
        problem = _problem(self.k, self.blocks, self.bits)
        if problem:
            fits = [b for b in range(self.k + 1, self.bits + 1) if not _problem(self.k, b, self.bits)]
            bands = f"{fits[0]}" if fits and fits[0] == fits[-1] else f"{fits[0]} to {fits[-1]}" if fits else ""
            way = f"at this threshold {setting_name('bands')} may be {bands}" if fits else f"lower {setting_name('threshold')}"
            raise ConfigError(f"{setting_name('threshold')} {self.k} with {setting_name('bands')} {self.blocks} "
                              f"{problem}: {way}")

    @cached_property
    def _block_masks(self) -> list[tuple[int, int]]:
        """(shift, width) per block, high bits first; widths differ by at most one bit."""
        base, extra = divmod(self.bits, self.blocks)
        out, top = [], self.bits
        for i in range(self.blocks):
            width = base + (1 if i < extra else 0)
            top -= width
            out.append((top, width))
        return out

    @cached_property
    def tables(self) -> list[tuple[int, ...]]:
        """Block combinations, one per table."""
        return list(combinations(range(self.blocks), self.blocks - self.k))

    @cached_property
    def key_bits(self) -> int:
        """Widest table key, in bits (decides the key dtype of the embedded index)."""
        masks = self._block_masks
        return max(sum(masks[b][1] for b in t) for t in self.tables)

    @cached_property
    def table_bits(self) -> int:
        return max(1, (len(self.tables) - 1).bit_length())

    @cached_property
    def field_names(self) -> list[str]:
        return [f"b{i}" for i in range(len(self.tables))]

    def keys(self, fp: int) -> list[int]:
        """One integer key per table: the table's blocks concatenated."""
        parts = [(fp >> shift) & ((1 << width) - 1) for shift, width in self._block_masks]
        widths = [w for _, w in self._block_masks]
        out = []
        for table in self.tables:
            key = 0
            for b in table:
                key = (key << widths[b]) | parts[b]
            out.append(key)
        return out

    def table_keys(self, fp: int) -> list[int]:
        """Keys prefixed with their table number, so all tables can share one sorted array."""
        shift = self.key_bits
        return [(t << shift) | key for t, key in enumerate(self.keys(fp))]

    def table_keys_array(self, fps: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`table_keys` for a bulk build: shape (len(fps), tables)."""
        fps = fps.astype(np.uint64)
        parts = [(fps >> np.uint64(s)) & np.uint64((1 << w) - 1) for s, w in self._block_masks]
        out = np.empty((len(fps), len(self.tables)), dtype=np.uint64)
        for t, table in enumerate(self.tables):
            key = np.zeros(len(fps), dtype=np.uint64)
            for b in table:
                key = (key << np.uint64(self._block_masks[b][1])) | parts[b]
            out[:, t] = (np.uint64(t) << np.uint64(self.key_bits)) | key
        return out

    def terms(self, fp: int) -> dict[str, str]:
        """Keyword values per band field; the field index is implied by the field name."""
        return {name: format(key, "x") for name, key in zip(self.field_names, self.keys(fp))}

    def to_dict(self) -> dict[str, Any]:
        return {"version": LAYOUT_VERSION, "bits": self.bits, "k": self.k, "blocks": self.blocks}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BandLayout:
        if data.get("version") != LAYOUT_VERSION:
            raise ConfigError(f"unsupported band layout version {data.get('version')!r}")
        return cls(k=int(data["k"]), blocks=int(data["blocks"]), bits=int(data["bits"]))
