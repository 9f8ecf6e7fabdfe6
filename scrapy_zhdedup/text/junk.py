"""What arrives as a document but is none: binary data served as a page, and a page that is only its site's
header, footer, navigation and sidebar.  Judged, either would be stored as a ``unique`` document (and every
other such page of the site as its repeat); refused with :class:`~scrapy_zhdedup.errors.JunkError`, they are
skipped and counted as empty pages are (``zhdedup/skipped/junk``, a skipped line in ``scan`` and ``es ingest``).

Two tests, each where its evidence is (text/clean.py calls them):

* :func:`refuse_binary`, on the cleaned text: decoded binary data keeps its control and undecodable bytes
  (U+FFFD), a third to two thirds of its characters; text keeps almost none.
* :func:`is_chrome`, on a page whose main text was not found outside the blocks marked as boilerplate: an
  element marked as the site's furniture (header, footer, navigation, sidebar…) that holds no paragraph.
  When such elements hold all the text there is (:data:`ONLY_FURNITURE`), the page has no main text.  Blocks
  marked ``info``, ``meta``, ``source`` or ``byline`` are not furniture: some sites put the article in one,
  which is why the extractor looks inside marked blocks when nothing is found outside them.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from ..errors import JunkError

if TYPE_CHECKING:
    from lxml import etree

# C0 and C1 controls that are not whitespace (cleaning removes whitespace ones), and the replacement character
_UNREADABLE = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ufffd]")
BINARY_SHARE = 0.05  # decoded binary data measured 0.10-0.73 (random, gzip, PNG, JPEG, PDF, ELF; 5 encodings)
BINARY_MIN = 10  # and at least this many: a stray NUL or two in a short page is not binary data
PARAGRAPH_CHARS = 60  # a run of text this long is an article's paragraph, never a site's furniture line
ONLY_FURNITURE = "no main text: only the site's header, footer, navigation and sidebar"


def refuse_binary(text: str) -> None:
    """Raise JunkError for decoded binary data: more than BINARY_SHARE of its characters (and BINARY_MIN)
    unreadable."""
    if _UNREADABLE.search(text) is None:  # nearly every text: one pass in C
        return
    unreadable = len(_UNREADABLE.findall(text))
    share = unreadable / max(1, len(text) - text.count(" ") - text.count("\n"))
    if unreadable >= BINARY_MIN and share > BINARY_SHARE:
        raise JunkError(f"binary data, not text: {share:.0%} of its characters are control or undecodable bytes")


def is_chrome(element: etree._Element) -> bool:
    """An element marked as the site's furniture (by its class or id) that holds no paragraph: a page-wide
    ``<div id="top">`` around the article is not furniture, a footer of short lines is."""
    if not marked(element, FURNITURE_WORDS):
        return False
    return all(len("".join(text.split())) < PARAGRAPH_CHARS for text in element.itertext())


# class/id words that mark the site's furniture on Chinese news sites (text/clean.py adds a few for boilerplate)
FURNITURE_WORDS = ("nav|navbar|menu|top|topbar|header|footer|foot|sidebar|side|aside|breadcrumbs?|crumbs?|"
                   "position|location|copyright|share|social|comments?|related|recommend|hot|rank|ad|ads|advert|"
                   "banner|toolbar|login|search|tags?|pager|pagination|friendlink|links")


def marked(element: etree._Element, words: str) -> bool:
    """An element (not ``body`` or ``html``) whose class or id holds one of ``words`` (:func:`class_words`)."""
    if element.tag in ("body", "html"):
        return False
    marks = f"{element.get('class', '')} {element.get('id', '')}"
    return (_names if len(marks) <= CACHED_MARKS else _names.__wrapped__)(words, marks)


CACHED_MARKS = 256  # a longer class/id text (rare, and of any size a page likes) is asked each time, never kept


@lru_cache(maxsize=4096)  # a site's pages repeat their template's few classes: asked once, not on every page
def _names(words: str, marks: str) -> bool:
    return bool(marks.strip()) and class_words(words).search(marks) is not None


@cache  # compiled for the first page that needs it (a few of them), not in every start-up
def class_words(words: str) -> re.Pattern[str]:
    """A class or id naming one of ``words`` (regex alternatives), as a whole word of it."""
    return re.compile(rf"(^|[\s_-])({words})([\s_-]|$)", re.I)
