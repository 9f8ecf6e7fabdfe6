"""Settings, all spelt ``ZHDEDUP_<FIELD>`` in Scrapy settings, one dataclass per concern.

Each dataclass field maps to the setting named after it, so the defaults below are the single
source of truth for the pipeline, the CLI and ``es_plugin``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from .bands import BandLayout

PREFIX = "ZHDEDUP_"
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class DedupConfig:
    """How texts are cleaned, fingerprinted and compared."""

    threshold: int = 3  # max Hamming distance (64 bits) for a near-duplicate
    bands: int = 0  # blocks the fingerprint is cut into; 0 = threshold + 2
    features: str = "auto"  # "auto" | "words" (TF-IDF jieba words) | "chars" (character shingles)
    short_text_chars: int = 200  # "auto" uses character shingles below this many characters
    shingle_size: int = 3  # character n-gram size for "chars"
    traditional_to_simplified: bool = True  # OpenCC t2s before hashing
    extractor: str = "lxml"  # "lxml" (fast) | "trafilatura" (slower, see README)
    max_chars: int = 200_000  # longer texts are cut before fingerprinting (huge pages)
    passages: bool = True  # also find near repeats through shared passages (see passages.py)
    passage_chars: int = 20  # minimum length of a hashed sentence run
    passage_share: float = 0.2  # share of a text's passages an earlier text must contain
    passage_threshold: int = 12  # max Hamming distance for a passage-found candidate
    bloom_error_rate: float = 0.001
    bloom_capacity: int = 100_000  # initial capacity; the filter grows past it

    @property
    def layout(self) -> BandLayout:
        return BandLayout(k=self.threshold, blocks=self.bands)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """How the Scrapy pipeline reads items and what it does with duplicates."""

    backend: str = "embedded"  # "embedded" | "elasticsearch" | dotted path of a backend class
    mode: str = "drop"  # "drop" (DropItem) | "annotate" (keep, set the fields below)
    id_field: str = "url"
    text_field: str = "text"
    html_field: str = "html"
    fields: Mapping[str, str] = dataclasses.field(
        default_factory=lambda: {"status": "dedup_status", "dup_of": "dup_of",
                                 "distance": "dup_distance", "cluster": "cluster_id"}
    )  # item field per annotation; drop a key to leave that annotation out
    store_dir: str = ""  # where the embedded store is saved; default JOBDIR/zhdedup, else memory only

    def __post_init__(self) -> None:
        if self.mode not in ("drop", "annotate"):
            raise ValueError(f"ZHDEDUP_MODE must be 'drop' or 'annotate', not {self.mode!r}")
        unknown = set(self.fields) - {"status", "dup_of", "distance", "cluster"}
        if unknown:
            raise ValueError(f"ZHDEDUP_FIELDS has unknown keys {sorted(unknown)}")


@dataclasses.dataclass(frozen=True)
class EsConfig:
    """Elasticsearch connection and write behaviour."""

    es_url: str = "http://127.0.0.1:9200"
    es_index: str = "zhdedup-docs"
    es_user: str = ""
    es_password: str = ""
    es_api_key: str = ""
    es_ca_certs: str = ""
    es_timeout: float = 10.0  # seconds per request
    es_bulk_size: int = 500  # documents per bulk request
    es_flush_interval: float = 5.0  # seconds between flushes of a partial bulk
    es_max_retries: int = 5  # retries with exponential backoff before dead-lettering
    es_dead_letter: str = ""  # JSONL of documents Elasticsearch rejected for good; default ./zhdedup-dead-letter.jsonl


def from_settings(cls: type[T], settings: Mapping[str, Any] | Any) -> T:
    """Build ``cls`` from ``ZHDEDUP_*`` settings (a Scrapy ``Settings`` or a plain mapping)."""
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = PREFIX + f.name.upper()
        raw = settings.get(name)
        if raw is None:
            continue
        values[f.name] = _convert(name, raw, hints[f.name])
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid ZHDEDUP_ settings: {exc}") from exc


def _convert(name: str, raw: Any, hint: Any) -> Any:
    try:
        if hint is bool:
            if isinstance(raw, str):
                if raw.lower() in ("1", "true", "yes", "on"):
                    return True
                if raw.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(raw)
            return bool(raw)
        if hint is int:
            return int(raw)
        if hint is float:
            return float(raw)
        if hint is str:
            return str(raw) if not isinstance(raw, Path) else str(raw)
        if isinstance(raw, str):  # Mapping given on the command line as JSON
            return json.loads(raw)
        return dict(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}={raw!r} is not a valid {getattr(hint, '__name__', hint)}") from exc
