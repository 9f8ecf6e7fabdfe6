"""Index template install, layout checks and status, against the real node."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from elasticsearch import Elasticsearch

from es_plugin.errors import EsIndexError
from es_plugin.index.document import NAMES, Stored, dedup_properties
from es_plugin.index.template import (
    TEMPLATE_VERSION,
    ensure_layout,
    install,
    read_meta,
    status,
    template_body,
    template_name,
)
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.errors import LayoutMismatchError
from scrapy_zhdedup.fingerprint_settings import fingerprint_settings
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.model import Verdict
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter

pytestmark = pytest.mark.es

LAYOUT = BandLayout(k=3)


def test_install_is_idempotent_and_versioned(es_client: Elasticsearch, index: str) -> None:
    first = install(es_client, index, LAYOUT, {"title": {"type": "text"}})
    assert (first["template_action"], first["index_action"]) == ("created", "created")
    again = install(es_client, index, LAYOUT)  # no user mapping given: the installed one is kept
    assert (again["template_action"], again["index_action"]) == ("unchanged", "exists")

    template = es_client.indices.get_index_template(name=template_name(index))["index_templates"][0]["index_template"]
    assert template["version"] == TEMPLATE_VERSION
    assert template["index_patterns"] == [index]
    mapping = es_client.indices.get_mapping(index=index)[index]["mappings"]
    assert mapping["properties"]["title"] == {"type": "text"}
    assert set(mapping["properties"]["zhdedup"]["properties"]) >= {"fp", "hash", "cluster", *LAYOUT.field_names}
    assert read_meta(es_client, index) == {"template_version": TEMPLATE_VERSION, "layout": LAYOUT.to_dict(),
                                           "package_version": "0.1.0"}

    kept = install(es_client, index, LAYOUT, {"title": {"type": "text"}, "site": {"type": "keyword"}}, replace=False)
    assert kept["template_action"] == "kept"
    changed = install(es_client, index, LAYOUT, {"title": {"type": "text"}, "site": {"type": "keyword"}})
    assert (changed["template_action"], changed["index_action"]) == ("updated", "mapping updated")
    assert es_client.indices.get_mapping(index=index)[index]["mappings"]["properties"]["site"] == {"type": "keyword"}

    info = status(es_client, index, LAYOUT)
    assert info["matches"] and info["problem"] is None
    assert (info["template_version"], info["package_template_version"]) == (TEMPLATE_VERSION, TEMPLATE_VERSION)
    assert (info["docs"], info["clusters"]) == (0, 0)


def test_layout_mismatch_names_both_layouts(es_client: Elasticsearch, index: str) -> None:
    install(es_client, index, LAYOUT)
    other = BandLayout(k=4, blocks=5)
    with pytest.raises(LayoutMismatchError) as err:
        ensure_layout(es_client, index, other)
    message = str(err.value)
    assert "threshold (k) 3, bands (blocks) 5" in message and "threshold (k) 4, bands (blocks) 5" in message
    assert "ZHDEDUP_THRESHOLD=3" in message and "ZHDEDUP_ES_INDEX" in message
    with pytest.raises(LayoutMismatchError):  # refused before the template is touched
        install(es_client, index, other)
    assert read_meta(es_client, index)["layout"] == LAYOUT.to_dict()
    info = status(es_client, index, other)
    assert not info["matches"] and "silently miss" in info["problem"]


def test_other_fingerprint_settings_are_refused_naming_each(es_client: Elasticsearch, index: str) -> None:
    built = fingerprint_settings(DedupConfig(features="words", passage_chars=30))
    install(es_client, index, LAYOUT, fingerprint=built)
    assert read_meta(es_client, index)["fingerprint"] == built
    install(es_client, index, LAYOUT, fingerprint=built)  # the same settings: fine
    with pytest.raises(LayoutMismatchError) as err:
        install(es_client, index, LAYOUT, fingerprint=fingerprint_settings(DedupConfig(traditional_to_simplified=False)))
    message = str(err.value)
    for difference in ("features: index 'words', this client 'sketch'", "passage_chars: index 30, this client 20",
                       "traditional_to_simplified: index True, this client False"):
        assert difference in message
    assert "shingle_size" not in message  # only what differs is named


def test_an_index_of_an_older_sketch_is_refused_naming_the_reingest(es_client: Elasticsearch, index: str) -> None:
    """Issue 40: an index written before holds SimHashes of words; no setting brings them back."""
    install(es_client, index, LAYOUT, fingerprint={**fingerprint_settings(None), "features": "auto",
                                                   "sketch": "oph128x16-char4-bands16x2of64"})
    with pytest.raises(LayoutMismatchError) as err:
        install(es_client, index, LAYOUT, fingerprint=fingerprint_settings(None))
    message = str(err.value)
    assert "sketch: index 'oph128x16-char4-bands16x2of64', this client 'oph128x16-char4-bands16x2of64-simhash2'" \
        in message and "Ingest again into a new index" in message and "\n" not in message


def test_conflicting_zhdedup_mapping_is_a_clear_error(es_client: Elasticsearch, index: str) -> None:
    es_client.indices.create(index=index, mappings={"properties": {"zhdedup": {"type": "text"}}})
    with pytest.raises(EsIndexError, match=r"field 'zhdedup' is mapped as 'text'"):
        ensure_layout(es_client, index, LAYOUT)
    with pytest.raises(EsIndexError, match="conflicts"):
        install(es_client, index, LAYOUT)
    assert not es_client.indices.exists_index_template(name=template_name(index))


def test_index_made_by_hand_is_refused(es_client: Elasticsearch, index: str) -> None:
    es_client.indices.create(index=index, mappings={"properties": {"title": {"type": "text"}}})
    with pytest.raises(EsIndexError, match="not created from the scrapy-zhdedup template"):
        ensure_layout(es_client, index, LAYOUT)
    # with the meta but band fields mapped wrongly (e.g. by a dynamic write before the template)
    body = template_body(index, LAYOUT)["template"]["mappings"]
    props = dedup_properties(LAYOUT)
    props["zhdedup"]["properties"]["b0"] = {"type": "text"}
    es_client.indices.create(index=f"{index}-b", mappings={"_meta": body["_meta"], "properties": props})
    with pytest.raises(EsIndexError, match=r"zhdedup\.b0 is text \(needs keyword\)"):
        ensure_layout(es_client, f"{index}-b", LAYOUT)


def test_missing_index(es_client: Elasticsearch, index: str) -> None:
    with pytest.raises(EsIndexError, match="does not exist"):
        ensure_layout(es_client, index, LAYOUT)
    assert read_meta(es_client, index) is None
    info = status(es_client, index, LAYOUT)
    assert not info["exists"] and not info["matches"]


def test_zhdedup_fields() -> None:
    seen = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    features = Fingerprinter(DedupConfig(passages=True)).features("国务院常务会议部署近期重点工作。" * 5)
    unique = Verdict("u1", "unique", None, None, "u1", "ab" * 16, features.fingerprint)
    source = Stored.of(unique, seen, features=features, words="国务院 会议").to_source(LAYOUT)
    fields = source["zhdedup"]
    assert set(fields) == NAMES | set(LAYOUT.field_names) == set(dedup_properties(LAYOUT)["zhdedup"]["properties"])
    assert fields["fp"] == format(features.fingerprint, "016x") and fields["seen_at"] == "2026-01-02T03:04:05.678+00:00"
    assert {name: fields[name] for name in LAYOUT.field_names} == LAYOUT.terms(features.fingerprint)
    assert (fields["status"], fields["cluster"], fields["dup_of"]) == ("unique", "u1", None)
    assert len(fields["mh"]) == len(features.sketch_keys) and fields["passages"]
    read = Stored.from_source(source)
    assert read is not None and read.verdict() == unique
    back = read.features()  # what dedup-index and reconcile read back
    assert (back.fingerprint, back.passages, back.sketch_keys) == (
        features.fingerprint, features.passages, features.sketch_keys)
    assert back.sketch.to_bytes() == features.sketch.to_bytes()
    assert read.to_source(LAYOUT) == source  # what is read back writes the same object
    exact = Verdict("u2", "exact", "u1", 0, "u1", "ab" * 16, None, similarity=1.0, contained=1.0, reason="exact")
    fields = Stored.of(exact, seen).to_source(LAYOUT)["zhdedup"]
    assert not {"fp", "b0", "mh", "sketch"} & set(fields) and fields["dup_of"] == "u1"
    assert Stored.from_source({"zhdedup": fields}).verdict() == exact  # type: ignore[union-attr]
