"""Labelled sets for the recall benchmarks: synthetic reposts, natural duplicates and short texts.

Every set is a list of ``Doc`` in arrival order, each with the ground-truth ``group`` (documents
of one group are the same text to a reader) and a ``kind``. All of them are pure functions of
the corpus and the seed.

- ``synthetic_long``: real articles published as pages of one portal (``corpora.retemplate``,
  cleaned by the engine's extractor), then reposted 0–3 times: re-templated as a page of another
  portal (alone, with 1–3 % edited characters, with a dropped paragraph and punctuation width),
  the single edits of ``corpora.reposts`` on the text, a new headline with a site tag in front,
  and 2–3 edits combined. Look-alikes: two different articles on the same portal's template, and
  the text-boilerplate / announcement pairs of ``reposts.template_lookalike``.
- ``natural``: a whole corpus, clusters from the exact join of ``corpora.truth``.
- ``synthetic_short``: 20–200 character texts with one edited character, an added prefix or
  suffix, changed punctuation, or two of these; originals drawn from texts in no natural cluster.

``build_sets`` makes a corpus's two sets (``corpora.sources`` names the corpora).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from corpora import retemplate, sources, truth
from corpora.corpus import Article
from corpora.reposts import (
    _CJK,
    _COMMON,
    _CONFUSABLE,
    TRANSFORMS,
    apply_combo,
    edit_chars,
    punct_width,
    template_lookalike,
)
from scrapy_zhdedup.errors import EmptyTextError
from scrapy_zhdedup.text.clean import TextCleaner

SEED = 20261122


@dataclass(frozen=True)
class Doc:
    id: str
    text: str
    group: str
    kind: str
    host: str = ""  # the site a page came from, when it was an HTML page
    furniture: float = 0.0  # share of the cleaned page that is site furniture (re-templated pages)


_WS = re.compile(r"\s+")
_NOT_WORD = re.compile(r"[^\w\u3400-\u9fff]+")
_cleaner = TextCleaner()


def clean_or_empty(text: str) -> str:
    try:
        return _cleaner.clean(text=text)
    except EmptyTextError:
        return ""


# --- long synthetic ----------------------------------------------------------------------

_SITE_TAGS = ("bob平台", "新浪财经", "今日头条", "网易号", "百家号", "腾讯网", "凤凰资讯", "澎湃号")


def headline_prefix(title: str, text: str, rng: random.Random) -> str:
    """A new headline and a site tag put in front of the unchanged article."""
    lead = re.split(r"[，。！？\n]", text, maxsplit=1)[0][:18] or title[:18]
    headline = rng.choice((f"{lead}！", f"重磅：{lead}", f"刚刚，{lead}", title[:24] or lead))
    return f"{headline}-{rng.choice(_SITE_TAGS)}\n{text}"


LONG_KINDS = (
    "retemplate", "retemplate+edit_chars", "retemplate+drop+punct", "edit_chars", "drop_paragraph",
    "swap_paragraphs", "punct_width", "truncate", "traditional", "headline_prefix", "combo",
)
_COUNTS, _WEIGHTS = (0, 1, 2, 3), (25, 35, 25, 15)


def _page(portal: retemplate.Portal, title: str, text: str, rng: random.Random) -> tuple[str, float]:
    clean = retemplate.extract(retemplate.render(portal, title, text, rng))
    return clean, retemplate.furniture_share(clean, f"{title}\n{text}")


def _long_repost(kind: str, article: Article, home: int, rng: random.Random) -> tuple[str, str, float]:
    """(text, host, furniture share) of one repost of ``article`` first published on portal ``home``."""
    others = [p for i, p in enumerate(retemplate.PORTALS) if i != home]
    if kind.startswith("retemplate"):
        text = article.text
        if kind == "retemplate+edit_chars":
            text = edit_chars(text, rng)
        elif kind == "retemplate+drop+punct":
            text = punct_width(TRANSFORMS["drop_paragraph"](text, rng), rng)
        portal = rng.choice(others)
        clean, share = _page(portal, article.title, text, rng)
        return clean, portal.host, share
    if kind == "headline_prefix":
        return headline_prefix(article.title, article.text, rng), "", 0.0
    if kind == "combo":
        return apply_combo(article.text, rng)[0], "", 0.0
    return TRANSFORMS[kind](article.text, rng), "", 0.0


def synthetic_long(bases: Sequence[Article], n_base: int, lookalike_pairs: int, seed: int = SEED,
                   prefix: str = "syn") -> list[Doc]:
    """Originals (as portal pages), their reposts, and look-alike pairs, in a seeded order."""
    if len(bases) < n_base + 4 * lookalike_pairs:
        raise ValueError(f"need {n_base + 4 * lookalike_pairs} base articles, got {len(bases)}")
    plan = random.Random(f"{seed}:{prefix}")
    keyed: list[tuple[float, Doc]] = []
    for article in bases[:n_base]:
        home = plan.randrange(len(retemplate.PORTALS))
        portal = retemplate.PORTALS[home]
        rng = random.Random(f"{seed}:{article.id}")
        clean, share = _page(portal, article.title, article.text, rng)
        start = plan.random()
        keyed.append((start, Doc("", clean, article.id, "original", portal.host, share)))
        for kind in plan.sample(LONG_KINDS, plan.choices(_COUNTS, _WEIGHTS)[0]):
            try:
                text, host, share = _long_repost(kind, article, home, random.Random(f"{seed}:{article.id}:{kind}"))
            except ValueError:  # an edit that does not apply to this text
                continue
            keyed.append((start + (1 - start) * plan.random(), Doc("", text, article.id, kind, host, share)))
    spare = bases[n_base:]
    for k in range(lookalike_pairs):
        a, b = spare[4 * k], spare[4 * k + 1]  # same portal template, different articles
        portal = retemplate.PORTALS[k % len(retemplate.PORTALS)]
        rng = random.Random(f"{seed}:lookalike-page:{k}")
        for n, article in enumerate((a, b)):
            clean, share = _page(portal, article.title, article.text, rng)
            keyed.append((plan.random(), Doc("", clean, f"lookalike-page-{k}-{n}", "lookalike_page", portal.host, share)))
        c, d = spare[4 * k + 2], spare[4 * k + 3]  # text boilerplate or announcement template
        text_c, text_d = template_lookalike(c.text, d.text, random.Random(f"{seed}:lookalike:{k}"))
        keyed.append((plan.random(), Doc("", text_c, f"lookalike-text-{k}-0", "lookalike_text")))
        keyed.append((plan.random(), Doc("", text_d, f"lookalike-text-{k}-1", "lookalike_text")))
    keyed.sort(key=lambda kd: kd[0])
    return [Doc(f"{prefix}-{i:06d}", d.text, d.group, d.kind, d.host, d.furniture) for i, (_, d) in enumerate(keyed)]


# --- natural -----------------------------------------------------------------------------


def natural(texts: Sequence[str], prefix: str, min_chars: int = 1) -> tuple[list[Doc], list[truth.Pair]]:
    """The corpus in its own order, texts of at least ``min_chars`` cleaned characters, grouped by
    the exact duplicate join (on cleaned text, spacing removed)."""
    cleaned = [c for c in (clean_or_empty(t) for t in texts) if len(c) >= min_chars]
    pairs = truth.duplicate_pairs([_WS.sub("", c) for c in cleaned])
    labels = truth.clusters(len(cleaned), pairs)
    sizes = truth.cluster_sizes(labels)
    docs = [Doc(f"{prefix}-{i:06d}", c, f"{prefix}-g{labels[i]:06d}",
                "natural" if sizes[labels[i]] > 1 else "original") for i, c in enumerate(cleaned)]
    return docs, pairs


def word_groups(docs: Sequence[Doc]) -> list[int]:
    """The same join on word characters only (punctuation removed too, as the engine compares texts):
    "性价比很高。" and "性价比很高" share no 5-gram with the marks kept, and are one text to a reader."""
    return truth.clusters(len(docs), truth.duplicate_pairs([_NOT_WORD.sub("", d.text) for d in docs]))


# --- short synthetic ---------------------------------------------------------------------

_PREFIXES = ("转：", "//@新闻早知道: 转发微博 ", "#今日热点# ", "【转】", "分享：", "刚看到：")
_SUFFIXES = (" 网页链接", "（来源：新浪微博）", " @头条君", "，推荐！", " 转自某论坛", "（完）")
_PUNCT = re.compile(r"[，。！？、；：,.!?;:]")


def one_char_edit(text: str, rng: random.Random) -> str:
    """Replace, insert or delete exactly one CJK character."""
    spots = [m.start() for m in _CJK.finditer(text)]
    if not spots:
        raise ValueError("no CJK character to edit")
    i, op = rng.choice(spots), rng.choice("rrid")
    if op == "r":
        return text[:i] + rng.choice(_CONFUSABLE.get(text[i]) or _COMMON.replace(text[i], "")) + text[i + 1:]
    if op == "i":
        return text[:i] + rng.choice(_COMMON) + text[i:]
    return text[:i] + text[i + 1:]


def add_prefix(text: str, rng: random.Random) -> str:
    return rng.choice(_PREFIXES) + text


def add_suffix(text: str, rng: random.Random) -> str:
    return text + rng.choice(_SUFFIXES)


def change_punct(text: str, rng: random.Random) -> str:
    """Width flip, or punctuation replaced by spaces / other marks (as a forum or IM client does)."""
    if rng.random() < 0.5:
        return punct_width(text, rng)
    out = _PUNCT.sub(lambda m: rng.choice((" ", "，", "～", "!!", "")), text)
    if out == text:
        raise ValueError("no punctuation to change")
    return out


SHORT_EDITS: dict[str, Callable[[str, random.Random], str]] = {
    "one_char": one_char_edit, "prefix": add_prefix, "suffix": add_suffix, "punct": change_punct,
}
SHORT_KINDS = (*SHORT_EDITS, "short_combo")


def _short_repost(kind: str, text: str, rng: random.Random) -> str:
    if kind == "short_combo":
        first, second = rng.sample(list(SHORT_EDITS), 2)
        return SHORT_EDITS[second](SHORT_EDITS[first](text, rng), rng)
    return SHORT_EDITS[kind](text, rng)


def synthetic_short(texts: Sequence[str], n_base: int, seed: int = SEED, prefix: str = "short",
                    min_chars: int = 20, max_chars: int = 200) -> list[Doc]:
    """``n_base`` distinct short originals (no natural duplicate of each other) and 0–3 reposts each."""
    plan = random.Random(f"{seed}:{prefix}")
    pool = sorted({t for t in texts if min_chars <= len(t) <= max_chars})
    plan.shuffle(pool)
    pool = pool[: 3 * n_base]
    labels = truth.clusters(len(pool), truth.duplicate_pairs([_WS.sub("", t) for t in pool]))
    distinct = _singletons(pool, labels)[:n_base]
    keyed: list[tuple[float, Doc]] = []
    for n, text in enumerate(distinct):
        group = f"{prefix}-g{n:05d}"
        start = plan.random()
        keyed.append((start, Doc("", text, group, "original")))
        for kind in plan.sample(SHORT_KINDS, plan.choices(_COUNTS, _WEIGHTS)[0]):
            try:
                out = _short_repost(kind, text, random.Random(f"{seed}:{group}:{kind}"))
            except ValueError:
                continue
            keyed.append((start + (1 - start) * plan.random(), Doc("", out, group, kind)))
    keyed.sort(key=lambda kd: kd[0])
    return [Doc(f"{prefix}-{i:06d}", d.text, d.group, d.kind) for i, (_, d) in enumerate(keyed)]


def _singletons(items: Sequence[str], labels: list[int]) -> list[str]:
    sizes = truth.cluster_sizes(labels)
    return [t for t, label in zip(items, labels) if sizes[label] == 1]


# --- a corpus's sets -----------------------------------------------------------------------


def build_sets(corpus: str, n_base: int, lookalike_pairs: int, seed: int = SEED) -> dict[str, tuple[list[Doc], list[truth.Pair]]]:
    """``synthetic`` and ``natural`` of one corpus, each with the true pairs of its natural join (none for
    synthetic sets, whose groups are how each repost was made)."""
    if corpus in sources.LONG_CORPORA:
        articles = sources.long_corpus(corpus)
        pool = [a for a in articles if 300 <= len(a.text) <= 5000]
        natural_docs, pairs = natural([a.text for a in articles], f"{corpus}-nat")
        # synthetic originals must not be natural duplicates of each other
        clustered = {d.text for d in natural_docs if d.kind == "natural"}
        pool = [a for a in pool if clean_or_empty(a.text) not in clustered]
        random.Random(f"{seed}:{corpus}").shuffle(pool)
        synthetic = synthetic_long(pool, n_base, lookalike_pairs, seed, f"{corpus}-syn")
        return {"synthetic": (synthetic, []), "natural": (natural_docs, pairs)}
    texts = sources.short_corpus(corpus)
    synthetic = synthetic_short(texts, n_base, seed, f"{corpus}-syn")
    natural_docs, pairs = natural(list(texts), f"{corpus}-nat")
    return {"synthetic": (synthetic, []), "natural": (natural_docs, pairs)}
