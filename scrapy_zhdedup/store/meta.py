"""``DIR/store.json``: the store's format version and the fingerprint settings it was built with.

Keys, hashes and fingerprints computed under other settings never match the stored ones, so a
store opened with different settings would silently find fewer repeats; refusing is the only
safe answer.  Recorded: every setting that changes what is computed per document, and the
sketch's version.  Not recorded: the band layout (rebuilt on load, so threshold and bands may
change) and the query-time rule (passage_share, similarity, containment).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ..config import DedupConfig
from ..errors import StoreError
from ..similarity.sketch import VERSION as SKETCH_VERSION
from .files import atomic_write

META_FILE = "store.json"
FORMAT = 4  # 4: directed verdicts (contained share, reason), 128-bin sketches; 3: MinHash sketches; 2: settings recorded
_OLD_FORMATS: dict[Any, str] = {2: "no MinHash sketches",
                3: "64-bin sketches and verdicts that did not say how much of a text is inside the earlier one"}
FINGERPRINT_SETTINGS = ("features", "short_text_chars", "shingle_size", "traditional_to_simplified", "extractor",
                        "max_chars", "passages", "passage_chars")


def fingerprint_settings(config: DedupConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    """The recorded settings of ``config`` (a DedupConfig or a mapping of its fields; None = defaults)."""
    given = {name: getattr(config, name) for name in FINGERPRINT_SETTINGS} if isinstance(config, DedupConfig) \
        else dict(config or {})
    defaults = DedupConfig()
    return {**{name: given.get(name, getattr(defaults, name)) for name in FINGERPRINT_SETTINGS},
            "sketch": SKETCH_VERSION}


def check_or_record(directory: Path, settings: dict[str, Any]) -> None:
    """Record ``settings`` in a new store, or refuse an existing store built with other settings."""
    path = directory / META_FILE
    if not path.exists():
        def write(fh: BinaryIO) -> None:
            fh.write(json.dumps({"format": FORMAT, "fingerprint": settings}, indent=1).encode())

        atomic_write(path, write)
        return
    try:
        meta = json.loads(path.read_bytes())
        if not isinstance(meta, dict) or not isinstance(meta.get("fingerprint"), dict):
            raise TypeError("not a JSON object with a 'fingerprint' object")
    except (OSError, ValueError, TypeError) as exc:
        raise StoreError(path, f"unreadable store metadata ({exc})") from exc
    if meta.get("format") != FORMAT:
        why = _OLD_FORMATS.get(meta.get("format"), "not supported")
        raise StoreError(path, f"store format {meta.get('format')!r} ({why}; this version reads format {FORMAT})",
                         hint="Rebuild it: scan the same input again into a new store directory.")
    stored = meta["fingerprint"]
    differing = [f"{name}: store {stored.get(name)!r}, now {settings[name]!r}"
                 for name in settings if stored.get(name) != settings[name]]
    if differing:
        raise StoreError(
            directory, "built with other fingerprint settings (" + "; ".join(differing) + ")",
            hint="Run with the store's settings, or point ZHDEDUP_STORE_DIR / --store at a new directory.")
