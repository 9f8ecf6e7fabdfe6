"""Recall by repost kind, ours against the peers, as a PNG for benchmarks/README.md.

    .venv/bin/python -m benchmarks.plot_recall benchmarks/results/accuracy.json [-o benchmarks/results/recall-by-kind.png]

Reads any results file of ``bench_accuracy`` (or a later recall benchmark with the same
``results.<set>.<method>.{true_dups,correct}`` shape), so the picture is redrawn from whichever
run is the latest.  Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DEFAULT_METHODS = ("ours, default", "simhash default", "naive", "3-gram MinHashLSH(0.5)", "5-gram MinHashLSH(0.5)")
OURS_COLOUR = "#c0392b"
PEER_COLOURS = ["#4c72b0", "#8da0cb", "#55a868", "#a6d854", "#999999"]
KINDS = {  # result key -> label, in the order of benchmarks/reposts.py
    "add_header_footer": "other site's header/footer", "punct_width": "punctuation width",
    "edit_chars": "1-3 % characters edited", "drop_paragraph": "paragraph dropped",
    "swap_paragraphs": "paragraphs swapped", "truncate": "cut to 70-90 %", "traditional": "traditional characters",
    "combo": "2-3 of these combined",
}


def recall_by_kind(results: dict[str, Any], methods: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """method name -> kind -> recall, for the first method whose name contains each of ``methods``."""
    out: dict[str, dict[str, float]] = {}
    for wanted in methods:
        name = next((n for n in results if wanted in n), None)
        if name is None:
            raise SystemExit(f"no method matching {wanted!r} in the results; there are: {', '.join(results)}")
        r = results[name]
        out[name] = {k: r["correct"].get(k, 0) / r["true_dups"][k] for k in KINDS if r["true_dups"].get(k)}
    return out


def plot(recalls: dict[str, dict[str, float]], title: str, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in KINDS if any(k in r for r in recalls.values())]
    height = 0.8 / len(recalls)
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.16 * len(kinds) * len(recalls)), dpi=110)
    peers = iter(PEER_COLOURS * len(recalls))
    for i, (name, recall) in enumerate(recalls.items()):  # the first method on top of each kind
        ys = [row - 0.4 + height * (i + 0.5) for row in range(len(kinds))]
        ax.barh(ys, [recall.get(k, 0.0) for k in kinds], height=height * 0.9, label=name, zorder=3,
                color=OURS_COLOUR if name.startswith("ours") else next(peers))
    ax.set_yticks(range(len(kinds)), [KINDS[k] for k in kinds])
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
    parser.add_argument("results", type=Path, help="a results JSON file of bench_accuracy")
    parser.add_argument("-o", "--output", type=Path, default=Path("benchmarks/results/recall-by-kind.png"),
                        help="PNG to write (default %(default)s)")
    parser.add_argument("--set", default="long", help="which document set of the results (default %(default)s)")
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS),
                        help="methods to show, each a part of its name in the results")
    args = parser.parse_args(argv)
    data = json.loads(args.results.read_text(encoding="utf-8"))
    recalls = recall_by_kind(data["results"][args.set], tuple(args.methods))
    when = data.get("machine", {}).get("when", "")
    plot(recalls, f"Recall by repost kind ({args.results.name}, {args.set} texts, {when})", args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
