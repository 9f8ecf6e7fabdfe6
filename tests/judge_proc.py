"""A real judging process for the store fault tests (run as a script, never imported by pytest).

``python judge_proc.py STORE CORPUS START COMPACT_AFTER [--hold]`` judges the JSONL lines of
CORPUS from line START on into the store and prints one flushed verdict line per document, so
whatever the test reads has been reported.  An id the store already judged with the same content
gets its stored verdict back: the rerun rule the store supports.  ``--hold`` prints ``ready``
after opening and waits for a line on stdin before judging, to keep the store locked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.text import content_hash


def judge(deduper: Deduper, doc_id: str, text: str) -> dict[str, object]:
    before = deduper.store.previous(doc_id)
    if before is not None and before.content_hash == content_hash(deduper.fingerprinter.clean(text=text)):
        return {"id": doc_id, "status": before.status, "dup_of": before.dup_of, "distance": before.distance,
                "cluster": before.cluster}
    v = deduper.check(doc_id, text=text)
    return {"id": doc_id, "status": v.status, "dup_of": v.dup_of, "distance": v.distance, "cluster": v.cluster}


def main(store: str, corpus: str, start: str, compact_after: str, *flags: str) -> None:
    deduper = Deduper.open(DedupConfig(), store)
    deduper.store.compact_after_bytes = int(compact_after)
    if "--hold" in flags:
        print("ready", flush=True)
        sys.stdin.readline()
    for line in Path(corpus).read_text(encoding="utf-8").splitlines()[int(start):]:
        doc = json.loads(line)
        print(json.dumps(judge(deduper, doc["id"], doc["text"]), ensure_ascii=False), flush=True)
    deduper.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
