"""HTML → main text → normalised text: the form in which reposts of one story look alike.

Reposting changes the page around an article (header, navigation, sidebars, footer,
scripts) and its surface (full-/half-width forms, spacing, traditional characters).
Cleaning removes the first, normalisation the second, before anything is hashed.
The main text is also kept as the page wrote it (:class:`Cleaned`): that is what is stored and
shown, in its readers' script; the normalised form exists only in what is compared and searched.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from collections.abc import Callable
from functools import cache, cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # imported where a page is read: plain text needs none of them (~0.1 s of a start-up, issue 40)
    from lxml import etree

from ..config import Extractor
from ..errors import ConfigError, EmptyTextError, JunkError
from . import junk
from .t2s import convertible

# Elements that never hold the article body.
_DROP_TAGS = (
    "script", "style", "noscript", "template", "iframe", "svg", "canvas", "form", "button",
    "select", "input", "textarea", "nav", "header", "footer", "aside", "menu", "head",
)
_BLOCKS = {"p", "div", "section", "article", "li", "h1", "h2", "h3", "h4", "h5", "h6",
           "td", "tr", "br", "blockquote", "pre", "table", "ul", "ol", "dd", "dt"}
_TEXT_BLOCKS = tuple(sorted(_BLOCKS - {"br"} | {"body"}))  # the elements that may be a line of the text, by tag
# A class spanning the CJK block costs re.compile a Python step per code point (~4 ms of every start-up, issue 40):
# such patterns are compiled where first needed (functions below), behind a \w test that settles nearly every text.
_WORD = re.compile(r"\w")
_TWENTY_WORDS = re.compile(r"(?:\W*\w){20}")
_INVISIBLE_CHARS = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
_INVISIBLE = re.compile(f"[{_INVISIBLE_CHARS}]")  # a regex: str.translate took 14x longer
# What NFKC changes in Chinese text is nearly always full-width ASCII, the ideographic space and "…".
# Replacing those with their NFKC forms directly, then checking, costs half of NFKC over the whole text.
_WIDE = re.compile("[\uff01-\uff5e\u3000\u2026]+")
_WIDE_NFKC: dict[int, int | str] = {**{c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}, 0x3000: 0x20, 0x2026: "..."}
# Nine in ten of those are these punctuation marks (the full-width comma alone 86 %, 3,000 news texts):
# one str.replace each is a single C pass, where the regex calls back into Python for every comma.
_FREQUENT_WIDE = tuple((c, chr(ord(c) - 0xFEE0)) for c in "，：；！？（）")


def decode_html(body: bytes, encoding: str | None = None) -> str:
    """Bytes to str the way a browser would: BOM, then the declared header charset, then <meta>.

    Without any declaration: UTF-8 if it decodes strictly, else whichever of GB18030 (a
    superset of GBK/GB2312) and Big5 charset-normalizer finds more plausible.  w3lib maps the
    gb2312/gbk labels to gb18030, which also decodes pages mislabelled as gb2312.
    """
    import charset_normalizer
    from w3lib.encoding import html_to_unicode

    content_type = f"text/html; charset={encoding}" if encoding else None

    def guess(data: bytes) -> str | None:
        try:
            data.decode("utf-8")
            return "utf-8"
        except UnicodeDecodeError:
            pass
        # GB18030 accepts most Big5 byte strings too, so pick by which decoding reads as language.
        best = charset_normalizer.from_bytes(data[:65536], cp_isolation=["gb18030", "big5"], threshold=1.0).best()
        return best.encoding if best else None

    _, text = html_to_unicode(content_type, body, auto_detect_fun=guess)
    return text


class Cleaned(NamedTuple):
    """A document's main text twice."""

    written: str  # as the page wrote it (script, width, punctuation), spacing and invisible characters cleaned
    normal: str  # normalised: what is hashed, fingerprinted and segmented for search


class TextCleaner:
    """Turns a page or a plain text into its main text, as written and normalised."""

    def __init__(
        self,
        *,
        extractor: Extractor = "lxml",
        traditional_to_simplified: bool = True,
    ) -> None:
        if extractor not in ("lxml", "trafilatura"):
            raise ConfigError(f"unknown extractor {extractor!r}: use 'lxml' or 'trafilatura'")
        self.extractor = extractor
        # Imported here, not per page, so a missing optional install fails when the crawl starts.
        self._trafilatura = _import_trafilatura() if extractor == "trafilatura" else None
        self.traditional_to_simplified = traditional_to_simplified

    @cached_property
    def _opencc(self) -> Any:  # opencc ships no types
        import opencc

        return opencc.OpenCC("t2s")

    @cached_property
    def _t2s_changes(self) -> Callable[[str], bool]:
        """False for a text the conversion leaves as it is (most simplified texts), which then skips it (t2s.py)."""
        return convertible(Path(self._opencc.config))

    def clean(self, *, text: str | None = None, html: str | bytes | None = None,
              encoding: str | None = None) -> str:
        """Normalised main text; raises :class:`EmptyTextError` if nothing judgeable is left.  The written form
        is not made: only what stores the text needs it (~9 µs a news text; ``zhdedup scan`` stores none)."""
        return self._judgeable(self.normalise(self._main_text(text, html, encoding)))

    def cleaned(self, *, text: str | None = None, html: str | bytes | None = None,
                encoding: str | None = None) -> Cleaned:
        """Main text as written and normalised; raises :class:`EmptyTextError` if nothing judgeable is left.
        The normalised form is made from the extracted text, not from the written one, so it is exactly
        what was hashed before the written form was kept (~0.015 ms more per news text)."""
        raw = self._main_text(text, html, encoding)
        out = self._judgeable(self.normalise(raw))
        return Cleaned(_collapse_spaces(_without_invisible(raw)), out)

    def _main_text(self, text: str | None, html: str | bytes | None, encoding: str | None) -> str:
        """The page's main text (the page wins over a text given with it), or the text; neither is an error."""
        if text is None and html is None:
            raise EmptyTextError("neither text nor html given")
        if html is not None:
            if isinstance(html, bytes):
                html = decode_html(html, encoding)
            return self.extract(html)
        return text if isinstance(text, str) else str(text)

    @staticmethod
    def _judgeable(normal: str) -> str:
        """``normal``, unless nothing judgeable is left (EmptyTextError) or it is binary data (JunkError)."""
        if not (_WORD.search(normal) or _wordlike().search(normal)):
            raise EmptyTextError("no words or Chinese characters left after cleaning")
        junk.refuse_binary(normal)
        return normal

    def extract(self, html: str) -> str:
        """Main text of a page. Broken HTML is repaired by the parser, never rejected."""
        if not html.strip():
            return ""
        if self._trafilatura is not None:
            extracted = self._trafilatura.extract(html, include_comments=False, include_tables=False,
                                                  favor_recall=True)
            if extracted:
                return extracted
        return _lxml_main_text(html)

    def normalise(self, text: str) -> str:
        """NFKC (width forms), invisible characters, spacing, and optionally traditional → simplified."""
        if not unicodedata.is_normalized("NFKC", text):  # the check is much cheaper than the rewrite
            narrow = text
            for wide, ascii_form in _FREQUENT_WIDE:
                narrow = narrow.replace(wide, ascii_form)
            # The replacements are NFKC's own, so a result NFKC leaves alone is NFKC of the text: after the
            # frequent ones alone for 84 % of news texts, which then skip the regex pass (~20 µs of ~25).
            normal = unicodedata.is_normalized("NFKC", narrow)
            if not normal:
                narrow = _WIDE.sub(_narrowed, narrow)
                normal = unicodedata.is_normalized("NFKC", narrow)
            text = narrow if normal else _nfkc_by_line(narrow)
        text = _without_invisible(text)
        if self.traditional_to_simplified and self._t2s_changes(text) and _cjk().search(text):
            text = self._opencc.convert(text)
        return _collapse_spaces(text)


def _nfkc_by_line(text: str) -> str:
    """NFKC of ``text``, normalising only the lines it changes (a line holding ℃ or ①, say: 3 % of news texts,
    which cost ~130 µs normalised whole).  A line break composes with nothing on either side and nothing
    normalises to one, so each line's normal form is its own; and ``text`` here has the wide forms replaced by
    their NFKC forms already, which leaves NFKC's result as it was (their decompositions are the same)."""
    return "\n".join(line if unicodedata.is_normalized("NFKC", line) else unicodedata.normalize("NFKC", line)
                     for line in text.split("\n"))


def _collapse_spaces(text: str) -> str:
    """Each run of spaces to one space, each run of whitespace holding line breaks to one line break,
    none at either end.  str.split() and regular expressions' \\s agree on what is whitespace; splitting
    is a few C passes where the two substitutions it replaced scanned every character in the regex
    engine (0.048 vs 0.009 ms on a news text)."""
    return "\n".join(line for line in (" ".join(part.split()) for part in text.split("\n")) if line)


def _without_invisible(text: str) -> str:
    """Nearly every text holds none: a substring search per character finds that in half a regex pass."""
    return _INVISIBLE.sub("", text) if any(c in text for c in _INVISIBLE_CHARS) else text


def _narrowed(wide: re.Match[str]) -> str:
    return wide.group().translate(_WIDE_NFKC)


def _import_trafilatura() -> ModuleType:
    """trafilatura is an optional install (its dependencies weigh ~50 MB); say which extra brings it."""
    try:
        import trafilatura
    except ImportError as exc:
        raise ImportError(
            'the "trafilatura" extractor (ZHDEDUP_EXTRACTOR / --extractor) needs trafilatura, '
            'which is not installed: pip install "scrapy-zhdedup[trafilatura]"',
            name="trafilatura",
        ) from exc
    return trafilatura


def _lxml_main_text(html: str) -> str:
    """Paragraph-like blocks with little linked text, outside boilerplate tags and classes.

    If dropping the blocks whose class/id looks like boilerplate leaves (almost) nothing, the
    page put its article inside such a block (class="info", say): judge it without that rule
    rather than as an empty text, unless the site's furniture holds all its text (junk.py).
    """
    text = _lxml_blocks(html, _marked)
    if _few_words(text):
        text = _lxml_blocks(html, None)
        if not _few_words(text) and _few_words(_lxml_blocks(html, junk.is_chrome)):
            raise JunkError(junk.ONLY_FURNITURE)
    return text


def _few_words(text: str) -> bool:
    """Fewer than 20 word characters (:func:`_wordlike`); 20 of \\w, found by one match, settle most texts."""
    return _TWENTY_WORDS.match(text) is None and next(itertools.islice(_wordlike().finditer(text), 19, None), None) is None


@cache
def _wordlike() -> re.Pattern[str]:
    """A word character: \\w, or a CJK one (\\w leaves out a few symbols of U+3400–U+9FFF)."""
    return re.compile(r"[\w\u3400-\u9fff]")


@cache
def _cjk() -> re.Pattern[str]:
    """A CJK character (unified and compatibility ideographs): only such a text is converted to simplified."""
    return re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


# class/id words that mark boilerplate blocks: the site's furniture, and blocks that may hold the article
_BOILERPLATE_WORDS = f"{junk.FURNITURE_WORDS}|byline|info|meta|source"


def _marked(el: etree._Element) -> bool:
    """A block whose class or id looks like boilerplate."""
    return junk.marked(el, _BOILERPLATE_WORDS)


def _parse(html: str) -> etree._Element | None:
    """The page's root; None for an empty document.  lxml.etree's own HTML parser, not lxml.html's, whose
    element classes are chosen by a Python callback for every element touched (15 % of extraction).  The page
    goes in as UTF-8: lxml hands a str to libxml2 as UTF-16 or UCS-4 to convert, slower than Python's encoder
    (issue 40), and a str declaring its encoding (``<?xml … encoding=…?>``) it refuses."""
    from lxml import etree

    return etree.fromstring(html.encode("utf-8", "replace"), _parser())


@cache
def _parser() -> etree.HTMLParser:
    """No table of the ids (nothing here looks one up), and no comment nodes: stripping them after parsing
    left the same text, at a cost of its own."""
    from lxml import etree

    return etree.HTMLParser(encoding="utf-8", collect_ids=False, remove_comments=True)


def _drop_tree(el: etree._Element) -> None:
    """Remove ``el`` and its descendants, keeping its tail text in place (lxml.html's drop_tree)."""
    parent = el.getparent()
    assert parent is not None
    if el.tail:
        previous = el.getprevious()
        if previous is None:
            parent.text = (parent.text or "") + el.tail
        else:
            previous.tail = (previous.tail or "") + el.tail
    parent.remove(el)


def _text_content(el: etree._Element) -> str:
    return "".join(el.itertext())


def _lxml_blocks(html: str, drop: Callable[[etree._Element], bool] | None) -> str:
    """The text blocks of the page without the non-content tags and the elements ``drop`` names (asked
    only about elements with a class or an id), those with as much linked text as the rest left out."""
    from lxml import etree

    try:
        root = _parse(html)
    except etree.ParserError:
        return ""
    if root is None:
        return ""
    etree.strip_elements(root, *_DROP_TAGS, with_tail=False)
    if drop is not None:  # the elements with a class or an id: two lookups each cost less than an XPath's test
        for el in [el for el in root.iter(etree.Element)
                   if (el.get("class") is not None or el.get("id") is not None) and drop(el)]:
            if el.getparent() is not None:  # not dropped already with an ancestor
                _drop_tree(el)
    lines: list[str] = []
    for block in root.iter(*_TEXT_BLOCKS):
        if not len(block):  # most paragraphs: nothing inside but their text, and so no link
            text = (block.text or "").strip()
            if text:
                lines.append(text)
        elif _carries_text(block):
            text = _block_text(block)
            if text and 2 * _linked_chars(block) < len(text):
                lines.append(text)
    return "\n".join(lines)


def _carries_text(el: etree._Element) -> bool:
    """A block that carries text directly: its own text, a child's tail, or an inline child's text."""
    text = el.text  # each read of .text or .tail decodes it again
    if text and not text.isspace():  # what strip() leaves something of, without the copy
        return True
    for child in el:  # a loop, not any() of a generator: a wrapper block has dozens of children
        tail = child.tail
        if tail and not tail.isspace():
            return True
    return any(isinstance(child.tag, str) and child.tag not in _BLOCKS and _text_content(child).strip() for child in el)


def _block_text(el: etree._Element) -> str:
    """Text of ``el`` without the text of nested blocks (those are blocks of their own)."""
    return _inline_text(el, top=True).strip()


def _inline_text(el: etree._Element, top: bool = False) -> str:
    if not top and el.tag in _BLOCKS:
        return "\n" if el.tag == "br" else ""
    parts = [el.text or ""]
    for child in el:
        if isinstance(child.tag, str):
            parts.append(_inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _linked_chars(el: etree._Element) -> int:
    """Characters of the text of the links in ``el`` (of a link in a link twice)."""
    return sum(len(_text_content(a)) for a in el.iter("a"))


def content_hash(clean: str) -> str:
    """Strong 128-bit hash of the text with all whitespace removed (layout is not content)."""
    return hashlib.blake2b("".join(clean.split()).encode("utf-8"), digest_size=16).hexdigest()
