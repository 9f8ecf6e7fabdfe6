"""``es ingest`` of real Chinese news (JSONL and saved pages in UTF-8, GBK and Big5), against the real node."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from es_plugin.backend.groupcommit import DEFAULT_CONCURRENCY
from es_plugin.commands.ingest import ingest, open_checkpoint
from es_plugin.errors import EsIndexError
from es_plugin.index.template import install
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.errors import BadRecordError, LayoutMismatchError
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.text.clean import TextCleaner
from tests.support.helpers import Interrupt, gz_cut_after, interrupt_after
from tests.support.waiting import wait_until
from tests.support.zhtexts import (
    articles,
    binary_page,
    edit_chars,
    furniture_page,
    news_page,
    snippets,
    traditional,
    traditional_tw,
    with_attribution,
)

pytestmark = pytest.mark.es

DEDUP = DedupConfig()
VERDICT = ("status", "dup_of", "distance", "cluster", "hash", "doc_id")


def es_config(url: str, index: str, tmp_path: Path, bulk: int = 8) -> EsConfig:
    return EsConfig(es_url=url, es_index=index, es_bulk_size=bulk, es_dead_letter=str(tmp_path / "dead.jsonl"))


def records(n: int = 14) -> list[dict[str, Any]]:
    """Originals, then reposts: attribution lines, typos, traditional script, a whitespace copy, a page."""
    originals = articles(n, max_chars=1500)
    out: list[dict[str, Any]] = [{"id": f"a{i}", "text": a.text, "site": "origin"} for i, a in enumerate(originals)]
    for i, a in enumerate(originals[: n // 2]):
        out.append({"id": f"attr{i}", "text": with_attribution(a.text), "site": "金桥财经网"})
        out.append({"id": f"edit{i}", "text": edit_chars(a.text, 2, i), "site": "repost"})
        out.append({"id": f"trad{i}", "text": traditional(a.text), "site": "tw"})
    out.append({"id": "copy0", "text": "  " + originals[1].text.replace("。", "。\n"), "site": "copy"})
    out.append({"id": "page0", "html": news_page(originals[2].title, originals[2].text), "site": "page"})
    return out


def write_jsonl(path: Path, recs: list[dict[str, Any]], bad_lines: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in recs]
    for at, line in sorted((bad_lines or {}).items()):
        lines.insert(at, line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stored(client: Elasticsearch, index: str) -> dict[str, dict[str, Any]]:
    client.indices.refresh(index=index)
    hits = client.search(index=index, size=1000)["hits"]["hits"]
    out = {}
    for h in hits:
        z = h["_source"].pop("zhdedup")
        assert z["doc_id"] not in out, f"{z['doc_id']} stored twice"
        out[z["doc_id"]] = {**{k: z.get(k) for k in VERDICT}, "source": h["_source"], "words": z.get("words")}
    return out


def test_jsonl_verdicts_fields_and_bad_lines(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch) -> None:
    recs = records()
    src = write_jsonl(tmp_path / "news.jsonl", recs, {3: "{broken", 9: json.dumps({"id": "x"}),
                                                      12: json.dumps({"id": "blank", "text": "。。 ！"})})
    report = ingest([src], DEDUP, es_config(es_url, index, tmp_path), checkpoint_dir=tmp_path / "ck")

    deduper = Deduper(DEDUP)
    expected = {r["id"]: deduper.judge(r["id"], text=r.get("text"), html=r.get("html")) for r in recs}
    got = stored(es_client, index)
    assert {d: (g["status"], g["dup_of"], g["distance"]) for d, g in got.items()} == {
        d: (v.status, v.dup_of, v.distance) for d, v in expected.items()}
    statuses = [v.status for v in expected.values()]
    assert statuses.count("exact") >= 3 and statuses.count("near") >= 3  # traditional + copy; typos
    assert report["judged"] == len(recs) and report["inputs"][0]["done"]
    assert got["attr0"]["source"]["site"] == "金桥财经网"  # extra keys become fields
    page = got["page0"]["source"]
    assert "html" not in page and recs[-1]["html"] and "分享到" not in page["text"]
    assert page["text"].split("\n")[0] in recs[-1]["html"]

    assert report["bad"] == 3
    assert report["bad_examples"] == [f"{src}:4: not JSON (Expecting property name enclosed in double quotes at column 2)",
                                      f"{src}:10: no \"text\" or \"html\" string",
                                      f"{src}:13: no text to judge (no words or Chinese characters left after cleaning)"]
    with pytest.raises(BadRecordError, match=r"news\.jsonl:4: not JSON"):
        ingest([src], DEDUP, es_config(es_url, f"{index}-straight", tmp_path), checkpoint_dir=tmp_path / "ck2",
               strict=True)


def test_workers_change_neither_verdicts_nor_what_is_stored(es_url: str, index: str, tmp_path: Path,
                                                             es_client: Elasticsearch) -> None:
    """Repeats right after their originals, judged 8 to a lookup batch (es ingest starts a batch only
    when the one before it was decided), by one process and by two workers: the same index, in input
    order."""
    originals = articles(12, max_chars=1500)
    recs: list[dict[str, Any]] = []
    for i, a in enumerate(originals):
        recs.append({"id": f"a{i}", "text": a.text})
        recs.append({"id": f"edit{i}", "text": edit_chars(a.text, 2, i)})
        recs.append({"id": f"page{i}", "html": news_page(a.title, with_attribution(a.text))} if i % 2
                    else {"id": f"trad{i}", "text": traditional(a.text)})
    src = write_jsonl(tmp_path / "news.jsonl", recs, {5: "{broken", 20: json.dumps({"id": "blank", "text": "。。 ！"})})
    names = {1: index, 2: f"{index}-straight"}
    reports = {}
    for workers, name in names.items():
        cfg = es_config(es_url, name, tmp_path, bulk=16)
        reports[workers] = ingest([src], DEDUP, cfg, checkpoint_dir=tmp_path / f"ck{workers}", concurrency=8,
                                  workers=workers)
    assert stored(es_client, names[1]) == stored(es_client, names[2])
    counts = ("judged", "unique", "exact", "near", "bad", "bad_examples")
    assert {k: reports[1][k] for k in counts} == {k: reports[2][k] for k in counts}

    deduper = Deduper(DEDUP)
    expected = {r["id"]: deduper.judge(r["id"], text=r.get("text"), html=r.get("html")) for r in recs}
    got = stored(es_client, names[2])
    assert {d: (g["status"], g["dup_of"]) for d, g in got.items()} == {
        d: (v.status, v.dup_of) for d, v in expected.items()}
    statuses = [v.status for v in expected.values()]
    assert statuses.count("near") >= 8 and statuses.count("exact") >= 3 and reports[2]["bad"] == 2


FORK_PROBE = """
import sys
from scrapy_zhdedup import workers
from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.cli.progress import progress
chosen = []
start_method = workers.PreparePool._start_method
workers.PreparePool._start_method = lambda self: chosen.append(start_method(self)) or chosen[-1]
with progress(None, "doc", "a bar shown beside the pool"):  # as `zhdedup es ingest` shows one
    code = main(sys.argv[1:])
print(chosen)
sys.exit(code)
"""


def test_ingest_forks_its_workers_before_the_event_loop_exists(es_url: str, index: str, tmp_path: Path) -> None:
    """The pool is opened first, while the process has one thread (a progress bar starts none): its workers
    are forked with the modules imported, not spawned to import them again."""
    src = write_jsonl(tmp_path / "news.jsonl", records(4))
    out = subprocess.run([sys.executable, "-c", FORK_PROBE, "es", "ingest", "--url", es_url, "--index", index,
                          "--checkpoint-dir", str(tmp_path / "ck"), "--dead-letter", str(tmp_path / "dead.jsonl"),
                          "--workers", "2", str(src)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "['fork']"
    assert "judged" in out


def test_html_directory_in_gbk_and_big5(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch) -> None:
    a, b, c = articles(3, encodings=("gbk", "big5"), max_chars=1200)
    site = tmp_path / "site"
    (site / "news" / "2019").mkdir(parents=True)
    (site / "a.html").write_bytes(news_page(a.title, a.text).encode("utf-8"))
    (site / "news" / "2019" / "a-gbk.htm").write_bytes(news_page(a.title, a.text, charset="gbk").encode("gbk"))
    (site / "news" / "b.shtml").write_bytes(news_page(b.title, b.text, charset=None).encode("gbk"))  # undeclared
    big5 = traditional_tw(news_page(c.title, c.text, charset="big5")).encode("big5")
    (site / "news" / "c-big5.html").write_bytes(big5)
    (site / "c.html").write_bytes(news_page(c.title, c.text, site="caijing").encode("utf-8"))
    (site / "notes.txt").write_text("不是网页")

    report = ingest([site], DEDUP, es_config(es_url, index, tmp_path), checkpoint_dir=tmp_path / "ck")
    got = stored(es_client, index)
    assert set(got) == {"a.html", "news/2019/a-gbk.htm", "news/b.shtml", "news/c-big5.html", "c.html"}
    assert report["judged"] == 5 and report["bad"] == 0
    assert got["news/2019/a-gbk.htm"]["status"] == "exact" and got["news/2019/a-gbk.htm"]["dup_of"] == "a.html"
    assert got["news/c-big5.html"]["status"] in ("exact", "near") and got["news/c-big5.html"]["dup_of"] == "c.html"
    assert got["news/b.shtml"]["status"] == "unique"
    assert got["news/b.shtml"]["source"]["title"].startswith(b.title)
    # the stored text is the page's own: its script and punctuation, not the normalised form that was hashed
    assert b.text[:15] in got["news/b.shtml"]["source"]["text"]  # GBK bytes decoded right
    assert traditional_tw(c.text)[:15] in got["news/c-big5.html"]["source"]["text"]
    assert TextCleaner().normalise(traditional_tw(c.text))[:15] not in got["news/c-big5.html"]["source"]["text"]
    assert "html" not in got["a.html"]["source"] and got["a.html"]["words"]


@pytest.mark.parametrize("concurrency", [1, DEFAULT_CONCURRENCY])
def test_interrupted_ingest_resumes_exactly_once(es_url: str, index: str, tmp_path: Path,
                                                 es_client: Elasticsearch, concurrency: int) -> None:
    """Interrupted after 13 reported documents: the checkpoint is there.  Documents judged beside
    them (one lookup batch, up to ``concurrency``) are stored too, and the rerun skips them."""
    recs = records()
    src = write_jsonl(tmp_path / "news.jsonl", recs)
    ingest([src], DEDUP, es_config(es_url, f"{index}-straight", tmp_path), checkpoint_dir=tmp_path / "ck-straight")

    seen: list[int] = []
    cfg = es_config(es_url, index, tmp_path)
    with pytest.raises(Interrupt):  # between two bulks: the judged ones are flushed and checkpointed
        ingest([src], DEDUP, cfg, checkpoint_dir=tmp_path / "ck", progress=interrupt_after(13, seen),
               concurrency=concurrency)
    state = open_checkpoint(tmp_path / "ck", index, src.resolve(), "jsonl", restart=False)
    assert state.progress["position"] == 13 and not state.progress["done"]
    early = len(stored(es_client, index))
    assert early == 13 if concurrency == 1 else 13 < early <= len(recs)
    report = ingest([src], DEDUP, cfg, checkpoint_dir=tmp_path / "ck", progress=lambda k: seen.append(k),
                    concurrency=concurrency)
    assert report["inputs"][0]["resumed_from"] == 13 and report["already_stored"] == early - 13
    assert report["judged"] == len(recs) - early == len(seen) - 13  # every record judged exactly once
    assert stored(es_client, index) == stored(es_client, f"{index}-straight")

    again = ingest([src], DEDUP, cfg, checkpoint_dir=tmp_path / "ck")
    assert again["judged"] == 0 and again["inputs"][0]["skipped_input"]


def test_what_is_stored_is_never_stored_again(es_url: str, index: str, tmp_path: Path,
                                              es_client: Elasticsearch) -> None:
    """A hard kill between a bulk and its checkpoint, or the same input again: nothing is judged twice."""
    recs = records(8)
    src = write_jsonl(tmp_path / "news.jsonl", recs)
    cfg = es_config(es_url, index, tmp_path)
    ingest([src], DEDUP, cfg, checkpoint_dir=tmp_path / "ck")
    before = stored(es_client, index)
    state = open_checkpoint(tmp_path / "ck", index, src.resolve(), "jsonl", restart=False)
    state.progress.update(position=len(recs) - 5, done=False)
    state.save()
    report = ingest([src], DEDUP, cfg, checkpoint_dir=tmp_path / "ck")
    assert report["already_stored"] == 5 and report["judged"] == 0
    again = ingest([src], DEDUP, cfg, checkpoint_dir=tmp_path / "ck", restart=True, concurrency=4)
    assert again["already_stored"] == len(recs) and again["judged"] == 0
    assert stored(es_client, index) == before


def test_wrong_or_missing_template_is_a_clear_error(es_url: str, index: str, tmp_path: Path,
                                                    es_client: Elasticsearch) -> None:
    src = write_jsonl(tmp_path / "news.jsonl", records(4))
    es_client.indices.create(index=index, mappings={"properties": {"text": {"type": "text"}}})
    with pytest.raises(EsIndexError, match="not created from the scrapy-zhdedup template"):
        ingest([src], DEDUP, es_config(es_url, index, tmp_path), checkpoint_dir=tmp_path / "ck")

    other = f"{index}-straight"
    install(es_client, other, BandLayout.from_config(DedupConfig(threshold=3)))
    with pytest.raises(LayoutMismatchError, match="ZHDEDUP_THRESHOLD=3"):
        ingest([src], DedupConfig(threshold=4, passages=False), es_config(es_url, other, tmp_path),
               checkpoint_dir=tmp_path / "ck")


def test_a_truncated_gz_is_stored_up_to_the_damage(es_url: str, index: str, tmp_path: Path,
                                                  es_client: Elasticsearch) -> None:
    """5,000 lines cut so that 3,010 can be read: all 3,010 are stored and checkpointed, then one line names
    where the input stopped, exit 2 (it stored 2,000: the lines still being read ahead, a lookup window of
    1,000, were dropped with the error); a rerun of the same command stops at the same line, storing nothing twice."""
    lines = [{"id": f"d{i}", "text": text} for i, text in enumerate(snippets(5_000, size=60, step=100))]
    source = gz_cut_after(tmp_path / "in.jsonl.gz", lines, 3_010)
    command = [str(Path(sys.executable).with_name("zhdedup")), "es", "ingest", str(source), "--url", es_url,
               "--index", index, "--workers", "2", "--checkpoint-dir", str(tmp_path / "ck")]
    expected = [f"zhdedup: error: {source}: cannot read past line 3010: Compressed file ended before the "
                "end-of-stream marker was reached (a truncated or damaged .gz file?)"]
    for _ in range(2):
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 2 and proc.stderr.splitlines() == expected, proc.stderr
        es_client.indices.refresh(index=index)
        assert es_client.count(index=index)["count"] == 3_010
        state = open_checkpoint(tmp_path / "ck", index, source.resolve(), "jsonl", restart=False)
        assert state.progress["position"] == 3_010 and not state.progress["done"]


def test_ctrl_c_says_how_far_it_got_and_the_rerun_resumes(es_url: str, index: str, tmp_path: Path,
                                                          es_client: Elasticsearch) -> None:
    """A real SIGINT once the first bulk is checkpointed: one line, exit 130, what was judged stored and
    checkpointed; the same command again resumes there and stores the rest (it exited 130 saying nothing)."""
    lines = [{"id": f"s{i}", "text": text} for i, text in enumerate(snippets(4_000, size=60, step=100))]
    source = write_jsonl(tmp_path / "in.jsonl", lines)
    command = [str(Path(sys.executable).with_name("zhdedup")), "es", "ingest", str(source), "--url", es_url,
               "--index", index, "--workers", "2", "--bulk-size", "200", "--checkpoint-dir", str(tmp_path / "ck")]
    # A test run started in the background (nohup, `&` without job control) ignores SIGINT, and so would the
    # command it starts (an ignored signal stays ignored across exec): give the command Ctrl-C as a terminal does.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, inherited)
    wait_until(lambda: any((tmp_path / "ck").glob("*.json")), "a checkpoint", timeout=300, proc=proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and out == "", err
    # That line alone: a lookup still in flight, cut as the client closed, once said the node did not answer
    [line] = err.splitlines()
    assert re.fullmatch(r"zhdedup: interrupted after \d+ documents; rerun the same command to resume", line)
    judged = int(line.split()[3])
    state = open_checkpoint(tmp_path / "ck", index, source.resolve(), "jsonl", restart=False)
    assert 200 <= judged < len(lines) and state.progress["position"] == judged and not state.progress["done"]

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed after position {judged}" in resumed.stderr
    es_client.indices.refresh(index=index)
    assert es_client.count(index=index)["count"] == len(lines)


def test_junk_is_skipped_like_an_empty_page(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch) -> None:
    """Binary data served as a page and a page of only the site's furniture: skipped and counted as bad records,
    naming why, not stored as `unique` documents."""
    [article] = articles(1)
    src = write_jsonl(tmp_path / "news.jsonl", [{"id": "article", "text": article.text},
                                                {"id": "image", "html": binary_page().decode("latin-1")},
                                                {"id": "chrome", "html": furniture_page()}])
    report = ingest([src], DEDUP, es_config(es_url, index, tmp_path), checkpoint_dir=tmp_path / "ck")
    assert (report["judged"], report["unique"], report["bad"]) == (1, 1, 2)
    assert [e.split(": ", 1)[1][:30] for e in report["bad_examples"]] == ["not a document (binary data, n",
                                                                            "not a document (no main text: "]
    assert list(stored(es_client, index)) == ["article"]
