"""The client seam's pure parts (es_plugin/flavour.py): which client family fits which server, what each
server lacks, and elasticsearch-py 8/9's calls as elasticsearch7 and opensearch-py take them."""

from __future__ import annotations

import pytest

from es_plugin import flavour
from es_plugin.errors import ClientMismatchError
from es_plugin.flavour import ELASTICSEARCH, OPENSEARCH, Server, _request, family_for


def test_each_server_gets_the_family_of_its_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flavour.Family, "installed", lambda self: True)
    import elasticsearch

    major = int(elasticsearch.__versionstr__.split(".", 1)[0])
    assert family_for(Server(ELASTICSEARCH, (major, 0, 0))) is flavour.ES
    assert family_for(Server(ELASTICSEARCH, ())) is flavour.ES  # version unreadable: 7.14+ with a header
    assert family_for(Server(ELASTICSEARCH, (7, 10, 2), xpack=False)) is flavour.ES7
    assert family_for(Server(ELASTICSEARCH, (7, 17, 29), xpack=False)) is flavour.ES7
    assert family_for(Server(OPENSEARCH, (2, 19, 2))) is flavour.OS
    assert family_for(Server(OPENSEARCH, (3, 3, 2))) is flavour.OS


@pytest.mark.parametrize(("server", "extra"), [(Server(ELASTICSEARCH, (7, 10, 2), xpack=False), "es7"),
                                               (Server(OPENSEARCH, (2, 19, 2)), "opensearch")])
def test_a_missing_client_names_its_extra(monkeypatch: pytest.MonkeyPatch, server: Server, extra: str) -> None:
    monkeypatch.setattr(flavour.Family, "installed", lambda self: self is flavour.ES)
    with pytest.raises(ClientMismatchError, match=rf"pip install 'scrapy-zhdedup\[{extra}\]'") as caught:
        family_for(server)
    assert str(server) in str(caught.value) and "\n" not in str(caught.value)


def test_older_servers_are_refused() -> None:
    with pytest.raises(ClientMismatchError, match=r"Elasticsearch 7\.10 or newer"):
        family_for(Server(ELASTICSEARCH, (6, 8, 23)))
    with pytest.raises(ClientMismatchError, match=r"OpenSearch 2\.0 or newer"):
        family_for(Server(OPENSEARCH, (1, 3, 20)))


def test_what_each_server_lacks() -> None:
    oss710, oss717 = Server(ELASTICSEARCH, (7, 10, 2), xpack=False), Server(ELASTICSEARCH, (7, 17, 29), xpack=False)
    default710, es9 = Server(ELASTICSEARCH, (7, 10, 2)), Server(ELASTICSEARCH, (9, 2, 8))
    os219 = Server(OPENSEARCH, (2, 19, 2))
    assert [s.point_in_time for s in (oss710, oss717, default710, es9, os219)] == [False, False, True, True, True]
    assert [s.shard_doc for s in (oss710, oss717, default710, es9, os219)] == [False, False, False, True, False]
    assert [s.has_privileges for s in (oss710, default710, es9, os219)] == [False, True, True, False]
    assert not Server(OPENSEARCH, (2, 3, 0)).point_in_time


def test_body_fields_go_into_the_body() -> None:
    assert _request("search", {"index": "i", "size": 0, "query": {"match_all": {}}, "aggs": {"a": {}},
                               "ignore_unavailable": True}) == {
        "index": "i", "size": 0, "ignore_unavailable": True, "body": {"query": {"match_all": {}}, "aggs": {"a": {}}}}
    # the body given as a whole, and the fields next to it, merge
    assert _request("search", {"body": {"size": 1}, "sort": ["_doc"]}) == {"body": {"size": 1, "sort": ["_doc"]}}


def test_eight_x_names_are_renamed() -> None:
    assert _request("bulk", {"operations": [{"index": {}}, {}], "refresh": True}) == {
        "body": [{"index": {}}, {}], "refresh": True}
    assert _request("msearch", {"searches": [{}, {}]}) == {"body": [{}, {}]}
    assert _request("mget", {"index": "i", "ids": ["a"], "source_includes": ["x"], "realtime": True}) == {
        "index": "i", "_source_includes": ["x"], "realtime": True, "body": {"ids": ["a"]}}
    assert _request("indices.put_mapping", {"index": "i", "properties": {}, "meta": {"m": 1}}) == {
        "index": "i", "body": {"properties": {}, "_meta": {"m": 1}}}
    # has_privileges names its index privileges "index": a body field there, a path parameter elsewhere
    assert _request("security.has_privileges", {"cluster": ["monitor"], "index": [{"names": ["i"]}]}) == {
        "body": {"cluster": ["monitor"], "index": [{"names": ["i"]}]}}


def test_server_durations_in_seconds() -> None:
    assert [flavour._seconds(d) for d in ("60s", "500ms", "2m", "3")] == [60.0, 0.5, 120.0, 3.0]
