"""Furniture lines: who wrote, edited or published a text, not what it says.

Reposts carry the publisher's lines around the same text (来源：某报, 责任编辑：某人, 原标题：…, a
特别声明 disclaimer, ——选自《某书》), and different texts carry the same ones.  Compared as text, such
lines make two copies of one short quote look different and two different quotes look alike.  So the
near-repeat features (fingerprint, sketch, passages) are computed on the text without them; the
content hash, and so exact repeats, still cover the whole text.

A line is furniture when it starts (after dashes and brackets) with one of the markers below and a
colon, or is a bare 《title》 attribution; a trailing ``——选自《某书》`` or ``（来源：某报）`` on the
last line is cut too.  Only lines of at most ``MAX_LINE`` characters count: a paragraph that happens
to start with 来源： is content.  A text that is mostly such lines is compared whole (more than
``MAX_SHARE`` of it): they are then most of what it says, and a near repeat must still share most
of its text with the earlier one.
"""

from __future__ import annotations

import re
from functools import cache

MAX_LINE = 160
MAX_SHARE = 0.4

_MARKERS = (
    "特别声明|免责声明|版权声明|稿件声明|声明|来源|出处|出自|选自|摘自|转自|引自|转载自|本文来源|文章来源|新闻来源|"
    "信息来源|图片来源|图源|视频来源|本文来自|本文转自|本文转载自|作者|文|编辑|责任编辑|责编|主编|审核|校对|编审|"
    "原标题|原文标题|原文链接|原文地址|本文链接|标签|关键词"
)
_OPEN = r"[\s\-—–－~～(（【\[]*"
_TITLE = r"《[^》\n]{1,40}》"
_BY = r"(?:选自|摘自|出自|转自|引自)"
_LINE = re.compile(rf"{_OPEN}(?:(?:{_MARKERS})\s*[:：]|(?:{_BY}|来源)?\s*{_TITLE}\s*[)）】\]]?\s*$)")
# what a _tail() match ends with before its trailing space: a line ending otherwise is not tried (on a long
# one-line article the search from every position cost ~20 µs; \s and str.rstrip agree on what is space)
_TAIL_ENDS = "》)）】]"


def without_furniture(text: str) -> str:
    """``text`` without its furniture lines; the text itself when they are most of it."""
    lines = text.split("\n")
    kept = [line for line in lines if len(line) > MAX_LINE or not _LINE.match(line)]
    if kept and kept[-1].rstrip()[-1:] in _TAIL_ENDS:
        kept[-1] = _tail().sub("", kept[-1])
    out = "\n".join(kept).strip()
    return out if len(out) >= (1 - MAX_SHARE) * len(text) else text


@cache  # compiled for the first text ending like one (~1.5 ms), not in every start-up
def _tail() -> re.Pattern[str]:
    """A source note ending the last line: ``——选自《某书》``, ``（来源：某报）``."""
    return re.compile(
        rf"(?:[—–－]{{1,2}}\s*{_BY}?\s*{_TITLE}|[(（【\[]\s*(?:{_MARKERS})\s*[:：][^)）】\]\n]{{0,40}}[)）】\]])\s*$")
