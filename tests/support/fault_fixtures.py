"""The fault suites' shared module fixtures on Elasticsearch: the corpus served as a site, a node of our own
that the tests may kill, and the verdicts of an uninterrupted ingest to compare with (test_es_faults.py,
test_es_outage.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from elasticsearch import Elasticsearch

from es_plugin.index.template import registry_name
from tests.support.es_runs import Verdicts, corpus, ids_of, ingest_args, stored, zhdedup
from tests.support.fault_node import FaultNode
from tests.support.helpers import serving, write_jsonl

__all__ = ["fault_node", "reference", "site"]


def drop_index(client: Elasticsearch, index: str) -> None:
    """``index``, its key registry and its template."""
    client.indices.delete(index=[index, registry_name(index)], ignore_unavailable=True)
    client.options(ignore_status=404).indices.delete_index_template(name=f"zhdedup-{index}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The corpus served as pages ``<base><id>.html``; yields the base URL."""
    root = tmp_path_factory.mktemp("site")
    for record in corpus():
        (root / f"{record['id']}.html").write_text(record["html"], encoding="utf-8")
    with serving(root) as base:
        yield base


@pytest.fixture(scope="module")
def fault_node() -> Iterator[FaultNode]:
    """A node of our own that the tests may kill; stopped and its data removed at the end."""
    node = FaultNode()
    try:
        node.start()
        yield node
    finally:
        node.destroy()


@pytest.fixture(scope="module")
def reference(es_url: str, es_client: Elasticsearch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Verdicts]:
    """Verdicts of an uninterrupted ingest of the whole corpus into a fresh index of the shared node."""
    work = tmp_path_factory.mktemp("reference")
    name = f"zhdedup-fault-ref-{uuid.uuid4().hex[:12]}"
    try:
        proc = zhdedup(*ingest_args(es_url, name, write_jsonl(work / "corpus.jsonl", corpus()), work))
        assert proc.returncode == 0, proc.stderr[-3000:]
        verdicts = stored(es_url, name)
        assert set(verdicts) == ids_of(corpus())
        statuses = [v[0] for v in verdicts.values()]
        assert min(statuses.count("exact"), statuses.count("near")) >= len(corpus()) // 10  # real repeats
        yield verdicts
    finally:
        drop_index(es_client, name)
