"""What each command needs of a secured cluster, checked when it starts.

One request, ``_security/user/_has_privileges``, which any user may send about itself, tells the
privileges the user has on the cluster and on the command's index; a missing one stops the command
(or the crawl) at once with one line naming it, instead of a 403 on the first document or, for a
crawl, one dead-lettered item after another.  The lists below are what the commands were found to
need on Elasticsearch 9.2 (tests/es/test_es_security.py checks each privilege against the command that
needs it); README.md ("Privileges") has the role to grant.

Two needs depend on the index: creating it (``create_index``, and ``manage_index_templates`` for its
template) only when it does not exist yet, so a crawler of an index someone installed needs neither;
and ``manage`` for ``es dedup-index`` only when the index lacks the ``zhdedup`` fields (adding them is
a mapping update, which ``write`` still allows on 9.x with a deprecation warning, but not past it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elasticsearch import NotFoundError

from .errors import MissingPrivilegeError
from .operations import Steps

CREATE_INDEX, TEMPLATES, MANAGE = "create_index", "manage_index_templates", "manage"


@dataclass(frozen=True)
class Needs:
    """Privileges one command needs: ``doing`` names it in the message."""

    doing: str
    index: tuple[str, ...]  # on its index
    cluster: tuple[str, ...] = ()
    creates: bool = False  # creates the index and its template when the index is missing
    maps: bool = False  # adds the zhdedup fields to an index that lacks them

    def asked(self) -> tuple[list[str], list[str]]:
        """Cluster and index privileges to ask about: the needs and the ones that may be needed."""
        cluster = [*self.cluster, *([TEMPLATES] if self.creates and TEMPLATES not in self.cluster else [])]
        index = [*self.index, *([CREATE_INDEX] if self.creates else []), *([MANAGE] if self.maps else [])]
        return cluster, index


def _reading(*more: str) -> tuple[str, ...]:
    return ("read", "view_index_metadata", *more)


INSTALL = Needs("es install", ("view_index_metadata",), (TEMPLATES,), creates=True)
STATUS = Needs("es status", _reading(), (TEMPLATES,))  # it reports the installed template
SEARCH = Needs("es search", ("read",))
REPORT = Needs("es report", ("read",))
CRAWL = Needs("the crawl", _reading("write"), creates=True)
INGEST = Needs("es ingest", _reading("write", "maintenance"), creates=True)  # maintenance: a refresh at start
REPLAY = Needs("es replay", INGEST.index, creates=True)


def reconcile(apply: bool) -> Needs:
    return Needs("es reconcile", _reading("maintenance", *(["write"] if apply else [])))


def dedup_index(apply: bool) -> Needs:
    return Needs("es dedup-index", _reading("maintenance", *(["write"] if apply else [])), maps=apply)


@dataclass(frozen=True)
class Access:
    """A command's needs on one index."""

    index: str
    needs: Needs

    @property
    def names(self) -> list[str]:
        """The index and its key registry (backend/registry.py): every command needs the same on both."""
        return [self.index, f"{self.index}-keys"]

    def request(self) -> dict[str, Any]:
        """The body of ``_has_privileges``."""
        cluster, index = self.needs.asked()
        return {"cluster": cluster, "index": [{"names": self.names, "privileges": index}]}

    def check(self, answer: Mapping[str, Any]) -> Steps:
        """Steps: raise :class:`MissingPrivilegeError` naming what ``answer`` (of ``_has_privileges``) lacks
        for this command; the index is looked at only for a need that depends on it, once the others are met."""
        on = [answer.get("index", {}).get(name, {}) for name in self.names]
        held = {**answer.get("cluster", {}), **{p: all(h.get(p, False) for h in on) for p in on[0]}}
        cluster, index = self.needs.asked()
        missing = [p for p in [*cluster, *index] if not held.get(p, False)]
        creating = [p for p in missing if p == CREATE_INDEX or (p == TEMPLATES and p not in self.needs.cluster)]
        mapping = [p for p in missing if p == MANAGE]
        user = str(answer.get("username", "?"))
        if len(creating) + len(mapping) < len(missing):
            lacking = [p for p in missing if p not in creating + mapping]
            on_index = all(on[0].get(p, False) for p in lacking if p in index)
            raise MissingPrivilegeError(self.message(user, lacking, where=self.names[1] if on_index else None))
        if creating and not (yield lambda c: c.indices.exists(index=self.index)):
            raise MissingPrivilegeError(self.message(user, creating, f"to create index {self.index!r}, which does "
                                                                     f"not exist yet"))
        if mapping and not (yield from self._has_fields()):
            raise MissingPrivilegeError(self.message(user, mapping, f"to add the zhdedup fields to the mapping of "
                                                                    f"{self.index!r}"))
        return None

    def _has_fields(self) -> Steps:
        """Steps: whether the index's mapping has the zhdedup fields already (or there is no index to map)."""
        try:
            response = yield lambda c: c.indices.get_mapping(index=self.index)
        except NotFoundError:
            return True  # the command says itself that there is no such index
        return all("zhdedup" in entry.get("mappings", {}).get("_meta", {}) for entry in response.body.values())

    def message(self, user: str, missing: list[str], why: str = "", where: str | None = None) -> str:
        """``where``: the index named (default: the command's; its key registry when only that lacks them)."""
        where = where or self.index
        cluster = [p for p in missing if p in self.needs.asked()[0]]
        index = [p for p in missing if p not in cluster]
        parts = []
        if index:
            parts.append(f"the index privilege{'s' if len(index) > 1 else ''} {_names(index)} on {where!r}")
        if cluster:
            parts.append(f"the cluster privilege{'s' if len(cluster) > 1 else ''} {_names(cluster)}")
        return (f"user {user!r} lacks {' and '.join(parts)}, which {self.needs.doing} needs{' ' + why if why else ''}; "
                f"README.md, section Privileges, has the role to grant")


def _names(privileges: list[str]) -> str:
    quoted = [f"'{p}'" for p in privileges]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"
