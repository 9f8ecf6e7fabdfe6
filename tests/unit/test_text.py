"""HTML → main text → normalised text, on real Chinese news pages and on bad input."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.errors import EmptyTextError
from scrapy_zhdedup.text import clean as clean_module
from scrapy_zhdedup.text.clean import TextCleaner, content_hash, decode_html
from scrapy_zhdedup.text.furniture import without_furniture
from tests.support import zhtexts
from tests.support.zhtexts import CHROME_MARKERS, news_page

ARTICLES = zhtexts.articles(40)
# Pages served in GBK and, converted to Taiwan forms, in Big5.
ENCODABLE = zhtexts.articles(60, encodings=("gbk", "big5"))


@pytest.fixture(scope="module")
def cleaner() -> TextCleaner:
    return TextCleaner()


def _same_content(a: str, b: str) -> bool:
    return content_hash(a) == content_hash(b)


def _leaked_chrome(out: str, article: zhtexts.Article) -> list[str]:
    """Page-chrome strings in the output that the article itself does not contain."""
    return [m for m in CHROME_MARKERS if m in out and m not in article.title + article.text]


# --- main-text extraction ---------------------------------------------------------------------------


@pytest.mark.parametrize("site", ["xinwen", "caijing"])
def test_lxml_keeps_the_article_and_drops_the_page_chrome(cleaner: TextCleaner, site: str) -> None:
    for article in ARTICLES:
        out = cleaner.clean(html=news_page(article.title, article.text, site=site))
        assert not _leaked_chrome(out, article), article.id
        assert _same_content(out, cleaner.clean(text=f"{article.title}\n{article.text}")), article.id


def test_one_article_in_two_site_templates_cleans_to_the_same_text(cleaner: TextCleaner) -> None:
    for article in ENCODABLE:
        a = cleaner.clean(html=news_page(article.title, article.text, site="xinwen"))
        b = cleaner.clean(html=news_page(article.title, article.text, site="caijing", charset="gbk").encode("gbk"))
        assert _same_content(a, b), article.id


def test_trafilatura_extractor_on_a_news_page() -> None:
    cleaner = TextCleaner(extractor="trafilatura")
    plain = TextCleaner()
    for article in ARTICLES[:12]:
        out = cleaner.clean(html=news_page(article.title, article.text))
        assert not _leaked_chrome(out, article), article.id
        sentences = zhtexts.paragraphs(plain.clean(text=article.text), per=1)
        kept = sum(re.sub(r"\s", "", s) in re.sub(r"\s", "", out) for s in sentences)
        assert kept >= 0.9 * len(sentences), article.id


def test_unknown_extractor_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown extractor"):
        TextCleaner(extractor="readability")  # type: ignore[arg-type]  # a wrong value on purpose


def test_non_content_elements_are_dropped(cleaner: TextCleaner) -> None:
    page = """<html><head><title>页面标题不算正文</title><style>p{color:red} /* 样式里的中文 */</style></head><body>
    <script>document.write("脚本里的中文");</script><noscript>请开启脚本功能</noscript>
    <template><p>模板里的中文</p></template><iframe src="/ad">内嵌框架里的中文</iframe>
    <svg><text>矢量图里的中文</text></svg><form><p>表单里的中文</p><textarea>输入框里的中文</textarea></form>
    <header>网站页头</header><nav>网站导航栏</nav><menu><li>菜单项目</li></menu>
    <div id="sidebar">侧边栏的文字</div><div class="hot-rank">热门排行的文字</div><div class="ad">广告位的文字</div>
    <div class="comments">网友评论的文字</div><div class="copyright">版权声明的文字</div>
    <!-- 注释里的中文 -->
    <article><p>全国铁路今天迎来春运返程客流高峰，预计发送旅客一千二百万人次。</p>
    <p>铁路部门加开临时旅客列车四百余列，并延长部分车站售票窗口的营业时间。</p></article>
    <ul><li><a href="/1">链接列表的标题一</a></li><li><a href="/2">链接列表的标题二</a></li></ul>
    <aside>相关推荐的文字</aside><footer>网站页脚</footer></body></html>"""
    out = cleaner.clean(html=page)
    assert out == ("全国铁路今天迎来春运返程客流高峰,预计发送旅客一千二百万人次。\n"
                   "铁路部门加开临时旅客列车四百余列,并延长部分车站售票窗口的营业时间。")


def test_breadcrumb_class_crumbs_is_boilerplate(cleaner: TextCleaner) -> None:
    """``class="crumbs"`` is as common as ``breadcrumb``; its 当前位置 line is chrome, not content."""
    article = ARTICLES[0]
    page = news_page(article.title, article.text).replace('class="breadcrumb"', 'class="crumbs"')
    assert "当前位置" not in cleaner.clean(html=page)


def test_paragraph_with_links_is_kept_link_list_is_not(cleaner: TextCleaner) -> None:
    page = """<div><p>据<a href="/x">新华社</a>报道，国家统计局今天发布数据，一季度国内生产总值同比增长百分之六点四。</p>
    <div><a href="/a">国内生产总值同比增长</a> <a href="/b">统计局发布数据</a></div></div>"""
    assert cleaner.clean(html=page) == "据新华社报道,国家统计局今天发布数据,一季度国内生产总值同比增长百分之六点四。"


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("<p>未闭合的段落<p>第二段<div>第三段的文字", "未闭合的段落\n第二段\n第三段的文字"),
        ("<p>未闭合<div>第二<span>内联</p></div></div></body><p>尾巴段落</p>", "未闭合\n第二内联\n尾巴段落"),
        ("<html><body><p>注释之前的正文<!-- 从未关闭的注释 <p>注释里的文字</p>", "注释之前的正文"),
        ("<html><body><div><p>截断的页面正文内容在这里<a href=\"/x", "截断的页面正文内容在这里"),
        ("<table><tr><td>单元格一的文字<td>单元格二的文字</table>", "单元格一的文字\n单元格二的文字"),
        ("<div><p>段落一<br>换行后的文字<br/>再换一行</p></div>", "段落一\n换行后的文字\n再换一行"),
        ('<?xml version="1.0" encoding="gbk"?><html><body><p>带编码声明的字符串页面</p></body></html>',
         "带编码声明的字符串页面"),
        ("<p>实体&nbsp;与&amp;符号&#x4e2d;&#25991;</p>", "实体 与&符号中文"),
    ],
    ids=["unclosed-p", "misnested", "unclosed-comment", "truncated-tag", "unclosed-td", "br", "xml-declaration",
         "entities"],
)
def test_broken_html_is_repaired_not_rejected(cleaner: TextCleaner, page: str, expected: str) -> None:
    assert cleaner.clean(html=page) == expected


def test_nul_byte_in_page(cleaner: TextCleaner) -> None:
    assert "含有空字节的页面正文" in cleaner.clean(html="\x00<p>含有空字节的页面正文</p>")


def test_real_article_with_unclosed_tags(cleaner: TextCleaner) -> None:
    article = ARTICLES[1]
    page = "<html><body><div class='article'>" + "".join(f"<p>{p}" for p in zhtexts.paragraphs(article.text))
    assert _same_content(cleaner.clean(html=page), cleaner.clean(text=article.text))


@pytest.mark.parametrize(
    "page",
    [
        "<html><body>国家统计局今天发布数据，一季度国内生产总值同比增长百分之六点四。</body></html>",
        "国家统计局今天发布数据，一季度国内生产总值同比增长百分之六点四。",
        "<body><span>国家统计局今天发布数据</span>，一季度国内生产总值同比增长。</body>",
    ],
    ids=["body", "fragment", "inline"],
)
def test_text_directly_in_body_is_kept(cleaner: TextCleaner, page: str) -> None:
    """Minimal pages (and an html field holding a bare fragment) carry their text outside any block."""
    assert "国家统计局今天发布数据" in cleaner.clean(html=page)


# --- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", "   ", "\n\t\u3000\n", "\u200b\ufeff", "，。！？……——《》【】", "!!! ??? ..."],
    ids=["empty", "spaces", "mixed-space", "invisible", "cjk-punctuation", "ascii-punctuation"],
)
def test_nothing_judgeable_in_text_is_empty_text_error(cleaner: TextCleaner, text: str) -> None:
    with pytest.raises(EmptyTextError):
        cleaner.clean(text=text)


@pytest.mark.parametrize(
    "page",
    ["", "   ", "<html></html>", "<html><head><title>只有标题</title></head><body></body></html>",
     "<div><script>var 脚本 = 1;</script><style>.a{}</style></div>", "<p>，。！？</p>", b"", b"\xef\xbb\xbf"],
    ids=["empty", "spaces", "no-body", "title-only", "script-style", "punctuation", "no-bytes", "bom-only"],
)
def test_markup_only_page_is_empty_text_error(cleaner: TextCleaner, page: str | bytes) -> None:
    with pytest.raises(EmptyTextError):
        cleaner.clean(html=page)


def test_neither_text_nor_html_is_empty_text_error(cleaner: TextCleaner) -> None:
    with pytest.raises(EmptyTextError, match="neither"):
        cleaner.clean()


def test_characters_of_the_cjk_block_that_are_not_word_characters_still_count() -> None:
    """The Yijing hexagrams (U+4DC0–U+4DFF) are no \\w, but in the CJK block cleaning counts as words: the \\w
    shortcuts of text/clean.py must fall back to the whole class for them."""
    hexagrams = "䷀䷁䷂"
    assert not re.search(r"\w", hexagrams)
    assert TextCleaner().clean(text=hexagrams) == hexagrams
    assert not clean_module._few_words("字" * 19 + "䷀")
    assert clean_module._few_words("字，" * 19)
    assert not clean_module._few_words("字，" * 20)


def test_english_text_is_judgeable() -> None:
    english = ("The National Bureau of Statistics said on Wednesday that gross domestic product grew "
               "6.4 percent in the first quarter, unchanged from the previous quarter.")
    deduper = Deduper()
    assert TextCleaner().clean(text=english).startswith("The National Bureau")
    assert deduper.judge("en-1", text=english).status == "unique"
    assert deduper.judge("en-2", text=english).status == "exact"


# --- normalisation ------------------------------------------------------------------------------------


def test_width_forms_fold_to_one_content_hash(cleaner: TextCleaner) -> None:
    for article in ARTICLES:
        full = zhtexts.full_width(article.text)
        half = zhtexts.half_width(article.text)
        assert cleaner.clean(text=full) == cleaner.clean(text=half), article.id


def test_width_folding_by_example(cleaner: TextCleaner) -> None:
    assert cleaner.clean(text="２０１９年ＧＤＰ增长６．４％，（同比）！") == cleaner.clean(text="2019年GDP增长6.4%,(同比)!")
    assert cleaner.clean(text="全角\u3000空格") == "全角 空格"


def test_invisible_characters_and_layout_do_not_change_the_hash(cleaner: TextCleaner) -> None:
    text = ARTICLES[2].text
    noisy = "\u200b" + text.replace("，", "，\u200b").replace("。", "。\n\n  ") + "\u00ad\ufeff"
    assert _same_content(cleaner.clean(text=noisy), cleaner.clean(text=text))
    assert content_hash("北京 今天\n晴") == content_hash("北京今天晴")
    assert content_hash("北京今天晴") != content_hash("北京今天阴")


def test_traditional_is_folded_to_simplified(cleaner: TextCleaner) -> None:
    checked = 0
    for article in ARTICLES:
        if not zhtexts.round_trips_t2s(article.text):
            continue  # 著/着-style pairs: one traditional form for two simplified ones
        trad = zhtexts.traditional(article.text)
        assert trad != article.text
        assert cleaner.clean(text=trad) == cleaner.clean(text=article.text), article.id
        checked += 1
    assert checked >= 20


def test_traditional_folding_can_be_turned_off() -> None:
    keep = TextCleaner(traditional_to_simplified=False)
    article = ARTICLES[3]
    trad = zhtexts.traditional(article.text)
    assert content_hash(keep.clean(text=trad)) != content_hash(keep.clean(text=article.text))
    assert keep.clean(text="經濟發展") == "經濟發展"
    assert TextCleaner().clean(text="經濟發展") == "经济发展"


# --- encodings -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gbk", "gb18030", "big5", "utf-8"])
@pytest.mark.parametrize("declared", [True, False], ids=["meta", "no-meta"])
def test_page_bytes_decode_with_and_without_meta(encoding: str, declared: bool) -> None:
    """Every page decodes to exactly what was encoded; undeclared ones are detected."""
    failures = []
    for article in ENCODABLE:
        page = news_page(article.title, article.text, charset=encoding if declared else None)
        if encoding == "big5":
            page = zhtexts.traditional_tw(page)
        if decode_html(page.encode(encoding)) != page:
            failures.append(article.id)
    assert not failures


def test_gbk_and_big5_pages_clean_like_their_text() -> None:
    cleaner = TextCleaner(traditional_to_simplified=False)
    for article in ENCODABLE[:10]:
        for encoding in ("gbk", "big5"):
            page = news_page(article.title, article.text, charset=None)
            if encoding == "big5":
                page = zhtexts.traditional_tw(page)
            assert cleaner.clean(html=page.encode(encoding)) == cleaner.clean(html=page)


def test_utf8_with_bom(cleaner: TextCleaner) -> None:
    article = ARTICLES[4]
    page = news_page(article.title, article.text, charset=None)
    assert cleaner.clean(html=b"\xef\xbb\xbf" + page.encode("utf-8")) == cleaner.clean(html=page)
    # the BOM wins over a wrong <meta>
    wrong = news_page(article.title, article.text, charset="gbk")
    assert cleaner.clean(html=b"\xef\xbb\xbf" + wrong.encode("utf-8")) == cleaner.clean(html=page)


def test_page_mislabelled_gb2312_with_gbk_only_characters(cleaner: TextCleaner) -> None:
    extra = "朱镕基同志和王喆、李堃一起视察了堃镕公司的工作。"
    with pytest.raises(UnicodeEncodeError):
        extra.encode("gb2312")
    article = ARTICLES[5]
    page = news_page(article.title, extra + article.text, charset="gb2312")
    out = cleaner.clean(html=page.encode("gbk"))
    assert extra.replace("，", ",") in out and "\ufffd" not in out
    # the same label given as an HTTP header charset
    bare = news_page(article.title, extra + article.text, charset=None)
    assert cleaner.clean(html=bare.encode("gbk"), encoding="gb2312") == out


def test_gb18030_four_byte_characters(cleaner: TextCleaner) -> None:
    text = "国家标准GB18030收录了𠀀、𪚥等扩展汉字，以及欧元符号€。" + ARTICLES[6].text
    page = f'<html><head><meta charset="gb18030"></head><body><p>{text}</p></body></html>'
    assert cleaner.clean(html=page.encode("gb18030")) == cleaner.clean(text=text)


def test_http_header_charset_beats_a_wrong_meta(cleaner: TextCleaner) -> None:
    article = ENCODABLE[7]
    page = news_page(article.title, article.text, charset="utf-8")
    assert cleaner.clean(html=page.encode("gbk"), encoding="gbk") == cleaner.clean(html=page)


# --- size -----------------------------------------------------------------------------------------------


def test_huge_page_is_fingerprinted_by_its_prefix_and_hashed_whole() -> None:
    body = "".join(f"<p>{p}</p>\n" for a in ARTICLES for p in zhtexts.paragraphs(a.text))
    repeat = 5_000_000 // len(body.encode("utf-8")) + 1
    page = f'<html><head><meta charset="utf-8"></head><body><div class="article">{body * repeat}</div></body></html>'
    data = page.encode("utf-8")
    assert 5_000_000 < len(data) < 6_000_000
    deduper = Deduper(DedupConfig(max_chars=50_000, features="words"))  # the word SimHash, by its prefix
    whole = deduper.fingerprinter.prepare("big", html=data)
    assert len(whole.clean) > 1_000_000 and whole.clean.startswith(TextCleaner().clean(text=ARTICLES[0].text)[:100])
    prefix = without_furniture(whole.clean[:50_000])  # what near repeats compare (furniture.py)
    fingerprint = deduper.fingerprinter.features(whole.clean).fingerprint
    assert fingerprint == deduper.fingerprinter.hasher(deduper.fingerprinter.featurizer.words(prefix))
    first = deduper.judge("a", text=whole.clean)
    tail_edited = deduper.judge("b", text=whole.clean[:-10] + "结尾这里有所不同。")
    assert first.status == "unique"
    assert tail_edited.status == "near" and tail_edited.distance == 0  # same fingerprint, yet not the same text


def test_width_forms_are_normalised_exactly_as_nfkc() -> None:
    """The shortcut for full-width forms gives NFKC's result, also where NFKC composes across them."""
    cleaner = TextCleaner(traditional_to_simplified=False)
    assert all(unicodedata.normalize("NFKC", chr(c)) == chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F))
    pieces = ["，", "。", "！", "（", "）", "Ａ", "ｚ", "１", "\u3000", "…", "\u0301", "\u0300", "\u3099", "ｶ", "ﾞ",
              "①", "℃", "㎡", "ﬁ", "e", "中", "文", "か", " "]
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        nfkc = unicodedata.normalize("NFKC", text)
        expected = re.sub(r"[^\S\n]+", " ", nfkc).strip()
        assert cleaner.normalise(text) == expected, repr(text)


def test_lines_nfkc_changes_are_normalised_alone_as_in_the_whole_text() -> None:
    """A text whose width forms are not all NFKC's shortcut ones is normalised a line at a time: the same as
    NFKC of the whole text, with marks that compose (accents, kana voicing, Hangul jamo) on either side of
    the line breaks."""
    cleaner = TextCleaner(traditional_to_simplified=False)
    pieces = ["\n", "\n", "，", "Ａ", "\u3000", "…", "\u0301", "\u3099", "ｶ", "ﾞ", "①", "℃", "㎡", "ﬁ", "e", "中",
              "か", " ", "\u1100", "\u1161", "\u11a8", "\u00a8"]
    rng = random.Random(11)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 16)))
        expected = clean_module._collapse_spaces(unicodedata.normalize("NFKC", text))
        assert cleaner.normalise(text) == expected, repr(text)


def test_a_source_note_ending_the_last_line_is_cut_whatever_follows_it_as_space() -> None:
    """The tail rule is tried only on a line ending like a source note (furniture.py): with trailing spaces
    of any kind it still cuts, and a title inside the line, not at its end, stays."""
    body = "这是一篇关于城市交通建设的长篇报道，记者走访了多个街区。" * 4
    for space in ("", " ", "\u3000", "\u2003 ", "\t"):
        assert without_furniture(f"{body}——选自《人民日报》{space}") == body
        assert without_furniture(f"{body}（来源：新华社）{space}") == body
    kept = f"{body}据《人民日报》报道，工程已经完工。"
    assert without_furniture(kept) == kept


def test_a_block_of_only_child_blocks_and_spaces_of_any_kind_is_no_line_of_its_own(cleaner: TextCleaner) -> None:
    """Tails of no-break and ideographic spaces between a wrapper's paragraphs carry no text; a tail of words
    does, and makes the wrapper a line of its own (before its paragraphs, in document order)."""
    texts = [f"第{i}段正文，内容比较长一些。" * 3 for i in range(3)]
    page = "<html><body><div>" + "".join(f"<p>{text}</p>\u3000\u00a0\n" for text in texts) + "</div></body></html>"
    assert cleaner.extract(page).split("\n") == texts
    with_words = page.replace("</p>\u3000", "</p>尾巴文字", 1)
    assert cleaner.extract(with_words).split("\n") == ["尾巴文字", *texts]
