"""The server's flavour, found at start (es_plugin/flavour.py), on whichever node the run has: 9, 8, 7.x or
OpenSearch (scripts/test.sh runs this module on each, with its client)."""

from __future__ import annotations

import json
import urllib.request

import pytest
from elasticsearch import Elasticsearch

from es_plugin import flavour
from es_plugin.client import make_client
from es_plugin.flavour import ELASTICSEARCH, OPENSEARCH, LegacyClient, family_for, server_of
from es_plugin.operations import drive
from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.config import EsConfig

pytestmark = pytest.mark.es


def _node_version(url: str) -> tuple[str, str]:
    """(product, version) read without any client."""
    with urllib.request.urlopen(f"{url}/_nodes/_local?filter_path=nodes.*.version,nodes.*.build_type", timeout=30) as r:
        node = next(iter(json.load(r)["nodes"].values()))
    try:
        with urllib.request.urlopen(f"{url}/", timeout=30) as r:
            distribution = json.load(r)["version"].get("distribution")
    except OSError:  # 405 on the minimal distributions of 8 and 9
        distribution = None
    return (OPENSEARCH if distribution == "opensearch" else ELASTICSEARCH), node["version"]


def _server(client: Elasticsearch) -> flavour.Server:
    """What the client found (a legacy one keeps it), or asks again (elasticsearch-py's does not keep it)."""
    return server_of(client) if isinstance(client, LegacyClient) else drive(client, flavour.detect(30))


def test_the_server_is_told_and_spoken_to_by_its_client(es_url: str, es_client: Elasticsearch) -> None:
    product, version = _node_version(es_url)
    client = make_client(EsConfig(es_url=es_url))
    try:
        server = _server(client)
        assert (server.product, ".".join(map(str, server.version))) == (product, version)
        family = family_for(server)
        assert isinstance(client, LegacyClient) == (family is not flavour.ES)
        assert client.cluster.health()["status"] in ("green", "yellow")
    finally:
        client.close()


def test_a_server_whose_client_is_missing_is_one_line_and_exit_2(es_url: str, index: str, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    client = make_client(EsConfig(es_url=es_url))
    server = _server(client)
    client.close()
    extra = family_for(server).extra
    monkeypatch.setattr(flavour.Family, "installed", lambda self: False)
    code = main(["es", "status", "--index", index, "--url", es_url])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0, err
    assert f"pip install 'scrapy-zhdedup[{extra}]'" in err and server.product in err
