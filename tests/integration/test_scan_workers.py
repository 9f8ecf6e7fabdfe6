"""``zhdedup scan --workers N``: worker processes prepare, the main process judges in input order, so
the output, the bad lines and the store do not depend on N."""

from __future__ import annotations

import json
import logging
import random
import re
from pathlib import Path
from typing import Any

import pytest

from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.cli.main import main
from tests.support import zhtexts
from tests.support.zhtexts import news_page

ARTICLES = zhtexts.articles(50)
BAD = {  # position in the corpus -> (line, message)
    17: ('{"id": "cut", "text": "国家统计局', "not JSON"),
    40: (json.dumps({"id": "markup", "html": "<html><script>var x = 1;</script></html>"}), "no text to judge"),
    41: (json.dumps({"id": "nul\x00id", "text": "正文"}), "the id contains a NUL character"),
    66: (json.dumps({"text": "没有编号"}), "id"),
}


def _corpus() -> list[str]:
    """Originals with many exact, near and page repeats of earlier ones, and bad lines in the middle."""
    rng = random.Random(11)
    docs: list[dict[str, Any]] = []
    for i, a in enumerate(ARTICLES):
        docs.append({"id": a.id, "text": a.text} if i % 4 else {"id": a.id, "html": news_page(a.title, a.text)})
        earlier = ARTICLES[rng.randrange(i + 1)]
        kind = i % 4
        if kind == 0:
            docs.append({"id": f"{a.id}-copy", "text": zhtexts.full_width(earlier.text)})
        elif kind == 1:
            docs.append({"id": f"{a.id}-typo", "text": zhtexts.edit_chars(earlier.text, 2, seed=i)})
        elif kind == 2:
            docs.append({"id": f"{a.id}-repost", "html": news_page(earlier.title, earlier.text, site="caijing")})
        else:
            docs.append({"id": f"{a.id}-again", "text": earlier.text})
    lines = [json.dumps(d, ensure_ascii=False) for d in docs]
    for position, (line, _) in sorted(BAD.items()):
        lines.insert(position, line)
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(line + "\n" for line in _corpus()), encoding="utf-8")
    return path


def _scan(corpus: Path, out: Path, workers: int, *more: str) -> int:
    return main(["scan", str(corpus), "-o", str(out), "--workers", str(workers), *more])


def _summary(stderr: str) -> str:
    """The summary line's counts (without the timing)."""
    found = re.search(r"zhdedup scan: .* bad lines skipped", stderr)
    assert found, stderr
    return found.group(0)


def test_two_workers_write_the_same_bytes_and_bad_lines_as_one(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    skipped = []
    for workers in (1, 2):
        with caplog.at_level(logging.WARNING):
            assert _scan(corpus, tmp_path / f"{workers}.jsonl", workers, "--store", str(tmp_path / f"store{workers}")) == 0
        skipped.append(sorted(r.getMessage() for r in caplog.records))
        caplog.clear()
    one_err, two_err = capsys.readouterr().err.split("\n", 1)
    one, two = (tmp_path / "1.jsonl").read_bytes(), (tmp_path / "2.jsonl").read_bytes()
    assert one == two
    verdicts = [json.loads(line) for line in one.splitlines()]
    assert {v["status"] for v in verdicts} == {"unique", "exact", "near"}
    assert sum(v["status"] != "unique" for v in verdicts) >= 40
    assert len(verdicts) == 2 * len(ARTICLES)
    assert skipped[0] == skipped[1]
    for position, (_, reason) in BAD.items():
        assert any(f"{corpus}:{position + 1}: " in m and reason in m for m in skipped[0]), (position, skipped[0])
    assert _summary(one_err) == _summary(two_err)
    assert "4 bad lines skipped" in _summary(one_err)

    stores = [Deduper.open(DedupConfig(), tmp_path / name) for name in ("store1", "store2")]
    try:
        for v in verdicts:
            first, second = (s.store.previous(v["id"]) for s in stores)
            assert first == second and first is not None
    finally:
        for s in stores:
            s.close()


def test_strict_with_workers_judges_every_line_before_the_bad_one(corpus: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(corpus), "--workers", "2", "--strict"]) == 2
    captured = capsys.readouterr()
    assert f"zhdedup: error: {corpus}:18: not JSON" in captured.err
    good_before = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()[:17]]
    assert [json.loads(line)["id"] for line in captured.out.splitlines()] == [d["id"] for d in good_before]
