"""The report as one self-contained HTML file: no network, inline CSS and JavaScript (report.html).

Each repeat is shown beside its cluster's original, the text they share highlighted, what only the
repeat has marked as new and what only the original has struck out.  Both reports show the main text
as the page wrote it and compare it as the engine does (:func:`compared`: NFKC, simplified
characters), so a repost in traditional characters shows as the same text, in its own script.
The difference is taken in
two steps so its cost stays near linear in the text: sentences first (difflib on lists of
sentences), then characters only inside the runs of sentences that differ, and only when both
sides of a run are at most ``MAX_CHAR_DIFF`` characters (else the run is marked whole).  difflib
on the characters of a whole text grows with the square of its length: 24 ms at 3,000 characters,
2.3 s at 30,000 (measured on news text, one edited character in 200).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from difflib import SequenceMatcher
from html import escape
from importlib import resources
from pathlib import Path

from .. import __version__
from ..explain import decided
from ..files.output import AtomicOutput
from ..text.clean import TextCleaner
from .findings import Cluster, Doc, Findings, clusters

MAX_SHOWN = 20_000  # characters of a text shown and compared; the rest is left out, said so
MAX_CHAR_DIFF = 2_000  # characters per side of a differing run compared character by character
_SENTENCE = re.compile(r"[^。！？；!?;\n]*[。！？；!?;\n]|[^。！？；!?;\n]+")
BIN = 0.05  # width of a histogram bar

Piece = tuple[str, str]  # ("same" | "new" | "gone", text)
Span = tuple[str, int, int]  # ("same" | "new" | "gone", start, end) in a compared text
Normalise = Callable[[str], str]


def sentences(text: str) -> list[str]:
    """``text`` cut after each sentence end or line break (joined, they are ``text`` again)."""
    return _SENTENCE.findall(text)


def compared(text: str, normalise: Normalise | None) -> tuple[str, list[int]]:
    """``text`` as the engine compares it, and for each of its characters the index in ``text`` of the
    character it came from.  Width forms are narrowed per character (NFKC can lengthen one: "…" is
    "..."); ``normalise`` then runs on the whole, so the traditional-to-simplified conversion sees whole
    phrases, and per character only where it changed the length."""
    if normalise is None:
        return text, list(range(len(text)))
    parts = [ch if unicodedata.is_normalized("NFKC", ch) else unicodedata.normalize("NFKC", ch) for ch in text]
    narrow = "".join(parts)
    whole = normalise(narrow)
    if len(whole) != len(narrow):
        parts = [normalise(part) if part.strip() else part for part in parts]
        whole = "".join(parts)
    return whole, [i for i, part in enumerate(parts) for _ in part]


def diff(original: str, repeat: str, normalise: Normalise | None = None) -> tuple[list[Piece], list[Piece]]:
    """Both texts as pieces: shared (``same``), only in the original (``gone``), only in the repeat
    (``new``); compared as ``normalise`` makes them (:func:`compared`), shown as given."""
    a, a_from = compared(original, normalise)
    b, b_from = compared(repeat, normalise)
    left, right = _spans(a, b)
    return _shown(left, original, a_from), _shown(right, repeat, b_from)


def _spans(a: str, b: str) -> tuple[list[Span], list[Span]]:
    left: list[Span] = []
    right: list[Span] = []
    sa, sb = sentences(a), sentences(b)
    at_a, at_b = _starts(sa), _starts(sb)
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, sa, sb, autojunk=False).get_opcodes():
        x, y = (at_a[i1], at_a[i2]), (at_b[j1], at_b[j2])
        nx, ny = x[1] - x[0], y[1] - y[0]
        if tag == "equal":
            left.append(("same", *x))
            right.append(("same", *y))
        elif nx and ny and nx <= MAX_CHAR_DIFF and ny <= MAX_CHAR_DIFF:
            _chars(a, b, x, y, left, right)
        else:
            left.append(("gone", *x))
            right.append(("new", *y))
    return left, right


def _starts(parts: list[str]) -> list[int]:
    """Where each of ``parts`` starts in their concatenation, and its end."""
    out = [0]
    for part in parts:
        out.append(out[-1] + len(part))
    return out


def _chars(a: str, b: str, x: tuple[int, int], y: tuple[int, int], left: list[Span], right: list[Span]) -> None:
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a[x[0]:x[1]], b[y[0]:y[1]], autojunk=False).get_opcodes():
        kinds = ("same", "same") if tag == "equal" else ("gone", "new")
        left.append((kinds[0], x[0] + i1, x[0] + i2))
        right.append((kinds[1], y[0] + j1, y[0] + j2))


def _shown(spans: list[Span], text: str, came_from: list[int]) -> list[Piece]:
    """The spans of a compared text as pieces of ``text``: a span from compared index i to j shows the
    characters of ``text`` from the one i came from up to the one j came from (so the pieces, joined,
    are ``text``: a character compared as nothing goes with the piece before it)."""
    def at(i: int) -> int:
        return 0 if i == 0 else came_from[i] if i < len(came_from) else len(text)

    return _merged([(kind, text[at(i):at(j)]) for kind, i, j in spans])


def _merged(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for kind, text in pieces:
        if not text:
            continue
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


_TAGS = {"same": ('<mark class="shared">', "</mark>"), "new": ("<ins>", "</ins>"), "gone": ("<del>", "</del>")}


def _pieces_html(pieces: list[Piece]) -> str:
    return "".join(f"{_TAGS[kind][0]}{escape(text)}{_TAGS[kind][1]}" for kind, text in pieces)


def render(findings: Findings, max_clusters: int = 200) -> str:
    """The whole HTML document."""
    groups = clusters(findings.docs)
    shown = groups[:max_clusters]
    t2s = findings.traditional_to_simplified
    normalise = TextCleaner(traditional_to_simplified=t2s).normalise
    body = [
        f"<h1>zhdedup report</h1><p class=\"muted\">{escape(findings.source)} · "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC · scrapy-zhdedup {escape(__version__)} · main texts as "
        f"the pages wrote them, compared as the engine compares them (NFKC{', simplified characters' if t2s else ''})"
        "</p>",
        *(f'<p class="note">{escape(note)}</p>' for note in findings.notes),
        f'<div class="summary">{_totals(findings.docs, groups)}{_histogram(findings.docs)}</div>',
        _filters(len(shown), len(groups)),
        *(_cluster(i, c, findings.texts, normalise) for i, c in enumerate(shown, 1)),
    ]
    if len(groups) > len(shown):
        body.append(f'<p class="note">{len(groups) - len(shown)} smaller clusters are not shown (--max-clusters).</p>')
    template = resources.files(__package__).joinpath("report.html").read_text(encoding="utf-8")
    return template.replace("<!--BODY-->", "\n".join(body))


def _totals(docs: list[Doc], groups: list[Cluster]) -> str:
    statuses = Counter(d.status for d in docs)
    rows = [("judged", len(docs)), ("unique", statuses["unique"]), ("exact repeats", statuses["exact"]),
            ("near repeats", statuses["near"]), ("clusters with repeats", len(groups)),
            ("largest cluster", max((len(g.docs) for g in groups), default=0))]
    cells = "".join(f'<tr><td>{name}</td><td class="n" data-total="{name}">{n:,}</td></tr>' for name, n in rows)
    return f'<div class="card"><h2>Totals</h2><table class="totals">{cells}</table></div>'


def _histogram(docs: list[Doc]) -> str:
    """Bars of the near repeats' similarities by ``BIN``, from the lowest to 1.0, and one of exact repeats."""
    near = [d.similarity for d in docs if d.status == "near" and d.similarity is not None]
    bins = Counter(min(int(s / BIN + 1e-9), int(1 / BIN) - 1) for s in near)
    first = min(bins, default=int(0.6 / BIN))
    bars = [(f"{k * BIN:.2f}", bins[k], "near") for k in range(first, int(1 / BIN))]
    bars.append(("exact", sum(d.status == "exact" for d in docs), "exact"))
    top, width, height = max((n for _, n, _ in bars), default=0) or 1, 34, 120
    svg = []
    for i, (label, n, kind) in enumerate(bars):
        h = round(height * n / top)
        svg.append(f'<rect class="{kind}" x="{i * width + 2}" y="{height - h + 14}" width="{width - 6}" height="{h}">'
                   f"<title>{label}: {n}</title></rect><text x=\"{i * width + 4}\" y=\"{height + 28}\">{label}</text>"
                   f'<text x="{i * width + 4}" y="{height - h + 10}">{n}</text>')
    return (f'<div class="card histogram"><h2>Similarity of the repeats</h2><svg width="{len(bars) * width}" '
            f'height="{height + 34}" role="img" aria-label="similarity histogram">{"".join(svg)}</svg>'
            f'<p class="muted">near repeats by estimated similarity (bars {BIN:.2f} wide), and exact repeats</p>'
            "</div>")


def _filters(shown: int, total: int) -> str:
    boxes = "".join(f'<label><input type="checkbox" name="status" value="{s}" checked> {s} repeats</label>'
                    for s in ("exact", "near"))
    return (f'<form id="filters">{boxes}<label>clusters of at least <input type="number" id="min-size" min="2" '
            f'value="2"> documents</label><span><span id="shown">{shown}</span> of {total} clusters shown</span>'
            '<span class="legend muted"><mark class="shared">shared</mark> <ins>new in the repeat</ins> '
            "<del>only in the original</del></span></form>")


def _cluster(number: int, cluster: Cluster, texts: dict[str, str], normalise: Normalise) -> str:
    original = cluster.original
    earlier = "" if original else ' <span class="muted">(judged before these verdicts)</span>'
    head = (f'<header><h2>#{number} · {len(cluster.docs)} documents</h2><span class="id">original: '
            f"{escape(cluster.root)}</span>{earlier}</header>")
    base = texts.get(cluster.root)
    repeats = [d for d in cluster.docs if d is not original]
    near = [d.doc_id for d in repeats if d.status == "near"][:3]  # shown open; exact repeats add nothing to see
    members = [_member(doc, base, texts.get(doc.doc_id), doc.doc_id in near, normalise) for doc in repeats]
    return (f'<section class="cluster" id="c{number}" data-size="{len(cluster.docs)}">{head}'
            f"{''.join(members)}</section>")


def _member(doc: Doc, base: str | None, text: str | None, opened: bool, normalise: Normalise) -> str:
    why = "same text (content hash)" if doc.status == "exact" else decided(doc.reason, doc.similarity, doc.contained)
    distance = "" if doc.distance is None or doc.status == "exact" else (
        f' <span class="muted">(SimHash distance {doc.distance}: for reference, it decides nothing)</span>')
    dup = f' <span class="muted">dup of</span> <span class="id">{escape(doc.dup_of)}</span>' if doc.dup_of else ""
    summary = (f'<summary><span class="badge {escape(doc.status)}">{escape(doc.status)}</span>'
               f'<span class="id">{escape(doc.doc_id)}</span>{dup}<span class="why">· {escape(why)}</span>'
               f"{distance}</summary>")
    return (f'<details class="member" data-status="{escape(doc.status)}"{" open" if opened else ""}>{summary}'
            f"{_pair(base, text, normalise)}</details>")


def _pair(base: str | None, text: str | None, normalise: Normalise) -> str:
    if base is None or text is None:
        missing = "the original's" if base is None else "this document's"
        return f'<p class="note">No text: {missing} is not in the input.</p>'
    cut = ""
    if max(len(base), len(text)) > MAX_SHOWN:
        cut = f'<p class="note">Only the first {MAX_SHOWN:,} characters of each are shown and compared.</p>'
    left, right = diff(base[:MAX_SHOWN], text[:MAX_SHOWN], normalise)
    return (f'{cut}<div class="pair"><div><h3>original</h3><div class="text">{_pieces_html(left)}</div></div>'
            f'<div><h3>this repeat</h3><div class="text">{_pieces_html(right)}</div></div></div>')


def write(findings: Findings, output: str, max_clusters: int) -> str:
    """Write the report to ``output`` (whole or not at all); the line that says where it is."""
    page = render(findings, max_clusters)
    with AtomicOutput(output) as out:
        out.write(page)
    groups = len(clusters(findings.docs))
    where = Path(output).resolve().as_uri() if output != "-" else "standard output"
    return (f"zhdedup report: {len(findings.docs)} judged, {groups} clusters with repeats "
            f"({min(groups, max_clusters)} shown), {len(page.encode()) / 1024:.0f} KiB -> {where}")
