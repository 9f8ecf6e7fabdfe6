"""Several writers on one index, as tests/faults/test_distributed.py runs them: the checkout's redis-server
(scripts/redis.sh), the example's larger site, N ``scrapy crawl news_redis`` processes fed from one
scrapy-redis queue (examples/run_distributed.py's pieces), and N ``zhdedup es ingest`` processes on the
site's pages dealt round-robin; what they left counted against the site's manifest."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch, helpers

from es_plugin.commands.order import Placed, claim_stamps, order
from examples import run_distributed as recipe
from examples.run_distributed import Tally
from tests.support import ROOT
from tests.support.es_runs import RUN_TIMEOUT, doc_count, request_json, running, zhdedup, zhdedup_cmd
from tests.support.waiting import wait_until

SCRIPT = ROOT / "scripts" / "redis.sh"
ROUNDS = 12  # 303 pages, 132 repeats: long enough that 8 crawlers overlap
# The kill tests' site: 153 pages, 66 repeats.  What they assert (nothing lost, sound after the rerun) does not
# grow with the site, and the kill comes at a share of the run's documents however long the run is.
KILL_ROUNDS = 6
# Repeats missed before reconcile, beyond one writer's.  Issue 38's target is 1 %; with the key registry
# crawls stay within it (3-4 of 132 against one crawler's 3), while several es ingest processes missed 2-3 %
# (claims crossing in flight: a later-stamped claim landing first), so the guard is 5 %, far below the
# 24-81 % of writers that could not see each other.
MISSED_SHARE = 0.05
RERUN_DELIVERED = re.compile(r"zhdedup: (\S+): delivered by an earlier run")


class RedisServer:
    """This checkout's redis-server, started for a module and stopped after it if the module started it."""

    def __init__(self) -> None:
        self.url = ""
        self.started_here = False

    def _script(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=600, check=False)

    def start(self) -> None:
        self.started_here = self._script("status").returncode != 0
        proc = self._script("start")
        assert proc.returncode == 0, f"{SCRIPT} start failed:\n{proc.stderr[-3000:]}"
        self.url = proc.stdout.strip()

    def release(self) -> None:
        if self.started_here:
            self._script("stop")


@dataclass
class Site:
    manifest: dict[str, Any]
    root: Path
    url: str  # where it is served, ending in /

    def documents(self, mode: str) -> int:
        """How many documents a run in ``mode`` stores: every page (annotate), about one per article (drop)."""
        pages = self.manifest["pages"]
        return len(pages) if mode == "annotate" else len({info["base"] for info in pages.values()})


@dataclass
class Run:
    """What N writers left: the index's documents, what the feeds got and what was dropped as a repeat."""

    stored: dict[str, dict[str, Any]]
    delivered: dict[str, str | None]
    dropped: dict[str, str]
    mode: str
    exit_codes: list[int | None]
    judged: list[str] = field(default_factory=list)  # after reconcile: the order it judged in, read before it

    def tally(self, site: Site, feeds_count: bool = True) -> Tally:
        return recipe.tally(site.manifest, self.stored, self.delivered, self.dropped, self.mode, feeds_count)

    def reconciled(self, es_url: str, index: str) -> Run:
        """This run after ``es reconcile``: the index read again, and the order reconcile judged in."""
        judged = writers_order(es_url, index)
        reconcile(es_url, index)
        return Run(recipe.stored_docs(es_url, index), self.delivered, self.dropped, self.mode, self.exit_codes,
                   judged)


def writers_order(es_url: str, index: str) -> list[str]:
    """The stored documents' ids in the order of the writers' claims (es_plugin/commands/order.py), the
    order ``es reconcile`` judges in."""
    with Elasticsearch(es_url.split(","), request_timeout=60) as client:
        stamps = claim_stamps(client, index)
        client.indices.refresh(index=index)
        docs = [Placed(hit["_id"], z["doc_id"], z.get("status"), z.get("seen_at"), z.get("dup_of"))
                for hit in helpers.scan(client, index=index, _source=["zhdedup"]) for z in [hit["_source"]["zhdedup"]]]
    return [docs[row].doc_id for row in order(docs, stamps)]


def missed_beyond(tally: Tally, baseline: int) -> int:
    """Repeats missed beyond the ``baseline`` one writer alone misses.  Counted, not matched page by page:
    which page of a pair goes unmatched depends on which came first (a cut repost before its whole
    original), and that order differs from run to run."""
    return max(0, len(tally.missed) - baseline)


def assert_sound(tally: Tally) -> None:
    """0 false merges, 0 pages lost, no repeat of a document the index does not hold."""
    assert not tally.false_merges, f"{len(tally.false_merges)} false merges: {tally.false_merges[:5]}"
    assert not tally.lost, f"{len(tally.lost)} pages lost: {tally.lost[:5]}"
    assert not tally.dangling, f"{len(tally.dangling)} repeats of a document not in the index: {tally.dangling[:5]}"


def assert_few_missed(tally: Tally, baseline: int, writers: int, what: str) -> None:
    """The bound (``MISSED_SHARE``) on what several writers miss before reconcile.  It holds only with the
    key registry: on a backend whose near lookup is a search, writers miss the repeats of documents in each
    other's unflushed buffers (24-81 % measured)."""
    found_alone = tally.repeats - baseline
    missed = missed_beyond(tally, baseline)
    print(f"{writers} {what}: {len(tally.missed)} of {tally.repeats} repeats missed before reconcile "
          f"(one writer: {baseline}); {len(tally.chained)} dropped as the repeat of a page dropped itself")
    assert missed <= MISSED_SHARE * found_alone, (
        f"{writers} {what} missed {missed} of the {found_alone} repeats one writer finds "
        f"({missed / found_alone:.1%}; at most {MISSED_SHARE:.0%} allowed): {tally.missed[:8]}")


def assert_reconciled(site: Site, run: Run, work: Path) -> None:
    """After ``es reconcile`` (run by :meth:`Run.reconciled`), the index misses no repeat that one writer
    judging its documents in the same order (the writers' claims: reconcile's) finds: ``zhdedup scan``
    of them in that order is that writer.  Not the order of a one-writer run: a cut repost judged before
    its whole original is missed whoever judges it, and which of the two was first differs from run to run."""
    judged = run.judged
    source, out = work / "same-order.jsonl", work / "same-order-verdicts.jsonl"
    source.write_text("".join(json.dumps({"id": doc_id, "html": page_html(site, recipe.path_of(doc_id))},
                                         ensure_ascii=False) + "\n" for doc_id in judged), encoding="utf-8")
    proc = zhdedup("scan", source, "-o", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    alone = recipe.tally(site.manifest, {v["id"]: {"status": v["status"]} for v in verdicts}, {}, {}, "annotate",
                         feeds_count=False)
    tally = run.tally(site, feeds_count=False)
    print(f"after reconcile: {len(tally.missed)} of {tally.repeats} repeats missed "
          f"(one writer in the same order: {len(alone.missed)})")
    assert not missed_beyond(tally, len(alone.missed)), (
        f"repeats left unmarked after es reconcile: {tally.missed}, one writer in the same order: {alone.missed}")


def assert_sound_then_reconciled(site: Site, run: Run, es_url: str, index: str, work: Path) -> Tally:
    """What every distributed run ends with: sound as the writers left it (:func:`assert_sound`), then
    ``es reconcile``, sound again and missing no repeat one writer in the same order finds
    (:func:`assert_reconciled`).  Returns the tally from before reconcile."""
    before = run.tally(site)
    assert_sound(before)
    after = run.reconciled(es_url, index)
    assert_sound(after.tally(site, feeds_count=False))
    assert_reconciled(site, after, work)
    return before


def page_html(site: Site, path: str) -> str:
    return (site.root / path).read_bytes().decode(site.manifest["pages"][path]["encoding"])


# --- crawls -----------------------------------------------------------------------------------------------


def crawl(n: int, site: Site, es_url: str, index: str, redis_url: str, work: Path, mode: str = "drop",
          during: Callable[[list[subprocess.Popen[bytes]]], None] | None = None, fresh: bool = True) -> Run:
    """N crawlers from one queue seeded with the portal page; ``during`` is called once they run (a fault).
    ``fresh`` False keeps what an earlier crawl of ``work`` delivered and dropped (a crawl run again)."""
    work.mkdir(parents=True, exist_ok=True)
    first = len(list(work.glob("crawler-*.log"))) if not fresh else 0
    recipe.seed(redis_url, site.url + "index.html")
    env = recipe.crawl_env(es_url, index, redis_url, mode, work)
    with recipe.crawlers(n, env, work, first) as procs:
        if during:
            during(procs)
        for proc in procs:
            proc.wait(timeout=RUN_TIMEOUT)
    delivered, dropped = recipe.outputs(work)
    for log in work.glob("crawler-*.log"):  # the rerun of a killed crawl names what an earlier run delivered
        for url in RERUN_DELIVERED.findall(log.read_text(encoding="utf-8", errors="replace")):
            delivered.setdefault(url, None)
    return Run(recipe.stored_docs(es_url, index), delivered, dropped, mode, [p.returncode for p in procs])


def kill_one_at_random(url: str, index: str, seed: int, documents: int) -> Callable[[list[subprocess.Popen[bytes]]], None]:
    """A fault for :func:`crawl` or :func:`ingest`: SIGKILL one writer at a random moment of the run, wherever
    it is then (judging, claiming, writing a bulk): once the index holds a random share of the ``documents``
    the run stores (:func:`share_of`)."""
    rng = random.Random(seed)
    target = share_of(rng, documents)

    def fault(procs: list[subprocess.Popen[Any]]) -> None:
        victim = rng.choice(running_at(url, index, target, procs, f"seed {seed}"))
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)

    return fault


def share_of(rng: random.Random, documents: int) -> int:
    """A random moment of a run that stores ``documents``, as a count of them: 5-60 %.  Chosen from progress
    rather than as a sleep after the first document, which a fast machine's whole run can outlast."""
    return max(1, round(rng.uniform(0.05, 0.6) * documents))


def running_at(url: str, index: str, target: int, procs: list[subprocess.Popen[Any]],
               what: str) -> list[subprocess.Popen[Any]]:
    """The writers still running once the index holds ``target`` documents (polled, refreshed first: a
    writer's documents need not be searchable yet); fails if none is (the fault would land after the run)."""
    wait_until(lambda: stored_count(url, index) >= target or all(p.poll() is not None for p in procs),
               f"{target} documents in the index", RUN_TIMEOUT)
    alive = [proc for proc in procs if proc.poll() is None]
    assert alive, f"{what}: every writer had finished before the index held {target} documents"
    return alive


def stored_count(url: str, index: str) -> int:
    """The index's documents, refreshed first; 0 while the node does not answer."""
    base = url.split(",")[0]
    try:
        request_json("POST", f"{base}/{index}/_refresh")
    except OSError:
        return 0
    return doc_count(base, index)


# --- es ingest --------------------------------------------------------------------------------------------


def pages_as_records(site: Site) -> list[dict[str, str]]:
    """The site's article pages as ``es ingest`` JSONL records, their path as the id: the first page of
    every article, then the others, as a backfill meets reposts after their originals.  (Dealt in the
    site's order, an original and its repost, adjacent there, reach two writers at the same moment: which
    is judged first is chance, and a cut repost judged first leaves its whole original unmatched by any
    writer; the crawls, in the queue's order, have such pairs.)"""
    pages = site.manifest["pages"]
    order = sorted(pages, key=lambda path: pages[path]["dup_of"] is not None)
    return [{"id": path, "html": page_html(site, path)} for path in order]


def ingest(n: int, site: Site, es_url: str, index: str, work: Path,
           during: Callable[[list[subprocess.Popen[bytes]]], None] | None = None) -> Run:
    """N ``es ingest`` processes started together, the pages dealt round-robin; a writer a fault killed is
    run again (its checkpoint resumes it) before counting."""
    work.mkdir(parents=True, exist_ok=True)
    records = pages_as_records(site)
    commands = []
    for i in range(n):
        share = work / f"share-{i}.jsonl"
        share.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records[i::n]), encoding="utf-8")
        commands.append(zhdedup_cmd("es", "ingest", "--url", es_url, "--index", index, share, "--mode", "annotate",
                                    "--checkpoint-dir", work / f"checkpoints-{i}", "--dead-letter", work / f"dead-{i}.jsonl"))
    codes: list[int | None] = []
    with running_many(commands, work) as procs:
        if during:
            during(procs)
        codes = [proc.wait(timeout=RUN_TIMEOUT) for proc in procs]
    for i, code in enumerate(codes):
        if code == -9:  # the killed writer, run again as an operator would
            again = subprocess.run(commands[i], capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
            assert again.returncode == 0, again.stderr[-3000:]
            codes[i] = again.returncode
    stored = recipe.stored_docs(es_url, index)
    return Run(stored, {doc_id: z["status"] for doc_id, z in stored.items()}, {}, "annotate", codes)


@contextmanager
def running_many(commands: list[list[str]], work: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Each command as :func:`tests.support.es_runs.running` runs one, all at once."""
    with ExitStack() as stack:
        yield [stack.enter_context(running(cmd, work / f"writer-{i}.log")) for i, cmd in enumerate(commands)]


def reconcile(es_url: str, index: str) -> None:
    proc = zhdedup("es", "reconcile", "--url", es_url, "--index", index)
    assert proc.returncode == 0, proc.stderr[-3000:]
