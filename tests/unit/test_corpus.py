"""Tests for the benchmark corpus, the repost transforms and the example news site."""

from __future__ import annotations

import difflib
import json
import random
import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from corpora import corpus, reposts
from corpora.corpus import Article, load_base, shingle_hashes
from examples.site import generate, serve

N_SAMPLE = 120


@pytest.fixture(scope="module")
def bases() -> list[Article]:
    return load_base(limit=N_SAMPLE)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("site")
    return out, generate.generate(out)


def _similarity(a: str, b: str) -> tuple[float, float]:
    x, y = shingle_hashes(a), shingle_hashes(b)
    inter = np.intersect1d(x, y, assume_unique=True).size
    return inter / (x.size + y.size - inter), inter / min(x.size, y.size)


# --- transforms ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(reposts.TRANSFORMS))
def test_transform_is_deterministic_and_changes_text(name: str, bases: list[Article]) -> None:
    transform = reposts.TRANSFORMS[name]
    for i, article in enumerate(bases[:40]):
        out = transform(article.text, random.Random(i))
        assert out == transform(article.text, random.Random(i))
        assert out != article.text


def test_paragraphs_rejoin_to_the_text(bases: list[Article]) -> None:
    for article in bases:
        chunks, joiner = reposts.paragraphs(article.text)
        assert len(chunks) >= 2
        assert joiner.join(chunks).replace("\n", "") == re.sub(r"\s*\n\s*", "", article.text)


def test_traditional_uses_traditional_characters() -> None:
    out = reposts.traditional("这个国家的经济发展很快，们说这里的学校也变了。", random.Random(0))
    assert "這個國家的經濟發展" in out and "學校" in out


def test_punct_width_changes_widths(bases: list[Article]) -> None:
    fullwidth = re.compile(r"[，。：；！？（）０-９Ａ-Ｚａ-ｚ]")
    for i, article in enumerate(bases[:40]):
        out = reposts.punct_width(article.text, random.Random(i))
        widths_changed = len(fullwidth.findall(out)) != len(fullwidth.findall(article.text))
        assert widths_changed or out.count(" ") > article.text.count(" ")


def test_edit_chars_edits_one_to_three_percent(bases: list[Article]) -> None:
    short = [a for a in bases if len(a.text) <= 1500][:30]  # difflib aligns long texts poorly
    for i, article in enumerate(short):
        out = reposts.edit_chars(article.text, random.Random(i))
        ops = difflib.SequenceMatcher(None, article.text, out, autojunk=False).get_opcodes()
        changed = sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")
        # adjacent edits can merge in the diff, so allow a little slack around 1–3 %
        assert 0.005 <= changed / len(article.text) <= 0.04, changed / len(article.text)


def test_structural_edits_keep_the_article_content(bases: list[Article]) -> None:
    for i, article in enumerate(bases[:40]):
        text = article.text
        dropped = reposts.drop_paragraph(text, random.Random(i))
        assert 0.5 * len(text) <= len(dropped) < len(text)
        swapped = reposts.swap_paragraphs(text, random.Random(i))
        assert sorted(swapped.replace("\n", "")) == sorted(text.replace("\n", ""))
        cut = reposts.truncate(text, random.Random(i))
        assert text.startswith(cut) and 0.69 * len(text) <= len(cut) <= 0.9 * len(text) + 1


def test_add_header_footer_wraps_the_original(bases: list[Article]) -> None:
    for i, article in enumerate(bases[:20]):
        out = reposts.add_header_footer(article.text, random.Random(i))
        assert article.text in out
        assert re.search(r"来源|编辑|转载|免责|分享|版权|原标题|发布时间|字号|纠错|关注", out.replace(article.text, ""))
    short = reposts.add_header_footer("短消息，测试微博转发的样子。", random.Random(0))
    assert "短消息，测试微博转发的样子。" in short and "\n" not in short


def test_combo_reports_two_or_three_steps(bases: list[Article]) -> None:
    for i, article in enumerate(bases[:20]):
        out, steps = reposts.apply_combo(article.text, random.Random(i))
        assert 2 <= len(steps) <= 3 and len(set(steps)) == len(steps)
        assert out == reposts.combo(article.text, random.Random(i))


def test_template_lookalike_shares_boilerplate_not_facts(bases: list[Article]) -> None:
    for k in range(0, 20, 2):
        a, b = reposts.template_lookalike(bases[k].text, bases[k + 1].text, random.Random(k))
        assert a != b
        shared = set(a.split("\n")) & set(b.split("\n"))
        assert sum(len(line) for line in shared) >= 150  # a long common template ...
        assert _similarity(a, b)[0] < 0.5  # ... around different bodies
    with pytest.raises(ValueError):
        reposts.template_lookalike("同一篇", "同一篇", random.Random(0))


# --- base set and labelled sets ------------------------------------------------------------


def test_base_set_is_deterministic_and_free_of_natural_near_dups(bases: list[Article]) -> None:
    assert [a.id for a in load_base(limit=N_SAMPLE)] == [a.id for a in bases]
    assert len({a.text for a in bases}) == len(bases)
    assert all(300 <= len(a.text) <= 5000 for a in bases)
    hashes = [shingle_hashes(a.text) for a in bases]
    for i, x in enumerate(hashes):
        for j in range(i + 1, len(hashes)):
            y = hashes[j]
            inter = np.intersect1d(x, y, assume_unique=True).size
            assert inter < corpus.MAX_JACCARD * (x.size + y.size - inter), (bases[i].id, bases[j].id)
            assert inter < corpus.MAX_CONTAINMENT * min(x.size, y.size), (bases[i].id, bases[j].id)


def test_near_duplicate_filter_drops_later_reposts(bases: list[Article]) -> None:
    a, b = bases[0].text, bases[1].text
    texts = [a, b, reposts.edit_chars(a, random.Random(1)), reposts.truncate(b, random.Random(2))]
    kept, dropped = corpus.near_duplicate_filter(texts)
    assert kept == [0, 1] and dropped == {2: 0, 3: 1}


def test_accuracy_set_structure() -> None:
    records = corpus.build_accuracy_set(n_base=30, seed=7)
    assert records == corpus.build_accuracy_set(n_base=30, seed=7)
    assert len({r.id for r in records}) == len(records)
    seen_original: set[str] = set()
    for r in records:
        if r.kind == "original":
            seen_original.add(r.group)
        elif r.kind != "lookalike":
            assert r.group in seen_original, "a repost came before its original"
            assert r.kind in reposts.TRANSFORMS
    lookalikes = [r for r in records if r.kind == "lookalike"]
    assert len(lookalikes) == 6 and len({r.group for r in lookalikes}) == 6
    assert len(seen_original) == 30


def test_short_set_texts_are_short() -> None:
    records = corpus.build_short_set(n_base=40, seed=7)
    originals = [r for r in records if r.kind == "original"]
    assert len(originals) == 40
    assert all(corpus.SHORT_MIN <= len(r.text) <= corpus.SHORT_MAX for r in originals)
    assert all(len(r.text) < 240 for r in records)


def test_scan_file_is_reproducible(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    counts = corpus.build_scan_file(first, n_docs=300, seed=3)
    corpus.build_scan_file(second, n_docs=300, seed=3)
    assert first.read_bytes() == second.read_bytes()
    docs = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()]
    assert len(docs) == 300 == sum(counts.values())
    assert len({d["id"] for d in docs}) == 300
    assert 0.2 <= 1 - (counts["original"] + counts["mosaic"]) / 300 <= 0.4
    with_html = [d for d in docs if "html" in d]
    assert 10 <= len(with_html) <= 60
    assert all("<html" in d["html"] and "<script>" in d["html"] for d in with_html)


# --- example site --------------------------------------------------------------------------

_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_-]+)""", re.I)


def test_site_manifest_matches_files(site: tuple[Path, dict]) -> None:
    out, manifest = site
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8")) == manifest
    pages = manifest["pages"]
    assert 20 <= len(pages) + len(manifest["lists"]) <= 40
    for path, info in pages.items():
        assert (out / path).is_file()
        if info["dup_of"] is not None:
            assert pages[info["dup_of"]]["base"] == info["base"]
            assert pages[info["dup_of"]]["transform"] == "original"
    assert {info["site"] for info in pages.values()} == {"xinwen", "caijing", "difang"}
    assert len({pages[p]["base"] for p in manifest["same_topic"]}) == 3
    assert len([p for p in pages.values() if p["transform"] == "copy"]) >= 2


def test_site_pages_decode_with_their_declared_charset(site: tuple[Path, dict]) -> None:
    out, manifest = site
    encodings = {info["encoding"] for info in manifest["pages"].values()}
    assert {"utf-8", "gbk", "big5"} <= encodings
    for path in [*manifest["pages"], *manifest["lists"]]:
        raw = (out / path).read_bytes()
        declared = _CHARSET.search(raw[:1024]).group(1).decode()
        text = raw.decode(declared)  # strict
        if path in manifest["pages"]:
            assert manifest["pages"][path]["encoding"] == declared
            assert manifest["pages"][path]["title"] in text.replace("&quot;", '"').replace("&#x27;", "'")
    big5 = next(p for p, info in manifest["pages"].items() if info["encoding"] == "big5")
    assert re.search("[們這個說經國會學為]", (out / big5).read_bytes().decode("big5"))


def test_server_sends_bytes_unchanged(site: tuple[Path, dict]) -> None:
    out, manifest = site
    server, url = serve.start_server(out)
    try:
        for path, info in manifest["pages"].items():
            with urllib.request.urlopen(url + path, timeout=5) as response:
                assert response.read() == (out / path).read_bytes()
                content_type = response.headers["Content-Type"]
            if info["encoding"] == "utf-8":
                assert content_type == "text/html; charset=utf-8"
            else:
                assert content_type == "text/html"
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.read() == (out / "index.html").read_bytes()
    finally:
        server.shutdown()
        server.server_close()


def test_generator_refuses_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(FileExistsError):
        generate.generate(tmp_path)
