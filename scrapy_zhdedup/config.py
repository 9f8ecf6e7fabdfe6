"""Settings, all spelt ``ZHDEDUP_<FIELD>`` in Scrapy settings, one dataclass per concern.

Each dataclass field maps to the setting named after it and, through its metadata (help text,
flag), to a command-line option, so the fields below are the single source of truth for the
pipeline, the ``zhdedup`` CLI and ``es_plugin``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from .errors import ConfigError
from .esurl import node_urls, redact

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

PREFIX = "ZHDEDUP_"
LAYOUT, NEAR = "layout", "near"  # DedupConfig groups: the band layout; when a candidate is a near repeat
SCRAPY_ONLY = None  # the group of settings no command offers: they only mean something in a crawl
T = TypeVar("T", bound="DataclassInstance")
WordMode = Literal["auto", "words", "chars"]  # a SimHash of its own features (similarity/words.py)
FeatureMode = Literal["sketch", WordMode]  # what the SimHash is made of (similarity/fingerprinter.py)
Extractor = Literal["lxml", "trafilatura"]  # how a page's main text is found (text/clean.py)


@dataclasses.dataclass(frozen=True)
class Range:
    """The numbers a setting may take: ``low`` and ``high`` (None: unbounded), each allowed unless ``open``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        low_ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        high_ok = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return low_ok and high_ok

    def __str__(self) -> str:
        """As a user reads it: ``at least 1``, ``more than 0 and at most 1``, ``from 0 to 10``."""
        low = "" if self.low is None else f"{'more than' if self.low_open else 'at least'} {self.low:g}"
        high = "" if self.high is None else f"{'less than' if self.high_open else 'at most'} {self.high:g}"
        if low and high and not self.low_open and not self.high_open:
            return f"from {self.low:g} to {self.high:g}"
        return " and ".join(part for part in (low, high) if part)


AT_LEAST_0, AT_LEAST_1, ABOVE_0 = Range(0), Range(1), Range(0, low_open=True)
SHARE = Range(0, 1, low_open=True)  # a share or a similarity: 0 would accept anything


def option(default: Any, help: str, *, flag: str = "", secret: bool = False, group: str | None = "",
           shown: str = "", printed: Callable[[Any], str] | None = None, valid: Range | None = None) -> Any:
    """A config field with what its setting and command-line option need: help text, a flag where it
    is not ``--field-name``, ``secret`` (never show the value: not in --help, not in the dataclass repr),
    ``group`` (which commands offer it; ``None``: no command), ``shown`` (the default as documented, where
    the value is computed), ``printed`` (the value as --help and the repr may show it: a URL without its
    credentials), ``valid`` (the numbers it may take, checked when the config is made: :func:`check`).
    A ``Literal`` type gives the choices; a dict default is copied per instance."""
    metadata = {"help": help, "flag": flag, "secret": secret, "group": group, "shown": shown, "printed": printed,
                "valid": valid}
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default), repr=not secret, metadata=metadata)
    return dataclasses.field(default=default, repr=not secret, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class DedupConfig:
    """How texts are cleaned, fingerprinted and compared."""

    threshold: int = option(3, "SimHash distance (of 64 bits) within which the bands find candidates (with "
                               "--simhash-bands); every candidate is then decided on its estimated overlap",
                            group=LAYOUT, valid=Range(0, 62))
    bands: int = option(0, "blocks each fingerprint is cut into; 0 = threshold + 2", group=LAYOUT,
                        valid=Range(0, 64))
    features: FeatureMode = option("sketch", "what the SimHash is made of: sketch: the sketch's character 4-gram "
                                             "hashes (no segmentation: the fastest); words: TF-IDF jieba words; "
                                             "chars: character shingles; auto: chars below --short-text-chars, "
                                             "else words")
    short_text_chars: int = option(200, "'auto' uses character shingles below this many characters",
                                   valid=AT_LEAST_0)
    shingle_size: int = option(3, "character n-gram size for 'chars'", valid=AT_LEAST_1)
    traditional_to_simplified: bool = option(True, "convert traditional characters to simplified (OpenCC t2s) before comparing",
                                             flag="--no-t2s")
    extractor: Extractor = option("lxml", "main-text extraction from HTML (trafilatura: slower, see README)")
    max_chars: int = option(200_000, "only this many characters are fingerprinted (huge pages); exact repeats "
                                     "compare the whole text", valid=AT_LEAST_1)
    passages: bool = option(False, "find candidates through shared passages too (+1-2 points of recall on "
                                   "natural reposts, ~130 B/document and ~15 % of the speed)")
    passage_chars: int = option(20, "minimum length of a hashed sentence run", valid=AT_LEAST_1)
    simhash_bands: bool = option(False, "find candidates through the SimHash band keys too (on every benchmark "
                                        "set they found no repeat the sketch keys missed; ~30 % of the node's CPU "
                                        "per near search on Elasticsearch)", group=NEAR)
    passage_share: float = option(0.2, "share of a text's passages an earlier text must contain to be a "
                                       "candidate", group=NEAR, valid=SHARE)
    similarity: float = option(0.68, "estimated character 4-gram Jaccard at which a candidate is a near repeat "
                                     "(an edited copy, another site's template)",
                               group=NEAR, valid=SHARE)
    containment: float = option(0.85, "estimated share of the new text inside an earlier one at which it is a "
                                      "near repeat, when it is at least half as long (a cut copy, a new "
                                      "headline); a text that embeds a shorter earlier one is not its repeat",
                                group=NEAR, valid=SHARE)
    bloom_error_rate: float = option(0.001, "false-positive rate of the exact-repeat Bloom filter",
                                     valid=Range(0, 1, low_open=True, high_open=True))
    bloom_capacity: int = option(100_000, "initial Bloom filter capacity; it grows past it", valid=AT_LEAST_1)

    def __post_init__(self) -> None:
        check(self)
        if self.bands and self.bands <= self.threshold:
            raise ConfigError(f"{setting_name('bands')} must be more than the threshold, {setting_name('threshold')} "
                              f"{self.threshold}, or 0 for threshold + 2; not {self.bands}")


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """How the Scrapy pipeline reads items and what it does with duplicates."""

    enabled: bool = option(True, "False turns the pipeline off (NotConfigured)", group=SCRAPY_ONLY)
    backend: str = option("embedded", "`embedded`, `elasticsearch`, or the dotted path of a "
                                      "`scrapy_zhdedup.pipelines.backends.Backend` subclass", group=SCRAPY_ONLY)
    mode: Literal["drop", "annotate"] = option(
        "drop", "`drop`: duplicates raise DropItem (and are not written to Elasticsearch); `annotate`: all items "
                "pass, marked with the fields of `ZHDEDUP_FIELDS`", group=SCRAPY_ONLY)
    drop_log_level: LogLevel = option("DEBUG", "level at which Scrapy logs a dropped duplicate (one line, no "
                                               "item dump)", group=SCRAPY_ONLY)
    id_field: str = option("url", "item field with the document id", group=SCRAPY_ONLY)
    text_field: str = option("text", "item field with plain text", group=SCRAPY_ONLY)
    html_field: str = option("html", "item field with the page (str or bytes); used before the text field",
                             group=SCRAPY_ONLY)
    fields: Mapping[str, str] = option(
        {"status": "dedup_status", "dup_of": "dup_of", "distance": "dup_distance", "cluster": "cluster_id"},
        "item field per annotation (`annotate` mode); leave a key out to skip that annotation, add `reason` (what "
        "made a repeat: `exact`, `similar`, `contained`), `similarity` or `contained` (README, How it decides) to get "
        "them",
        group=SCRAPY_ONLY)
    store_dir: str = option("", "where the embedded store is saved and loaded", group=SCRAPY_ONLY,
                            shown="`JOBDIR/zhdedup`, else memory only")
    workers: int = option(1, "processes that clean and fingerprint items (1: a thread of the crawl's process); "
                             "items are still judged in arrival order", group=SCRAPY_ONLY, valid=AT_LEAST_1)
    rerun: Literal["new", "all"] = option(
        "new", "an item an earlier run judged, with the same id and text: `new` drops it if an earlier run "
               "delivered it (only new content flows on; one judged but never delivered, e.g. before a crash, "
               "is delivered), `all` passes it again as its stored verdict says", group=SCRAPY_ONLY)

    def __post_init__(self) -> None:
        check(self)
        unknown = set(self.fields) - {"status", "dup_of", "distance", "cluster", "similarity", "contained", "reason"}
        if unknown:
            raise ConfigError(f"ZHDEDUP_FIELDS has unknown keys {sorted(unknown)}")


CONNECTION, WRITING, SEARCH = "connection", "writing", "search"
Analysis = Literal["jieba", "smartcn", "ik"]  # how Chinese is searched (es_plugin/index/chinese.py)


@dataclasses.dataclass(frozen=True)
class EsConfig:
    """Elasticsearch connection and write behaviour."""

    es_url: str = option("http://127.0.0.1:9200", "node URL; the nodes of a cluster separated by commas, each tried "
                                                  "when another is down (http needs the port; https without one is 443)",
                         group=CONNECTION, printed=redact)
    es_index: str = option("zhdedup-docs", "index name", group=CONNECTION)
    es_user: str = option("", "user for basic authentication", group=CONNECTION)
    es_password: str = option("", "password (safer in the environment than on the command line)", secret=True,
                              group=CONNECTION)
    es_api_key: str = option("", "API key, instead of user and password", secret=True, group=CONNECTION)
    es_ca_certs: str = option("", "CA certificates for https", group=CONNECTION)
    es_timeout: float = option(10.0, "seconds per request", group=CONNECTION, valid=ABOVE_0)
    es_bulk_size: int = option(1000, "documents per bulk request (~10 MB of news: fewer segments to search)",
                               group=WRITING, valid=AT_LEAST_1)
    es_flush_interval: float = option(5.0, "seconds before a partly filled bulk is written", group=WRITING,
                                      valid=ABOVE_0)
    es_batch_window: float = option(0.05, "seconds an item may wait for others arriving meanwhile, to be looked "
                                          "up with them in one request", group=WRITING, valid=AT_LEAST_0)
    es_max_retries: int = option(5, "retries, with exponential backoff (to 4 s), of a failed request; more while "
                                    "an outage is shorter than `ZHDEDUP_ES_OUTAGE_TIMEOUT`", group=WRITING,
                                 valid=AT_LEAST_0)
    es_outage_timeout: float = option(
        300.0, "seconds work waits while Elasticsearch does not answer (a node restarting): a crawl holds its items "
               "and slows down, retrying; past them what cannot be judged or stored goes to the dead-letter file, "
               "undelivered until replayed", group=WRITING, valid=AT_LEAST_0)
    es_dead_letter: str = option("", "JSONL file for documents not judged or not stored", group=WRITING,
                                 shown="`zhdedup-dead-letter.jsonl` in JOBDIR (crawl) or beside the checkpoints "
                                       "(`es ingest`), else in `./`")
    es_text_field: str = option("text", "document field that holds the main text as the page wrote it: stored by "
                                        "the backend and `es ingest`, shown by `es search`", group=SEARCH)
    es_analysis: Analysis = option(
        "jieba", "how Chinese is searched: `jieba` segments texts and queries here into words searched with the "
                 "built-in `whitespace` analyzer (any cluster); `smartcn`/`ik` use that analysis plugin of the "
                 "cluster", group=SEARCH)

    def __post_init__(self) -> None:
        check(self)
        nodes = node_urls(self.es_url)  # a URL the client cannot use stops the command or crawl now, naming it
        in_url = any(n.user or n.password for n in nodes)
        if in_url and (self.es_user or self.es_password):
            raise ConfigError("credentials are given both in ZHDEDUP_ES_URL and in ZHDEDUP_ES_USER/ZHDEDUP_ES_PASSWORD")
        if self.es_api_key and (in_url or self.es_user or self.es_password):
            raise ConfigError("set either ZHDEDUP_ES_API_KEY or ZHDEDUP_ES_USER/ZHDEDUP_ES_PASSWORD, not both")
        if self.es_password and not self.es_user:
            raise ConfigError("ZHDEDUP_ES_PASSWORD is set but ZHDEDUP_ES_USER is empty")

    def __repr__(self) -> str:
        """Without secrets: the password and API key left out, the URL without its credentials."""
        return _printable_repr(self)


def check(config: DataclassInstance) -> None:
    """Every field of ``config`` in its range and among its choices, else a ConfigError naming the setting,
    its option and what it may be: the one place settings and options are checked, when the config is made
    (before a worker, a store or a connection exists)."""
    hints = _hints(type(config))
    for f in dataclasses.fields(config):
        value, valid = getattr(config, f.name), f.metadata.get("valid")
        if get_origin(hints[f.name]) is Literal and value not in get_args(hints[f.name]):
            choices = [repr(c) for c in get_args(hints[f.name])]
            raise ConfigError(f"{setting_name(f.name)} must be {', '.join(choices[:-1])} or {choices[-1]}, not {value!r}")
        if valid is not None and value not in valid:
            raise ConfigError(f"{setting_name(f.name)} must be {valid}, not {value:g}")


@functools.cache
def _hints(cls: type[Any]) -> dict[str, Any]:
    return get_type_hints(cls)


def setting_name(field: str) -> str:
    """A setting as the user may have given it: ``ZHDEDUP_SIMILARITY (--similarity)``."""
    for cls in (DedupConfig, PipelineConfig, EsConfig):
        found = {f.name: f for f in dataclasses.fields(cls)}.get(field)
        if found is not None:
            meta = found.metadata
            flag = meta["flag"] or "--" + field.removeprefix("es_").replace("_", "-")
            return PREFIX + field.upper() + ("" if meta["group"] is SCRAPY_ONLY else f" ({flag})")
    return PREFIX + field.upper()


def _printable_repr(config: DataclassInstance) -> str:
    shown = []
    for f in dataclasses.fields(config):
        if f.repr:
            value, printed = getattr(config, f.name), f.metadata.get("printed")
            shown.append(f"{f.name}={printed(value) if printed else value!r}")
    return f"{type(config).__name__}({', '.join(shown)})"


def from_settings(cls: type[T], settings: Mapping[str, Any] | Any) -> T:
    """Build ``cls`` from ``ZHDEDUP_*`` settings (a Scrapy ``Settings`` or a plain mapping)."""
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        name = PREFIX + f.name.upper()
        raw = settings.get(name)
        if raw is None:
            continue
        values[f.name] = _convert(name, raw, hints[f.name])
    return _build(cls, values, "ZHDEDUP_ settings")


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
        if hint in (int, float, str):
            return hint(raw)
        if get_origin(hint) is Literal:
            return raw  # its choices are checked with the other settings' ranges (check)
        if isinstance(raw, str):  # a Mapping given as JSON (environment, command line)
            return json.loads(raw)
        return dict(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}={raw!r} is not a valid {getattr(hint, '__name__', hint)}") from exc


def add_options(parser: argparse.ArgumentParser, cls: type[Any], title: str, *, groups: Collection[str] | None = None,
                skip: Collection[str] = (), environment: bool = False) -> None:
    """One option per field of ``cls`` in ``groups`` (metadata ``group``; None: every field a command
    can use), named ``--field-name`` (without
    an ``es_`` prefix) unless the field gives its flag; bool fields that default to True become
    ``--no-…`` switches.  With ``environment`` an option's default is ``$ZHDEDUP_<FIELD>`` when set."""
    hints = get_type_hints(cls)
    g = parser.add_argument_group(title)
    for f in dataclasses.fields(cls):
        meta = f.metadata
        group = meta.get("group", "")
        if group is SCRAPY_ONLY or (groups is not None and group not in groups) or f.name in skip:
            continue
        env = PREFIX + f.name.upper()
        default = _convert(env, os.environ[env], hints[f.name]) if environment and env in os.environ else f.default
        flag = meta["flag"] or "--" + f.name.removeprefix("es_").replace("_", "-")
        # Markdown quotes are for the README's settings table; a literal % would be an argparse format
        text = meta["help"].replace("`", "").replace("%", "%%")
        if hints[f.name] is bool:  # the help says what the setting does; the switch turns it off or on
            g.add_argument(flag, dest=f.name, action="store_false" if f.default else "store_true",
                           default=default, help=f"turn off: {text}" if f.default else text)
            continue
        where = f"; ${env}" if environment else ""
        shown = " (default %(default)s)" if f.default != "" and not meta["secret"] else ""
        if meta["printed"] and shown:
            shown = f" (default {meta['printed'](default)})".replace("%", "%%")
        if meta["shown"]:
            shown = f" (default {meta['shown'].replace('`', '')})"
        choices = get_args(hints[f.name]) if get_origin(hints[f.name]) is Literal else None
        g.add_argument(flag, dest=f.name, type=str if choices else hints[f.name], default=default, choices=choices,
                       metavar=None if choices else flag[2:].upper().replace("-", "_"),
                       help=f"{text}{where}{shown}")


def from_args(cls: type[T], args: argparse.Namespace, **values: Any) -> T:
    """``cls`` from the options :func:`add_options` made (fields without an option keep their default)."""
    for f in dataclasses.fields(cls):
        if f.name not in values and hasattr(args, f.name):
            values[f.name] = getattr(args, f.name)
    return _build(cls, values, "options")


def _build(cls: type[T], values: dict[str, Any], source: str) -> T:
    """``cls(**values)``; a value it refuses is a ConfigError naming ``source``."""
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid {source}: {exc}") from exc


def settings_table() -> str:
    """Every ``ZHDEDUP_*`` setting as a Markdown table, from the dataclasses (README.md holds a copy,
    which a test compares with this, so the documentation cannot fall behind the code)."""
    rows = ["| setting | default | meaning |", "|---|---|---|"]
    for cls in (PipelineConfig, DedupConfig, EsConfig):
        for f in dataclasses.fields(cls):
            meta = f.metadata
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            shown = meta["shown"] or ("–" if default == "" else f"`{default!r}`")
            flag = meta["flag"] or "--" + f.name.removeprefix("es_").replace("_", "-")
            cli = f" (`{flag}`)" if meta["group"] is not None else ""
            rows.append(f"| `{PREFIX}{f.name.upper()}`{cli} | {shown} | {meta['help']} |")
    return "\n".join(rows) + "\n"
