"""A real judging process for the store fault tests (run as a script, never imported by pytest).

``python judge_proc.py STORE CORPUS START COMPACT_AFTER [--hold]`` judges the JSONL lines of
CORPUS from line START on into the store and prints one flushed verdict line per document, so
whatever the test reads has been reported.  An id the store already judged with the same content
gets its stored verdict back (the judge flow's rerun rule), so a resumed run repeats what was said.  ``--hold`` prints ``ready``
after opening and waits for a line on stdin before judging, to keep the store locked.  ``--only N`` judges N lines,
then waits for stdin to close without closing the store: a writer killed after exactly N documents.  ``--paced``
waits for a line on stdin before each document, so a test reads the store at a point it chose, the writer alive.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scrapy_zhdedup import DedupConfig, Deduper


def judge(deduper: Deduper, doc_id: str, text: str) -> dict[str, object]:
    v = deduper.judge(doc_id, text=text)
    return {"id": doc_id, "status": v.status, "dup_of": v.dup_of, "distance": v.distance, "cluster": v.cluster}


def main(store: str, corpus: str, start: str, compact_after: str, *flags: str) -> None:
    deduper = Deduper.open(DedupConfig(), store)
    deduper.store.compact_after_bytes = int(compact_after)
    if "--hold" in flags:
        print("ready", flush=True)
        sys.stdin.readline()
    lines = Path(corpus).read_text(encoding="utf-8").splitlines()[int(start):]
    only = int(flags[flags.index("--only") + 1]) if "--only" in flags else None
    for line in lines[:only]:
        if "--paced" in flags:
            sys.stdin.readline()
        doc = json.loads(line)
        print(json.dumps(judge(deduper, doc["id"], doc["text"]), ensure_ascii=False), flush=True)
    if only is not None:
        sys.stdin.read()  # killed here
        return
    deduper.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
