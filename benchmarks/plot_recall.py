"""Recall by repost kind, ours against the peers, as a PNG for benchmarks/README.md.

    .venv/bin/python -m benchmarks.plot_recall benchmarks/results/recall.json --corpus pd1998 --set synthetic
    .venv/bin/python -m benchmarks.plot_recall benchmarks/results/accuracy.json --set long

Reads the results files of ``recall`` (``results.<corpus>.sets.<set>.scores.<method>.recall_by_kind``) and
of ``accuracy`` (``results.<set>.<method>.{true_dups,correct}``), so the picture is redrawn
from whichever run is the latest.  Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# parts of method names, in both kinds of results file; those a file lacks are left out
DEFAULT_METHODS = ("ours, default", "zhdedup scan defaults", "simhash", "naive", "3-gram MinHashLSH(0.5)",
                   "5-gram MinHashLSH(0.5)")
OURS_COLOUR = "#c0392b"
PEER_COLOURS = ["#4c72b0", "#8da0cb", "#55a868", "#a6d854", "#999999"]
KINDS = {  # result key -> label, in the order of corpora/reposts.py
    "add_header_footer": "other site's header/footer", "punct_width": "punctuation width",
    "edit_chars": "1-3 % characters edited", "drop_paragraph": "paragraph dropped",
    "swap_paragraphs": "paragraphs swapped", "truncate": "cut to 70-90 %", "traditional": "traditional characters",
    "combo": "2-3 of these combined", "retemplate": "re-templated page", "retemplate+edit_chars":
    "re-templated, characters edited", "retemplate+drop+punct": "re-templated, paragraph dropped, punctuation",
    "headline_prefix": "headline prefixed",
}


def recall_by_kind(results: dict[str, Any], methods: tuple[str, ...], *, strict: bool) -> dict[str, dict[str, float]]:
    """method name -> kind -> recall, for the first method whose name contains each of ``methods``
    (``strict``: each must be there)."""
    scores = results.get("scores", results)
    out: dict[str, dict[str, float]] = {}
    for wanted in methods:
        name = next((n for n in scores if wanted in n), None)
        if name is None:
            if strict:
                raise SystemExit(f"no method matching {wanted!r} in the results; there are: {', '.join(scores)}")
            continue
        r = scores[name]
        out[name] = r["recall_by_kind"] if "recall_by_kind" in r else {
            k: r["correct"].get(k, 0) / n for k, n in r["true_dups"].items() if n}
    return out


def plot(recalls: dict[str, dict[str, float]], title: str, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = {k for r in recalls.values() for k in r}
    kinds = [k for k in KINDS if k in found] + sorted(found - set(KINDS))
    height = 0.8 / len(recalls)
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.16 * len(kinds) * len(recalls)), dpi=110)
    peers = iter(PEER_COLOURS * len(recalls))
    for i, (name, recall) in enumerate(recalls.items()):  # the first method on top of each kind
        ys = [row - 0.4 + height * (i + 0.5) for row in range(len(kinds))]
        ax.barh(ys, [recall.get(k, 0.0) for k in kinds], height=height * 0.9, label=name, zorder=3,
                color=OURS_COLOUR if name.startswith(("ours", "zhdedup")) else next(peers))
    ax.set_yticks(range(len(kinds)), [KINDS.get(k, k) for k in kinds])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("recall (share of reposts of this kind found, against the right original)")
    ax.grid(axis="x", color="#ddd", zorder=0)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results/recall.json or results/accuracy.json")
    parser.add_argument("--corpus", help="recall.json: which corpus's sets")
    parser.add_argument("-o", "--output", type=Path, default=Path("benchmarks/results/recall-by-kind.png"),
                        help="PNG to write (default %(default)s)")
    parser.add_argument("--set", default="synthetic",
                        help="which document set of the results (default %(default)s; accuracy.json: long)")
    parser.add_argument("--methods", nargs="+", help="methods to show, each a part of its name in the results "
                                                      "(default: ours and the peers)")
    args = parser.parse_args(argv)
    data = json.loads(args.results.read_text(encoding="utf-8"))
    sets = data["results"][args.corpus]["sets"] if args.corpus else data["results"]
    recalls = recall_by_kind(sets[args.set], tuple(args.methods or DEFAULT_METHODS),
                             strict=args.methods is not None)
    when = data.get("machine", {}).get("when", "")
    plot(recalls, f"Recall by repost kind ({args.results.name}, {args.set} texts, {when})", args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
