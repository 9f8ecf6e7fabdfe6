"""Memory of the embedded store by part, for the bytes-per-document figures of the README and the benchmarks.

The same accounting the package's ``nbytes()`` methods did (issue 32 moved it here: the package keeps no
code only benchmarks read): the bytes of each part's arrays, a key table's pending entries at ~100 B each
(dict slot, list, int objects, measured with tracemalloc), the ids as str objects plus their list slots.
It reads the objects' arrays directly, so it changes nothing it measures (no merge of pending entries).
"""

from __future__ import annotations

from scrapy_zhdedup.index.bandindex import BandIndex
from scrapy_zhdedup.index.bloom import ExactFilter
from scrapy_zhdedup.index.multimap import KeyTable
from scrapy_zhdedup.index.nearindex import NearIndex
from scrapy_zhdedup.store.embedded import EmbeddedStore

PENDING_ENTRY_BYTES = 100


def table_bytes(table: KeyTable) -> int:
    return table._keys.nbytes + table._rows.nbytes + table._pending_count * PENDING_ENTRY_BYTES


def band_index_bytes(index: BandIndex) -> int:
    return index._fps.itemsize * len(index._fps) + table_bytes(index._table)


def bloom_bytes(bloom: ExactFilter) -> int:
    return sum(len(f.bitarray) // 8 for f in bloom._bloom.filters)


def near_index_bytes(index: NearIndex) -> dict[str, int]:
    return {"band_index": band_index_bytes(index.bands), "sketches": 2 * len(index._values) + 4 * len(index._shingles),
            "sketch_keys": table_bytes(index.sketch_keys), "passage_index": table_bytes(index.passages)}


def store_bytes(store: EmbeddedStore) -> dict[str, int]:
    """Bytes of each part of ``store`` (the parts of the README's bytes-per-document table)."""
    entries, rows = store._entries, store._rows
    ids = sum(len(i.encode()) + 49 for i in entries.ids) + 8 * len(entries.ids)  # str objects + list slots
    verdicts = (sum(a.itemsize * len(a) for a in (*entries._columns.values(), rows.entry))
                + table_bytes(entries._id_table))
    return {
        **near_index_bytes(rows.near),
        "exact_index": table_bytes(rows._exact),
        "clusters": 4 * len(rows.roots),
        "ids": ids,
        "verdicts": verdicts,
        "bloom": bloom_bytes(store.bloom),
    }
