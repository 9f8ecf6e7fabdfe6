"""``index.npz``: the embedded store's snapshot, numpy arrays read without pickle, replaced atomically.

Its ``meta`` array is JSON (format, counts, band layout, the Bloom filter's parameters); the Bloom
filter is inside so it always matches the index.  Reading checks that every array is there and the
format is this version's, then that the arrays agree with each other (:func:`checked`).
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..errors import StoreError, StoreFailedError
from ..files.atomic import atomic_write
from ..index.bloom import ExactFilter
from ..memory.entries import ARRAYS as ENTRY_ARRAYS
from .log import LOG_FILE
from .meta import FORMAT

INDEX_FILE = "index.npz"
_BLOOM_SAMPLE = 1000  # stored texts checked against the loaded Bloom filter (all of them would cost seconds at 1M)


def write_snapshot(path: Path, meta: dict[str, Any], arrays: dict[str, Any]) -> None:
    """Write ``arrays`` (views of the live store: they are cleared here, even if the write fails)."""
    everything = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays}

    def write(fh: BinaryIO) -> None:
        np.savez(fh, **everything)

    try:
        atomic_write(path, write)
    except BaseException as exc:
        traceback.clear_frames(exc.__traceback__)  # the writer's frames hold the views too
        if isinstance(exc, OSError):
            raise StoreFailedError(
                f"{path}: cannot write the snapshot ({exc.strerror or exc}); nothing is "
                f"lost, {LOG_FILE} keeps every document since the last snapshot. Free space, then run again "
                f"with the same store") from exc
        raise
    finally:
        arrays.clear()
        everything.clear()


def read_snapshot(path: Path, names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The snapshot's metadata and its arrays ``names``; a StoreError names what is wrong with the file."""
    import zipfile  # here, as np.load imports it: a run that reads no store never does (~4 ms)

    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise StoreError(path, "not a scrapy-zhdedup index (a single numpy array, not an .npz archive)")
        with loaded as npz:
            missing = [name for name in ("meta", *names) if name not in npz.files]
            if missing:
                raise StoreError(path, f"not a scrapy-zhdedup index (missing {', '.join(missing)})")
            data = {name: npz[name] for name in ("meta", *names)}
    except StoreError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as exc:
        raise StoreError(path, f"unreadable index file ({type(exc).__name__}: {exc})") from exc
    try:
        meta = json.loads(data.pop("meta").tobytes())
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (TypeError, ValueError) as exc:
        raise StoreError(path, f"damaged index metadata ({exc})") from exc
    if meta.get("format") != FORMAT:
        raise StoreError(path, f"index format {meta.get('format')!r} is not supported (expected {FORMAT})")
    return meta, data


def checked(path: Path, meta: dict[str, Any], data: Mapping[str, np.ndarray]
            ) -> tuple[list[str], ExactFilter, np.ndarray, np.ndarray]:
    """What a store needs to rebuild itself from the arrays, once they agree with each other and with
    ``meta``: the ids, the Bloom filter, the entry of each row and the content hashes (16 bytes an
    entry).  A truncated or edited file is a StoreError here, not a wrong answer later."""
    try:
        rows, entries = int(meta["rows"]), int(meta["entries"])
        ids = data["ids"].tobytes().decode("utf-8").split("\x00") if entries else []
        bloom = ExactFilter.from_bytes(data["bloom"].tobytes(), **meta["bloom"])
    except (TypeError, ValueError, KeyError) as exc:
        raise StoreError(path, f"damaged index metadata, ids or Bloom filter ({exc})") from exc
    fps, roots = data["fingerprints"], data["roots"]
    e_hashes, e_rows, e_match = data["entry_hashes"], data["entry_rows"].astype(np.int32), data["entry_match"]
    stored = np.flatnonzero(e_rows >= 0)
    if (not (len(fps) == len(roots) == rows == len(stored))
            or any(len(data[name]) != entries for name in ENTRY_ARRAYS if name != "entry_hashes")
            or len(ids) != entries or len(e_hashes) != 16 * entries or (rows and roots.max() >= rows)
            or (entries and e_match.max() >= rows) or not np.array_equal(e_rows[stored], np.arange(rows))):
        raise StoreError(path, "inconsistent index arrays (truncated or edited file)")
    hashes = e_hashes.reshape(-1, 16)
    sample = stored[np.linspace(0, rows - 1, min(rows, _BLOOM_SAMPLE)).astype(np.int64)] if rows else stored
    if not all(hashes[entry].tobytes().hex() in bloom for entry in sample.tolist()):
        raise StoreError(path, "the Bloom filter does not hold the stored texts (edited or mixed-up file)")
    return ids, bloom, stored, hashes
