"""``ZHDEDUP_ES_URL`` / ``--url``: several node URLs, and a URL the client cannot use refused in one line.

The URL checks need no node; a crawl given such a URL: tests/integration/test_es_urls.py; the failover from a
dead URL to a live one: tests/es/test_es_urls.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from es_plugin.client import client_options
from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.config import EsConfig, from_settings
from scrapy_zhdedup.errors import ConfigError
from scrapy_zhdedup.esurl import node_urls, redact
from tests.support.helpers import write_jsonl

SECRET = "s3cr3t-pw-zhdedup"
MALFORMED = {
    "127.0.0.1:9281": "it has no scheme; write http://127.0.0.1:9281",
    "localhost": "it has no scheme; write http://localhost:9200",
    "http://localhost": "it has no port; write http://localhost:9200",
    "garbage!": "it has no scheme",
    "ftp://h:21": "the scheme must be http or https",
    "http://h:99999": "its port is not a number from 1 to 65535",
    "http://h:9200,h2:9200": "each with its scheme",
    "http://:9200": "it has no host",
    "": "is empty",
}
COMMANDS = [  # every `zhdedup es` command, with what it needs besides the URL
    ["install"], ["status"], ["ingest", "corpus.jsonl"], ["search", "台风"], ["search", "台风", "--print-body"],
    ["dedup-index"], ["reconcile"], ["replay", "dead.jsonl"],
]


def test_several_urls_are_the_clients_host_list() -> None:
    value = "http://127.0.0.1:9201, https://es2.example, http://[::1]:9203/proxy"
    assert [n.url for n in node_urls(value)] == ["http://127.0.0.1:9201", "https://es2.example",
                                                 "http://[::1]:9203/proxy"]
    options = client_options(EsConfig(es_url=value))
    assert options["hosts"] == ["http://127.0.0.1:9201", "https://es2.example", "http://[::1]:9203/proxy"]
    assert options["max_retries"] >= 2  # each other node is tried when one fails
    own = client_options(EsConfig(es_url=value), caller_retries=True)
    assert (own["max_retries"], own["retry_on_status"], own["retry_on_timeout"]) == (2, (), False)


def test_credentials_in_the_urls_are_split_off_and_never_printed() -> None:
    value = f"http://zhuser:{SECRET}@127.0.0.1:9201,http://zhuser:{SECRET}@127.0.0.1:9202"
    options = client_options(EsConfig(es_url=value))
    assert options["hosts"] == ["http://127.0.0.1:9201", "http://127.0.0.1:9202"]
    assert options["basic_auth"] == ("zhuser", SECRET)
    assert redact(value) == "http://127.0.0.1:9201,http://127.0.0.1:9202"
    assert SECRET not in repr(EsConfig(es_url=value))
    assert "x" * 8 not in repr(EsConfig(es_user="u", es_password="x" * 8)) and "y" * 8 not in repr(EsConfig(es_api_key="y" * 8))
    comma = node_urls("http://zhuser:pa,ss@127.0.0.1:9201")  # a comma inside a password stays in its URL
    assert [(n.url, n.password) for n in comma] == [("http://127.0.0.1:9201", "pa,ss")]
    with pytest.raises(ConfigError, match="different credentials") as refused:
        node_urls(f"http://a:{SECRET}@h1:9200,http://b:other@h2:9200")
    assert SECRET not in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        node_urls(f"http://zhuser:{SECRET}@h")  # malformed (no port): named without its password
    assert SECRET not in str(refused.value) and "'http://h'" in str(refused.value)


@pytest.mark.parametrize("url", list(MALFORMED))
def test_a_malformed_url_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ConfigError, match="ZHDEDUP_ES_URL") as refused:
        EsConfig(es_url=url)
    assert MALFORMED[url] in str(refused.value)
    with pytest.raises(ConfigError, match="ZHDEDUP_ES_URL"):  # as a Scrapy setting
        from_settings(EsConfig, {"ZHDEDUP_ES_URL": url})


def test_https_without_a_port_is_443_as_the_client_takes_it() -> None:
    [node] = node_urls("https://es.example")
    assert node.url == "https://es.example"
    from elasticsearch import Elasticsearch

    client = Elasticsearch(**client_options(EsConfig(es_url="https://es.example")))
    assert [n.config.port for n in client.transport.node_pool.all()] == [443]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("url", ["127.0.0.1:9281", "http://localhost", f"http://u:{SECRET}@h,garbage"])
def test_every_es_command_refuses_a_malformed_url_in_one_line(command: list[str], url: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": "a", "text": "台风登陆"}])
    (tmp_path / "dead.jsonl").write_text("", encoding="utf-8")
    assert main(["es", *command, "--url", url, "--index", "news"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("zhdedup: error: ZHDEDUP_ES_URL (--url): "), err
    assert SECRET not in err
    monkeypatch.setenv("ZHDEDUP_ES_URL", url)  # the same from the environment
    assert main(["es", *command, "--index", "news"]) == 2
    assert capsys.readouterr().err == err







def test_help_shows_no_secret_given_in_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ZHDEDUP_ES_URL", f"http://zhuser:{SECRET}@127.0.0.1:9201,http://127.0.0.1:9202")
    monkeypatch.setenv("ZHDEDUP_ES_PASSWORD", SECRET + "-pw")
    monkeypatch.setenv("ZHDEDUP_ES_API_KEY", SECRET + "-key")
    for command in ("ingest", "status", "replay"):
        with pytest.raises(SystemExit):
            main(["es", command, "--help"])
        out = capsys.readouterr().out
        assert "http://127.0.0.1:9201,http://127.0.0.1:9202" in " ".join(out.split()) and SECRET not in out
