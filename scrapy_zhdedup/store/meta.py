"""``DIR/store.json``: the store's format version and the fingerprint settings it was built with
(fingerprint_settings.py says which, and why a store built with others is refused).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import StoreError
from ..files.atomic import atomic_write

META_FILE = "store.json"
FORMAT = 4  # 4: directed verdicts (contained share, reason), 128-bin sketches; 3: MinHash sketches; 2: settings recorded
_OLD_FORMATS: dict[Any, str] = {2: "no MinHash sketches",
                3: "64-bin sketches and verdicts that did not say how much of a text is inside the earlier one"}
def check_or_record(directory: Path, settings: dict[str, Any]) -> None:
    """Record ``settings`` in a new store, or refuse an existing store built with other settings."""
    if (directory / META_FILE).exists():
        check(directory, settings)
        return

    def write(fh: BinaryIO) -> None:
        fh.write(json.dumps({"format": FORMAT, "fingerprint": settings}, indent=1).encode())

    atomic_write(directory / META_FILE, write)


def check(directory: Path, settings: dict[str, Any]) -> None:
    """Refuse a store of another format, or built with other settings (an unreadable ``store.json`` too)."""
    path = directory / META_FILE
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
        rebuild = stored.get("sketch") != settings.get("sketch")  # made by another version: no setting brings it back
        raise StoreError(
            directory, "built with other fingerprint settings (" + "; ".join(differing) + ")",
            hint="Rebuild it: scan the same input again into a new store directory." if rebuild else
            "Run with the store's settings, or point ZHDEDUP_STORE_DIR / --store at a new directory.")
