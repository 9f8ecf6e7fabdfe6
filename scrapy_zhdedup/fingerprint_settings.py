"""The fingerprint settings: every setting that changes what is computed per document, and the sketch's version.

Keys, hashes and fingerprints computed under other settings never match the stored ones, so a
store (``store.json``) or an index (its template's ``_meta``) built with other settings is refused
rather than silently finding fewer repeats.  Not recorded: the band layout (rebuilt on load, so
threshold and bands may change) and the query-time rule (passage_share, similarity, containment).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import DedupConfig
from .similarity.sketch import VERSION as SKETCH_VERSION

FINGERPRINT_SETTINGS = ("features", "short_text_chars", "shingle_size", "traditional_to_simplified", "extractor",
                        "max_chars", "passages", "passage_chars")


def fingerprint_settings(config: DedupConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    """The recorded settings of ``config`` (a DedupConfig or a mapping of its fields; None = defaults)."""
    given = {name: getattr(config, name) for name in FINGERPRINT_SETTINGS} if isinstance(config, DedupConfig) \
        else dict(config or {})
    defaults = DedupConfig()
    return {**{name: given.get(name, getattr(defaults, name)) for name in FINGERPRINT_SETTINGS},
            "sketch": SKETCH_VERSION}
