"""``zhdedup report``: what was folded and why, gathered from where the verdicts and the texts are.

The verdicts and the texts come from different places, by source:

* ``zhdedup scan``: its output (one verdict per line) and its input (the texts);
* an embedded store (a crawl's ``JOBDIR/zhdedup``, ``scan --store``): the store keeps every id's verdict
  but no text, so the texts come from the crawl's exported items (``scrapy crawl … -O items.jsonl``,
  JSON lines or a JSON array), read by ``--id-field``/``--text-field``/``--html-field``.  In drop mode
  the dropped duplicates are not exported: they are listed without their text;
* an Elasticsearch index: both are stored there (es_plugin/commands/report.py).

Texts are kept as the pages wrote them (the main text of a page); the page compares them as the engine
does (page.py).  Only the clusters shown need their texts, so an input is read once and only those are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import DedupConfig
from ..errors import EmptyTextError, InputError, InvalidDocumentError
from ..files.inputs import STDIN, input_name, open_input, read_pages
from ..text.clean import TextCleaner


@dataclass(frozen=True)
class Doc:
    """One judged document as the report shows it (a verdict, without what only the engine needs)."""

    doc_id: str
    status: str
    dup_of: str | None = None
    similarity: float | None = None
    distance: int | None = None
    reason: str | None = None
    contained: float | None = None
    cluster: str | None = None  # None: found by following dup_of

    @classmethod
    def of(cls, verdict: Any) -> Doc:
        """From a Verdict, or a mapping of its fields (a scan line, a stored ``zhdedup`` object)."""
        get = verdict.get if isinstance(verdict, dict) else lambda name: getattr(verdict, name, None)
        return cls(str(get("doc_id") or get("id")), str(get("status")), get("dup_of"), get("similarity"),
                   get("distance"), get("reason"), get("contained"), get("cluster"))


@dataclass(frozen=True)
class Fields:
    """Where an input record keeps its id and its text or page."""

    id: str = "id"
    text: str = "text"
    html: str = "html"


@dataclass
class Findings:
    """What a report is made of: the verdicts in judging order, the texts it shows, and notes for the reader."""

    source: str
    docs: list[Doc]
    texts: dict[str, str] = field(default_factory=dict)  # main text as written
    notes: list[str] = field(default_factory=list)
    traditional_to_simplified: bool = True  # as the texts were compared


@dataclass(frozen=True)
class Cluster:
    """A cluster's documents (two or more), its original first when the verdicts hold it."""

    root: str  # the original's id (the cluster id)
    docs: list[Doc]

    @property
    def original(self) -> Doc | None:
        return self.docs[0] if self.docs[0].doc_id == self.root else None


def clusters(docs: Iterable[Doc]) -> list[Cluster]:
    """Clusters of two or more documents, largest first (then the first judged first)."""
    by_id = {d.doc_id: d for d in docs}
    groups: dict[str, list[Doc]] = {}
    for doc in by_id.values():
        groups.setdefault(_root(doc, by_id), []).append(doc)
    found = [Cluster(root, _led_by(root, g)) for root, g in groups.items() if len(g) > 1 or g[0].doc_id != root]
    return sorted(found, key=lambda c: len(c.docs), reverse=True)  # stable: equal sizes keep the judging order


def _led_by(root: str, docs: list[Doc]) -> list[Doc]:
    return sorted(docs, key=lambda d: d.doc_id != root)


def _root(doc: Doc, by_id: dict[str, Doc]) -> str:
    """The cluster a document belongs to: its own field, else the end of its ``dup_of`` chain."""
    if doc.cluster:
        return doc.cluster
    seen: set[str] = set()
    while doc.dup_of and doc.doc_id not in seen:
        seen.add(doc.doc_id)
        if doc.dup_of not in by_id:
            return doc.dup_of  # judged before these verdicts (a store's earlier run)
        doc = by_id[doc.dup_of]
    return doc.doc_id


def shown_ids(groups: list[Cluster], max_clusters: int) -> set[str]:
    return {d.doc_id for group in groups[:max_clusters] for d in group.docs}


def from_scan(verdicts: Path, source: str, fields: Fields = Fields(), *, max_clusters: int,
              config: DedupConfig | None = None) -> Findings:
    """``zhdedup scan``'s verdicts and its input."""
    docs = []
    with open_input(verdicts) as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    docs.append(Doc.of(json.loads(line)))
                except (ValueError, TypeError, AttributeError) as exc:
                    raise InputError(f"{verdicts}:{number}: not a zhdedup scan verdict ({exc})") from None
    findings = Findings(f"zhdedup scan: {verdicts} (texts: {input_name(source)})", docs)
    return with_texts(findings, source, fields, max_clusters, config, SCAN_INPUT)


def from_store(directory: Path, items: str | None, fields: Fields, *, max_clusters: int) -> Findings:
    """An embedded store's verdicts (as it holds them now: a crawl may be writing on), and the texts of a
    crawl's exported items (if given)."""
    from ..fingerprint_settings import FINGERPRINT_SETTINGS
    from ..index.nearindex import CandidateKeys
    from ..store.embedded import EmbeddedStore
    from ..store.meta import META_FILE

    if not (directory / META_FILE).is_file():
        raise InputError(f"{directory}: not a scrapy-zhdedup store (no {META_FILE})")
    try:  # opened with the settings it was built with (a damaged file: the store's own error, at open)
        recorded = json.loads((directory / META_FILE).read_text(encoding="utf-8"))["fingerprint"]
        config = DedupConfig(**{k: recorded[k] for k in FINGERPRINT_SETTINGS if k in recorded})
    except (OSError, ValueError, KeyError, TypeError):
        config = DedupConfig()
    store = EmbeddedStore.view(CandidateKeys.from_config(config), directory, config=config)
    docs = [Doc.of(v) for v in store.verdicts()]
    findings = Findings(f"embedded store {directory}" + (f" (texts: {input_name(items)})" if items else ""), docs)
    if items is None:
        findings.notes.append("No --input: the store keeps ids and verdicts, not texts; give the crawl's exported "
                              "items (scrapy crawl … -O items.jsonl) to see them.")
        return findings
    return with_texts(findings, items, fields, max_clusters, config, CRAWL_ITEMS)


@dataclass(frozen=True)
class TextSource:
    """What an ``--input`` should be, said when it is not (no id matched) or lacks texts."""

    what: str  # "the scan's input"
    missing: str  # why a document shown can lack its text there


SCAN_INPUT = TextSource("the scan's input", "was the scan's input larger?")
CRAWL_ITEMS = TextSource("the crawl's exported items", "a drop-mode crawl does not export the duplicates it "
                                                        "drops; ZHDEDUP_MODE = \"annotate\" keeps them")


def with_texts(findings: Findings, source: str, fields: Fields, max_clusters: int,
               config: DedupConfig | None, expected: TextSource) -> Findings:
    """Read ``source`` for the texts of the documents the report shows; an InputError if no record of it
    has the id of a judged document (the wrong file, or the wrong ``--id-field``)."""
    config = config or DedupConfig()
    findings.traditional_to_simplified = config.traditional_to_simplified
    cleaner = TextCleaner(extractor=config.extractor, traditional_to_simplified=config.traditional_to_simplified)
    judged = {d.doc_id for d in findings.docs}
    wanted = shown_ids(clusters(findings.docs), max_clusters)
    matched = 0
    for record in _records(source):
        doc_id = record.get(fields.id)
        if doc_id is None or str(doc_id) not in judged:
            continue
        matched += 1
        if str(doc_id) not in wanted:
            continue
        text, html = record.get(fields.text), record.get(fields.html)
        try:
            findings.texts[str(doc_id)] = cleaner.cleaned(text=text if isinstance(text, str) else None,
                                                          html=html if isinstance(html, str) else None).written
        except (EmptyTextError, InvalidDocumentError):
            continue
    if judged and not matched:
        raise InputError(f"{input_name(source)}: no record has the {fields.id!r} of a judged document: give "
                         f"{expected.what} as --input (--id-field names the field that holds the id)")
    missing = len(wanted - findings.texts.keys())
    if missing:
        findings.notes.append(f"{missing} documents shown have no text in {input_name(source)} ({expected.missing}).")
    return findings


def _records(source: str) -> Iterator[dict[str, Any]]:
    """JSON objects of a JSONL file (``.gz``, ``-``), of a JSON array (Scrapy's ``-O items.json``), or the
    pages of a directory."""
    if source != STDIN and Path(source).is_dir():
        for page in read_pages(Path(source)):
            yield {"id": page.doc_id, "html": page.html}
        return
    with open_input(source) as fh:
        first = fh.read(1)
        while first.isspace():
            first = fh.read(1)
        if first == "[":
            yield from (r for r in json.loads(first + fh.read()) if isinstance(r, dict))
            return
        for line in _joined(first, fh):
            try:
                record = json.loads(line)
            except ValueError:
                continue  # scan reported it; a report shows what can be shown
            if isinstance(record, dict):
                yield record


def _joined(first: str, lines: Iterable[str]) -> Iterator[str]:
    """The lines of a file whose first character was read already."""
    it = iter(lines)
    yield first + next(it, "")
    yield from it
