"""Documents lost to ordinary faults, for the code on ``sys.path`` (issue 9's table: run it on two checkouts).

    python -m benchmarks.bench_es_faults --url http://127.0.0.1:9250 [--json out.json]

Uses the fault tests' corpus and helpers (tests/support/es_runs.py): 300 real articles and reposts,
ingested at the default ``--concurrency`` (decisions in input order).  Each fault is injected into a real process, the fault is
repaired, the documented recovery is run (the same ``zhdedup es ingest`` again, then ``zhdedup es
replay`` of the dead-letter file where the command exists), and the index is compared with an
uninterrupted ingest: documents lost (input ids not stored) and verdicts that differ.
To measure an older checkout: ``PYTHONPATH=/path/to/old/checkout python -m benchmarks.bench_es_faults``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.es_runs import (
    corpus,
    doc_count,
    ingest_args,
    replay,
    running,
    set_write_block,
    stored,
    zhdedup,
    zhdedup_cmd,
)
from tests.support.fault_node import FaultNode
from tests.support.helpers import write_jsonl

HANG = 180  # seconds after which a run is called hung and killed


def _ingest_with_fault(url: str, index: str, work: Path, inject: Callable[[], None], repair: Callable[[], None],
                       dead: Path) -> dict[str, Any]:
    src = write_jsonl(work / "corpus.jsonl", corpus())
    args = ingest_args(url, index, src, work, dead)
    with running(zhdedup_cmd(*args), work / "first.log") as proc:
        while doc_count(url, index) < len(corpus()) // 4 and proc.poll() is None:
            time.sleep(0.05)
        inject()
        try:
            proc.wait(timeout=HANG)
            first = f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            first = f"hung, killed after {HANG} s"
    err = (work / "first.log").read_text(encoding="utf-8", errors="replace")
    repair()
    rerun = zhdedup(*args)
    out = {"first_run": first, "first_run_says": err.strip().splitlines()[-1:] if err.strip() else [],
           "rerun": rerun.returncode}
    if dead.exists() and dead.stat().st_size:
        out["replay"] = replay(url, index, dead).returncode
    return out


def _compare(url: str, index: str, reference: dict[str, Any]) -> dict[str, Any]:
    got = stored(url, index)
    return {"lost": len(set(reference) - set(got)), "verdicts_differ": sum(got.get(i) != v for i, v in reference.items()
                                                                         if i in got)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:9250", help="a node for the faults that need no kill")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import scrapy_zhdedup

    table: dict[str, Any] = {"code": str(Path(scrapy_zhdedup.__file__).parent.parent), "docs": len(corpus())}
    work = Path(tempfile.mkdtemp(prefix="zhdedup-faults-"))
    ref_index = f"fault-ref-{uuid.uuid4().hex[:8]}"
    made = [ref_index]
    try:
        assert zhdedup(*ingest_args(args.url, ref_index, write_jsonl(work / "ref.jsonl", corpus()),
                                    work / "ref")).returncode == 0
        reference = stored(args.url, ref_index)

        index = f"fault-block-{uuid.uuid4().hex[:8]}"
        made.append(index)
        (work / "block").mkdir()
        table["write block mid-ingest"] = {**_ingest_with_fault(
            args.url, index, work / "block", lambda: set_write_block(args.url, index, True),
            lambda: set_write_block(args.url, index, False), work / "block" / "dead.jsonl"),
            **_compare(args.url, index, reference)}

        index = f"fault-letters-{uuid.uuid4().hex[:8]}"
        made.append(index)
        letters = work / "letters" / "dir"
        letters.mkdir(parents=True)

        def lose_letters() -> None:
            shutil.rmtree(letters)
            letters.write_text("not a directory")
            set_write_block(args.url, index, True)

        def restore_letters() -> None:
            set_write_block(args.url, index, False)
            letters.unlink()
            letters.mkdir()

        table["dead-letter location lost + write block"] = {**_ingest_with_fault(
            args.url, index, work / "letters", lose_letters, restore_letters, letters / "dead.jsonl"),
            **_compare(args.url, index, reference)}

        node = FaultNode()
        try:
            node.start()
            index = f"fault-kill-{uuid.uuid4().hex[:8]}"
            (work / "kill").mkdir()
            table["node SIGKILLed mid-ingest"] = {**_ingest_with_fault(
                node.url, index, work / "kill", node.kill, node.restart, work / "kill" / "dead.jsonl"),
                **_compare(node.url, index, reference)}
        finally:
            node.destroy()
    finally:
        for name in made:
            for path in (name, f"_index_template/zhdedup-{name}"):
                subprocess.run(["curl", "-s", "-XDELETE", f"{args.url}/{path}"], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(table, ensure_ascii=False, indent=1))
    if args.json:
        args.json.write_text(json.dumps(table, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
