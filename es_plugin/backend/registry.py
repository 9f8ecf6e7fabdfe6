"""The key registry: ``<index>-keys``, one document per candidate key naming the cluster originals that
hold it, so a writer sees another's original the moment it is claimed, and a lookup reads one shard a key.

A near lookup (:meth:`Registry.near`) is two realtime multi-gets, which see every write at once (no
refresh): the keys (``_id`` = the key: ``m`` + a sketch band key, ``b`` + a SimHash band when they
are on, ``p`` + a passage key when passages are), then the originals they name, from the documents'
index, verified on their stored sketch by the shared :meth:`~scrapy_zhdedup.similarity.rule.NearRule.accept`.
A key held by more than ``MAX_POSTINGS`` originals is boilerplate and names none, as in the embedded store.

A claim (:meth:`Registry.claim`) appends ``[content hash, stamp]`` to each key of an original once its
document is written: ``create`` when the key is absent, else ``index`` conditional on the
``_seq_no`` read, so two writers never overwrite each other's claims (optimistic concurrency, no
script).  **The order**: a stamp (milliseconds, writer, sequence) is taken when a document claims, and a
document is a repeat only of an original with a smaller stamp; so nothing is dropped as the repeat of
a document judged after it, and two documents never repeat each other.  Each time a claim reads a key
(first, and again after a 409) the owners it had not verified are verified: one with a smaller stamp
that its document repeats turns it into a repeat (the caller fixes the stored copy) and withdraws what
it claimed; one with a larger stamp that repeats its document had claimed first without seeing it
(their claims crossed in flight), and is returned for the caller to mark.  Of two documents sharing a
key, the one whose conditional write lands second has read the other's claim, so crossed claims are
judged too.

A lookup accepts an original of another writer only once that writer's claims up to its stamp are
finished (progress.py, :meth:`Registry.settled`): its claim may still make it a repeat.

A claim whose document does not exist (its writer was killed between the two writes, or the claim was
withdrawn from a document since deleted) names nothing: the second multi-get does not find it, and only
originals (``status: unique``) count.  ``es reconcile`` removes such claims (:func:`prune`).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from elastic_transport import TransportError
from elasticsearch import ApiError, ConflictError

from scrapy_zhdedup.index.nearindex import MAX_POSTINGS, CandidateKeys
from scrapy_zhdedup.model import Features, Match
from scrapy_zhdedup.similarity.passages import votes_needed
from scrapy_zhdedup.similarity.rule import NearRule, closest

from ..errors import LookupItemError
from ..index.document import FIELD, HASH, STATUS, Stored, includes, passage_terms, sketch_terms
from ..index.template import registry_name
from ..operations import Call, Sleep, Steps
from .progress import DONE, WRITER, Waits, new_stamp, pending, polls, progress_id, writer_of
from .retry import RetryPolicy, got_all
from .stats import EsStats
from .writer import Action, BulkWriter

logger = logging.getLogger(__name__)

OWNERS = "o"  # a key document's one field: [[content hash, stamp], ...] in the order they were claimed
CANDIDATE_SOURCE = includes("status", "fp", "sketch", "passages")  # an owner's document, to verify
MAX_ROUNDS = 20  # claim attempts of a key under contention before it is left to reconcile
FLUSHED_AGE = 0  # age rank of a stored original in ``closest``: older than anything this process still holds


def key_ids(keys: CandidateKeys, features: Features) -> list[str]:
    """The registry ``_id`` of every key naming ``features``' candidates (nearindex.py's keys)."""
    ids = [f"m{term}" for term in sketch_terms(features.sketch_keys)]
    if keys.simhash_bands:
        ids += [f"b{name}={value}" for name, value in keys.layout.terms(features.fingerprint).items()]
    ids += [f"p{term}" for term in passage_terms(features.passages)]
    return list(dict.fromkeys(ids))


def distinct(ids: Iterable[list[str]]) -> list[str]:
    """The keys of several documents (:meth:`Registry.keys_of`), once each, in order."""
    return list(dict.fromkeys(k for keys in ids for k in keys))


@dataclass(frozen=True)
class KeyState:
    """A key document as read: who holds the key, and the version a conditional write is based on."""

    seq: tuple[int, int]  # _seq_no, _primary_term
    owners: tuple[tuple[str, str], ...]  # (content hash, stamp)


@dataclass
class Claimant:
    """A cluster original claiming its keys: its content hash (its document's ``_id``), stamp and features."""

    hash: str
    doc_id: str
    features: Features
    stamp: str = field(default_factory=new_stamp)


@dataclass
class Claimed:
    """What a claim found: claimants that repeat an earlier-stamped owner (by content hash), and owners
    claimed with a later stamp that repeat a claimant (by content hash: the stored owner, what it repeats)."""

    repeats: dict[str, Match]
    marked: dict[str, tuple[Stored, Match]]


@dataclass
class Registry:
    index: str  # the documents' index
    keys: CandidateKeys
    rule: NearRule | None  # None: only filled and pruned, never judged with
    policy: RetryPolicy
    stats: EsStats

    def __post_init__(self) -> None:
        self.name = registry_name(self.index)
        self.writer = BulkWriter(self.name, self.policy)  # its writes are not the documents ``indexed`` counts
        self.waits = Waits()
        self.unpublished = False  # the last publish failed

    # -- reading ---------------------------------------------------------------------------------------

    def read(self, ids: Sequence[str]) -> Steps:
        """Steps: the key documents by ``_id`` (None for a key nobody holds), by one realtime ``mget``."""
        if not ids:
            return {}
        response = yield from self.policy.call(
            lambda c: c.mget(index=self.name, ids=list(ids), realtime=True), self.stats, got_all)
        return states_of(response["docs"])

    def keys_of(self, features: Sequence[Features]) -> list[list[str]]:
        """The registry ``_id`` of every key of each of these documents (:func:`key_ids`)."""
        return [key_ids(self.keys, f) for f in features]

    def candidates(self, features: Features, states: dict[str, KeyState | None],
                   ids: list[str] | None = None) -> dict[str, str]:
        """The owners the keys name, by content hash, with their stamps: any shared sketch (or SimHash band)
        key held by at most ``MAX_POSTINGS``, or enough shared passages (nearindex.py's rule).  ``ids``:
        :func:`key_ids` of ``features``, when the caller has them."""
        named: dict[str, str] = {}
        passages = []
        for key in key_ids(self.keys, features) if ids is None else ids:
            state = states.get(key)
            if state is None or len(state.owners) > MAX_POSTINGS:
                continue
            if key.startswith("p"):
                passages.append(state.owners)
            else:
                named.update(state.owners)
        if passages:
            votes = Counter(h for owners in passages for h, _ in owners)
            by_passage = {h: s for owners in passages for h, s in owners}
            needed = votes_needed(len(features.passages), self.keys.passage_share)
            named.update((h, by_passage[h]) for h, n in votes.items() if n >= needed and h not in named)
        return named

    def originals(self, digests: Iterable[str]) -> Steps:
        """Steps: the stored originals among ``digests`` (one realtime ``mget`` of the documents' index);
        a document missing, or not an original any more, is left out."""
        found, _ = yield from self._originals(list(dict.fromkeys(digests)), [])
        return found

    def settled(self, owners: dict[str, str]) -> Steps:
        """Steps: :meth:`originals` of ``owners`` (content hash: stamp), once no claim of theirs by another
        writer is still running (progress.py): the writers' progress is read in the same ``mget``, and read
        again with the originals until it reaches their stamps or ``CLAIM_WAIT`` runs out.  All of them are
        read again, not only those waited for: a claim waited for may also have marked another writer's
        original its repeat (their claims crossed)."""
        found, done = yield from self._originals(list(owners), self._writers(owners.values()))
        waiting = [h for h in found if self.waits.holds(owners[h], done)]
        for pause in polls():
            if not waiting:
                return found
            self.stats.inc("claim_waits")
            yield Sleep(pause)
            found, done = yield from self._originals(list(found), self._writers(owners[h] for h in found))
            waiting = [h for h in waiting if h in found and pending(owners[h], done)]
        stalled = self.waits.give_up([owners[h] for h in waiting], done)
        if stalled:
            logger.warning("zhdedup: writer(s) %s of %s have not finished a claim in time (stopped, or their registry "
                           "writes fail); their originals are taken as they are, and `zhdedup es reconcile` judges "
                           "them again", ", ".join(stalled), self.name)
        return found

    @staticmethod
    def _writers(stamps: Iterable[str]) -> list[str]:
        return list(dict.fromkeys(w for s in stamps if (w := writer_of(s)) is not None and w != WRITER))

    def _originals(self, ids: list[str], writers: list[str]) -> Steps:
        """Steps: the stored originals among ``ids`` and the progress of ``writers`` (None: none published),
        by one realtime ``mget``."""
        if not ids:
            return {}, {}
        docs = [{"_index": self.index, "_id": h, "_source": {"includes": CANDIDATE_SOURCE}} for h in ids] + [
            {"_index": self.name, "_id": progress_id(w)} for w in writers]
        response = yield from self.policy.call(lambda c: c.mget(docs=docs, realtime=True), self.stats, got_all)
        found: dict[str, Stored] = {}
        answered = response["docs"]
        for doc in answered[: len(ids)]:
            if "error" in doc:
                raise LookupItemError(doc["error"])
            stored = Stored.from_source(doc["_source"]) if doc.get("found") and FIELD in doc["_source"] else None
            if stored is not None and stored.status == "unique" and stored.sketch is not None and stored.fp is not None:
                found[doc["_id"]] = stored
        done: dict[str, str | None] = {}
        for writer, doc in zip(writers, answered[len(ids):]):
            if "error" in doc:
                raise LookupItemError(doc["error"])
            done[writer] = str(doc["_source"][DONE]) if doc.get("found") else None
        return found, done

    def verify(self, features: Features, owners: dict[str, str], stored: dict[str, Stored]) -> Match | None:
        """The owner the rule accepts and prefers (the most similar, then the earliest stamp)."""
        hits = [(stored[h], s) for h, s in owners.items() if h in stored]
        if not hits or self.rule is None:
            return None
        accepted = self.rule.accept(
            features, np.stack([hit.sketch.values for hit, _ in hits]),  # type: ignore[union-attr]
            np.array([hit.sketch.shingles for hit, _ in hits]),  # type: ignore[union-attr]
            [hit.fp for hit, _ in hits])  # type: ignore[misc]
        return closest((a.similarity, (FLUSHED_AGE, hits[a.position][1]),
                        Match(hits[a.position][0].doc_id, hits[a.position][0].cluster, a.distance, a.similarity,
                              a.contained, a.reason)) for a in accepted)

    def near(self, features: Sequence[Features]) -> Steps:
        """Steps: for each document's features, the stored original the rule accepts and prefers (or None):
        one ``mget`` of all their keys, one of all the originals these name."""
        if not features:
            return []
        self.stats.inc("lookups")
        ids = self.keys_of(features)
        states = yield from self.read(distinct(ids))
        found = yield from self.near_in(features, ids, states)
        return found

    def near_in(self, features: Sequence[Features], ids: Sequence[list[str]],
                states: dict[str, KeyState | None]) -> Steps:
        """Steps: :meth:`near`'s answers once its keys (``ids``: :meth:`keys_of`) are read (``states``): the
        originals they name."""
        owners = [self.candidates(f, states, i) for f, i in zip(features, ids)]
        stored = yield from self.settled({h: s for named in owners for h, s in named.items()})
        return [self.verify(f, named, stored) for f, named in zip(features, owners)]

    # -- claiming --------------------------------------------------------------------------------------

    def publish(self, done: str) -> Steps:
        """Steps: this process's progress (progress.py): every claim it stamped up to ``done`` is finished,
        its fixes written.  Versioned by the stamp's sequence, so a slower earlier publish cannot undo a
        later one.  Not retried: failing, other writers wait ``CLAIM_WAIT`` once, then take our originals as
        they are until the next publish lands."""
        try:
            yield lambda c: c.index(index=self.name, id=progress_id(WRITER), document={DONE: done},
                                    version=int(done.rsplit(".", 1)[1]), version_type="external_gte")
        except ConflictError:
            pass  # a later publish landed first
        except (TransportError, ApiError) as exc:
            self.stats.inc("errors")
            if not self.unpublished:  # once a streak: a write block fails every batch's
                logger.warning("zhdedup: could not record in %s that this writer's claims are finished (%s); other "
                               "writers wait for them once, then take its originals as they are", self.name, exc)
            self.unpublished = True
        else:
            self.unpublished = False

    def claim(self, claimants: Sequence[Claimant], judge: bool = True) -> Steps:
        """Steps: add ``claimants`` (originals whose documents are written) to the owners of their keys;
        returns :class:`Claimed`.

        With ``judge``, each is verified against every owner with a smaller stamp that its key reads show
        (at its judgement it could not have seen those claimed since); one the rule accepts makes it a
        repeat (``Claimed.repeats``), and what it claimed meanwhile is withdrawn.  And every owner with a
        larger stamp that the reads show is verified against it: that owner claimed first without seeing
        it (their claims crossed), so one the rule accepts is its repeat in the order, returned in
        ``Claimed.marked`` for the caller to mark, its claims withdrawn (a repeat holds none).  Of two
        documents sharing a key, the one whose conditional write lands second has read the other's claim,
        so one of them always judges the pair.
        Without ``judge`` (filling the registry from stored originals), owners are only added."""
        ids_of = {c.hash: key_ids(self.keys, c.features) for c in claimants}
        wanted: dict[str, list[Claimant]] = defaultdict(list)
        for c in claimants:
            for key in ids_of[c.hash]:
                wanted[key].append(c)
        repeats: dict[str, Match] = {}
        marked: dict[str, tuple[Stored, Match, str]] = {}  # a later owner, the claimant it repeats, that one's hash
        won: dict[str, list[str]] = defaultdict(list)
        verified: dict[str, set[str]] = defaultdict(set)
        pending = list(wanted)
        for _ in range(MAX_ROUNDS):
            if not pending:
                break
            states = yield from self.read(pending)
            _keep_stamps(claimants, states)
            if judge:
                yield from self._judge([c for c in claimants if c.hash not in repeats], states, ids_of, verified, repeats)
                yield from self._later([c for c in claimants if c.hash not in repeats], states, ids_of, verified, marked)
            actions, winning = [], []  # with each action, the claimants' hashes its owners list
            for key in pending:
                state = states.get(key)
                if state is None:  # most keys of a new original: nobody holds them yet
                    adding = [c for c in wanted[key] if c.hash not in repeats]
                    if adding:
                        actions.append(Action("create", key, {OWNERS: [[c.hash, c.stamp] for c in adding]}, self.name))
                        winning.append([c.hash for c in adding])
                    continue
                if len(state.owners) > MAX_POSTINGS:
                    continue  # boilerplate: no lookup reads it any more
                held = {h for h, _ in state.owners}
                adding = [c for c in wanted[key] if c.hash not in repeats and c.hash not in held]
                if adding:
                    owners = [list(o) for o in state.owners] + [[c.hash, c.stamp] for c in adding]
                    actions.append(Action("index", key, {OWNERS: owners}, self.name, seq=state.seq))
                    mine = {c.hash for c in wanted[key]}
                    winning.append([h for h, _ in owners if h in mine])
            if not actions:
                pending = []
                break
            result = yield from self.writer.write(actions)
            lost = {a.id for a in result.conflicts}
            unclaimed = lost | {a.id for a, _ in result.failed}
            if result.failed:
                logger.warning("zhdedup: %d key(s) of %s could not be claimed (%s); `zhdedup es reconcile` "
                               "claims them", len(result.failed), self.name, result.failed[0][1])
            for action, digests in zip(actions, winning):
                if action.id not in unclaimed:
                    for digest in digests:
                        won[digest].append(action.id)
            self.stats.inc("claim_conflicts", len(lost))
            pending = sorted(lost)
        if pending:
            logger.warning("zhdedup: %d key(s) of %s still contended after %d attempts; `zhdedup es reconcile` "
                           "claims them", len(pending), self.name, MAX_ROUNDS)
        kept = {h: (owner, match) for h, (owner, match, by) in marked.items() if by not in repeats}
        yield from self.withdraw({**{digest: won[digest] for digest in repeats if won[digest]},
                                  **{h: key_ids(self.keys, owner.features()) for h, (owner, _) in kept.items()}})
        return Claimed(repeats, kept)

    def _judge(self, claimants: list[Claimant], states: dict[str, KeyState | None], ids_of: dict[str, list[str]],
               verified: dict[str, set[str]], repeats: dict[str, Match]) -> Steps:
        earlier = {}
        for c in claimants:
            named = {h: s for h, s in self.candidates(c.features, states, ids_of[c.hash]).items()
                     if s < c.stamp and h != c.hash and h not in verified[c.hash]}
            verified[c.hash].update(named)
            if named:
                earlier[c.hash] = named
        if not earlier:
            return None
        stored = yield from self.settled({h: s for named in earlier.values() for h, s in named.items()})
        for c in claimants:
            if c.hash in earlier:
                match = self.verify(c.features, earlier[c.hash], stored)
                if match is not None:
                    repeats[c.hash] = match
        return None

    def _later(self, claimants: list[Claimant], states: dict[str, KeyState | None], ids_of: dict[str, list[str]],
               verified: dict[str, set[str]], marked: dict[str, tuple[Stored, Match, str]]) -> Steps:
        """The owners with a larger stamp than a claimant that repeat it (see :meth:`claim`)."""
        ours = {c.hash for c in claimants}
        later: dict[str, list[Claimant]] = defaultdict(list)
        for c in claimants:
            for h, s in self.candidates(c.features, states, ids_of[c.hash]).items():
                if s > c.stamp and h not in ours and h not in marked and h not in verified[c.hash]:
                    verified[c.hash].add(h)
                    later[h].append(c)
        if not later or self.rule is None:
            return None
        stored = yield from self.originals(later)  # not settled: a later claim may be waiting for this one
        for h, owner in stored.items():
            named = later[h]
            accepted = self.rule.accept(owner.features(), np.stack([c.features.sketch.values for c in named]),
                                        np.array([c.features.sketch.shingles for c in named]),
                                        [c.features.fingerprint for c in named])
            best = closest((a.similarity, named[a.position].stamp, (named[a.position], a)) for a in accepted)
            if best is not None:
                c, a = best
                marked[h] = (owner, Match(c.doc_id, c.doc_id, a.distance, a.similarity, a.contained, a.reason), c.hash)
        return None

    def withdraw(self, claims: dict[str, list[str]]) -> Steps:
        """Steps: remove each content hash from the owners of the keys given for it (conditional writes,
        read again on a conflict)."""
        dropping: dict[str, set[str]] = defaultdict(set)
        for digest, keys in claims.items():
            for key in keys:
                dropping[key].add(digest)
        pending = sorted(dropping)
        for _ in range(MAX_ROUNDS):
            if not pending:
                return None
            states = yield from self.read(pending)
            actions = []
            for key in pending:
                state = states.get(key)
                if state is None:
                    continue
                owners = [[h, s] for h, s in state.owners if h not in dropping[key]]
                if len(owners) < len(state.owners):
                    actions.append(Action("delete", key, None, self.name, seq=state.seq) if not owners else
                                   Action("index", key, {OWNERS: owners}, self.name, seq=state.seq))
            if not actions:
                return None
            result = yield from self.writer.write(actions)
            pending = sorted({a.id for a in result.conflicts})
        logger.warning("zhdedup: %d key(s) of %s keep claims of repeats; `zhdedup es reconcile` removes them",
                       len(pending), self.name)
        return None


def states_of(docs: Iterable[dict[str, Any]]) -> dict[str, KeyState | None]:
    """The key documents of an ``mget`` answer, by ``_id`` (None: nobody holds the key)."""
    states: dict[str, KeyState | None] = {}
    for doc in docs:
        if "error" in doc:
            raise LookupItemError(doc["error"])
        states[doc["_id"]] = KeyState((doc["_seq_no"], doc["_primary_term"]), tuple(
            (str(h), str(s)) for h, s in doc["_source"].get(OWNERS, ()))) if doc.get("found") else None
    return states


def _keep_stamps(claimants: Sequence[Claimant], states: dict[str, KeyState | None]) -> None:
    """A claimant some key names already (claimed again: a retried write, a dead writer's journal taken
    over) keeps the stamp it claimed with, so it is judged in its place in the order."""
    by_hash = {c.hash: c for c in claimants}
    for state in states.values():
        for digest, stamp in state.owners if state is not None else ():
            c = by_hash.get(digest)
            if c is not None and stamp < c.stamp:
                c.stamp = stamp


def claimant_of(digest: str, source: dict[str, Any]) -> Claimant | None:
    """The claimant a written document's source makes: an original with features, else None."""
    stored = Stored.from_source(source)
    if stored is None or stored.status != "unique" or stored.sketch is None or stored.fp is None:
        return None
    return Claimant(digest, stored.doc_id, stored.features())


FILL_PAGE = 500
FILLED = includes("status", "fp", "sketch", "passages", "seen_at")


def fill(index: str, keys: CandidateKeys, policy: RetryPolicy | None = None) -> Steps:
    """Steps: claim the keys of every original stored in ``index`` that does not hold them yet (an index
    made before the registry, claims that failed past their retries, a dead writer's journal not taken over);
    stopped and run again, it adds only what is missing.  Returns the originals read."""
    policy = policy or RetryPolicy()
    registry, stats = Registry(index, keys, None, policy, EsStats()), EsStats()
    yield lambda c: c.indices.refresh(index=index)
    after: list[Any] | None = None
    count = 0
    while True:
        body: dict[str, Any] = {"query": {"term": {STATUS: "unique"}}, "size": FILL_PAGE, "sort": [{HASH: "asc"}],
                                "_source": FILLED, "track_total_hits": False}
        if after is not None:
            body["search_after"] = after
        response = yield from policy.call(_search(index, body), stats)
        hits = response["hits"]["hits"]
        claimants = []
        for hit in hits:
            stored = Stored.from_source(hit["_source"])
            if stored is not None and stored.sketch is not None and stored.fp is not None:
                claimants.append(Claimant(hit["_id"], stored.doc_id, stored.features(), _stamp_at(stored.seen_at)))
        yield from registry.claim(claimants, judge=False)
        count += len(hits)
        if len(hits) < FILL_PAGE:
            return count
        after = hits[-1]["sort"]


def prune(index: str, keys: CandidateKeys, policy: RetryPolicy | None = None) -> Steps:
    """Steps: remove the claims of documents that are not stored originals (a writer killed between
    claiming and writing, a document reconcile marked or deleted).  Returns how many were removed."""
    policy = policy or RetryPolicy()
    registry, stats = Registry(index, keys, None, policy, EsStats()), EsStats()
    yield lambda c: c.indices.refresh(index=registry.name)
    response = yield from policy.call(lambda c: c.search(index=registry.name, scroll="5m", size=FILL_PAGE,
                                                         sort=["_doc"]), stats)
    removed = 0
    try:
        while response["hits"]["hits"]:
            hits = response["hits"]["hits"]
            named = {h for hit in hits for h, _ in hit["_source"].get(OWNERS, ())}
            stored = yield from registry.originals(named)
            dead: dict[str, list[str]] = defaultdict(list)
            for hit in hits:
                for h, _ in hit["_source"].get(OWNERS, ()):
                    if h not in stored:
                        dead[h].append(hit["_id"])
            removed += sum(map(len, dead.values()))
            yield from registry.withdraw(dict(dead))
            scroll = response["_scroll_id"]
            response = yield from policy.call(_scroll(scroll), stats)
    finally:
        if response.get("_scroll_id"):
            scroll = response["_scroll_id"]
            yield lambda c: c.clear_scroll(scroll_id=scroll)
    return removed


def _stamp_at(seen_at: str | None) -> str:
    """The stamp of an original filled in from the index: the moment it was judged (``seen_at``)."""
    ms = int(datetime.fromisoformat(seen_at).timestamp() * 1000) if seen_at else 0
    return f"{ms:013d}.{'0' * 8}.{'0' * 7}.{'0' * 10}"


def _search(index: str, body: dict[str, Any]) -> Call:
    return lambda client: client.search(index=index, **body)


def _scroll(scroll: str) -> Call:
    return lambda client: client.scroll(scroll_id=scroll, scroll="5m")
