"""``zhdedup es …`` end to end through ``scrapy_zhdedup.cli.main``, against the real node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from es_plugin.flavour import server_of
from scrapy_zhdedup.cli.main import main
from tests.support.zhtexts import articles, edit_chars, with_attribution

pytestmark = pytest.mark.es


@pytest.fixture(scope="module")
def news(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "news.jsonl"
    lines = []
    for i, a in enumerate(articles(12, max_chars=1500)):
        lines.append({"id": f"https://a.example/{i}", "title": a.title, "text": a.text})
        if i < 6:
            lines.append({"id": f"https://b.example/{i}", "title": a.title, "text": with_attribution(a.text)})
            lines.append({"id": f"https://c.example/{i}", "title": a.title, "text": edit_chars(a.text, 2, i)})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_install_status_ingest_search_reconcile(es_url: str, es_client: Elasticsearch, index: str, news: Path,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = ("--url", es_url)
    code, out, _ = run(capsys, "es", "install", "--index", index, *conn)
    assert code == 0 and "created" in out
    code, out, _ = run(capsys, "es", "install", "--index", index, *conn)
    assert code == 0 and "unchanged" in out

    code, out, _ = run(capsys, "es", "ingest", str(news), "--index", index, *conn, "--bulk-size", "10",
                       "--checkpoint-dir", str(tmp_path / "ck"), "--dead-letter", str(tmp_path / "dead.jsonl"))
    assert code == 0 and "zhdedup es ingest: 24 judged" in out and "docs/s" in out

    code, out, _ = run(capsys, "es", "status", "--index", index, *conn, "--json")
    status = json.loads(out)
    assert code == 0 and status["matches"] and status["docs"] == 24 and status["clusters"] < 24
    code, out, _ = run(capsys, "es", "status", "--index", index, *conn, "--threshold", "4")
    assert code == 1 and "matches:   NO" in out and "ZHDEDUP_THRESHOLD=3" in out

    title = news.read_text(encoding="utf-8").split("\n")[0]
    title = json.loads(title)["title"]
    code, out, _ = run(capsys, "es", "search", title, "--index", index, *conn, "--inner-hits", "2")
    assert code == 0 and "+2 repeats folded" in out and "~ https://" in out and "None" not in out
    assert "(near repeat, " in out and "(original)" not in out  # the original leads its group, not under it
    code, out, _ = run(capsys, "es", "search", title, "--index", index, *conn, "--json", "--inner-hits", "2")
    top = json.loads(out)["hits"][0]
    assert top["folded"] >= 1 and top["status"] == "unique" and top["doc_id"] == top["cluster"]
    code, out, _ = run(capsys, "es", "search", "没有这样的词组合", "--index", index, *conn)
    assert code == 0 and out == "no matches\n"
    code, out, err = run(capsys, "es", "search", "中国", "--index", index, *conn, "--all")
    if server_of(es_client).collapse_search_after:
        groups = [json.loads(line) for line in out.splitlines()]
        assert code == 0 and len({g["cluster"] for g in groups}) == len(groups)
    else:  # Elasticsearch 7.x, OpenSearch: collapse refuses search_after, and --all says so in one line
        assert code == 2 and "cannot page a collapsed search" in err and err.count("\n") == 1

    code, out, _ = run(capsys, "es", "reconcile", "--index", index, *conn, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["scanned"] == 24
    code, out, _ = run(capsys, "es", "reconcile", "--index", index, *conn)  # said as every summary is
    assert code == 0 and out == ("zhdedup es reconcile: 24 read, 0 missed repeats found (0 marked, 0 deleted), "
                                 "0 moved to the cluster theirs joined, 12 clusters\n"), out


def test_dedup_index_and_print_body(es_url: str, es_client: Elasticsearch, index: str, news: Path,
                                    tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    es_client.indices.create(index=index, mappings={"properties": {"text": {"type": "text"}}})
    ops = []
    for line in news.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        ops += [{"index": {"_index": index}}, {"url": rec["id"], "title": rec["title"], "text": rec["text"]}]
    es_client.bulk(operations=ops, refresh=True)
    monkeypatch.chdir(tmp_path)  # the default checkpoint goes to ./.zhdedup-checkpoints
    conn = ("--url", es_url)

    code, out, _ = run(capsys, "es", "dedup-index", "--index", index, *conn, "--id-field", "url", "--dry-run",
                       "--json")
    dry = json.loads(out)
    assert code == 0 and dry["dry_run"] and dry["judged"] == 24
    code, out, _ = run(capsys, "es", "dedup-index", "--index", index, *conn, "--id-field", "url")
    assert code == 0 and "24 judged" in out and "largest:" in out and "https://a.example/" in out
    assert (tmp_path / ".zhdedup-checkpoints" / f"dedup-index-{index}.json").exists()
    cluster = es_client.search(index=index, query={"term": {"url.keyword": "https://b.example/0"}})
    assert cluster["hits"]["hits"][0]["_source"]["zhdedup"]["dup_of"] == "https://a.example/0"

    code, out, _ = run(capsys, "es", "status", "--index", index, *conn)  # no template: dedup-index needs none
    assert code == 0 and "matches:   yes" in out and "not installed" in out

    code, out, _ = run(capsys, "es", "search", "新闻", "--index", index, "--print-body", "--inner-hits", "3")
    first, *body_lines, last = out.splitlines()
    body = json.loads("\n".join(body_lines))
    assert first.startswith("curl ") and f"/{index}/_search" in first and last == "JSON"
    assert body["collapse"]["field"] == "zhdedup.cluster" and body["collapse"]["inner_hits"][0]["size"] == 4


def test_search_runs_on_the_text_field_named_and_the_original_leads_without_inner_hits(
        es_url: str, index: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33, items 1 and 2: ``--text-field content`` is what the search runs on (it searched
    ``title,text`` and found nothing), and a group is led by its original whether or not inner hits are
    asked for (a repost whose title repeats the query words outscores it and used to lead)."""
    original, other = articles(2, max_chars=1500)
    words = "台风 登陆"
    docs = [{"id": "a/original", "title": "本地新闻", "content": original.text + "今年第二十号台风今天下午登陆。"},
            {"id": "b/repost", "title": f"{words} {words} {words}",
             "content": with_attribution(original.text + "今年第二十号台风今天下午登陆。")},
            {"id": "c/other", "title": other.title, "content": other.text}]
    path = tmp_path / "content.jsonl"
    pages = [{"id": d["id"], "title": d["title"], "html": f"<html><body><p>{d['content']}</p></body></html>"}
             for d in docs]  # pages: the index holds no "text" field, only the cleaned text in "content"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pages), encoding="utf-8")
    conn = ("--url", es_url, "--index", index, "--text-field", "content")
    code, out, _ = run(capsys, "es", "ingest", str(path), *conn, "--checkpoint-dir", str(tmp_path / "ck"))
    assert code == 0 and "1 near" in out
    for extra in ((), ("--inner-hits", "1"), ("--inner-hits", "3")):
        code, out, _ = run(capsys, "es", "search", "今年 第二十号", *conn, *extra)
        assert code == 0 and "2 documents in 1 group" in out, out
        code, out, _ = run(capsys, "es", "search", words, *conn, *extra)
        assert code == 0 and out.splitlines()[1].endswith("[a/original]  +1 repeat folded"), out
    assert "(near repeat, similar, similarity 1.00)" in out and "bits apart" not in out


def test_errors_are_one_clear_line(es_url: str, index: str, capsys: pytest.CaptureFixture[str],
                                   tmp_path: Path) -> None:
    code, _, err = run(capsys, "es", "search", "中国", "--index", index, "--url", es_url)
    assert code == 2 and "no such index" in err
    code, _, err = run(capsys, "es", "status", "--index", index, "--url", "http://127.0.0.1:9")
    assert code == 2 and "http://127.0.0.1:9 is not reachable" in err
    code, _, err = run(capsys, "es", "ingest", str(tmp_path / "missing.jsonl"), "--index", index, "--url", es_url)
    assert code == 2 and "missing.jsonl: no such file or directory" in err
    code, _, err = run(capsys, "es", "dedup-index", "--index", index, "--url", es_url)
    assert code == 2 and "no such index" in err


def test_ingest_of_standard_input_is_refused_with_what_to_do_instead(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["es", "ingest", "--url", "http://127.0.0.1:9", "--index", "news", "-"]) == 2
    assert "save standard input to a file" in capsys.readouterr().err
