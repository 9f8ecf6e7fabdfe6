"""Where a resumable run (``es ingest``, ``es dedup-index``) stopped: one JSON file per run.

The file names what the run is over (``identity``: index, input, settings) and how far it got
(``progress``).  A later run goes on only if its identity is the same; a different one is an
error rather than a silent restart or a resume into the wrong place.  Saved atomically, and only
by the caller after Elasticsearch acknowledged everything up to that progress.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from scrapy_zhdedup.files.atomic import atomic_write

from ..errors import CheckpointError

FORMAT = 2


@dataclass
class Checkpoint:
    path: Path | None  # None: nothing is kept (a dry run)
    identity: dict[str, Any]
    progress: dict[str, Any] = field(default_factory=dict)
    saved: dict[str, Any] = field(init=False)  # the progress the file holds (where a rerun starts)

    def __post_init__(self) -> None:
        self.saved = dict(self.progress)

    @classmethod
    def open(cls, path: Path | None, identity: dict[str, Any], start: dict[str, Any], *, restart: bool = False,
             way_out: str = "delete it", named: Callable[[str], str] = str) -> Checkpoint:
        """The saved checkpoint of this run, or one at ``start``; ``way_out`` is what an error advises, and
        ``named`` how an identity key (``text_field``, ``dedup.similarity``) is said: as the option a user types."""
        if path is None or restart or not path.exists():
            return cls(path, identity, dict(start))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: unreadable checkpoint ({exc}); {way_out}") from exc
        if data.get("format") != FORMAT:
            raise CheckpointError(f"{path}: a checkpoint of another version of scrapy-zhdedup; {way_out}")
        if data.get("identity") != identity:
            saved = data.get("identity")
            changed = differences(saved if isinstance(saved, dict) else {}, identity, named)
            raise CheckpointError(f"{path}: the checkpoint of a run with other options ({changed}); {way_out}")
        return cls(path, identity, {**start, **data.get("progress", {})})

    def save(self) -> None:
        """Write the progress; a failed write (a full disk) names the file and leaves the last save."""
        if self.path is None:
            return
        payload = json.dumps({"format": FORMAT, "identity": self.identity, "progress": self.progress},
                             ensure_ascii=False).encode("utf-8")

        def write(fh: BinaryIO) -> None:
            fh.write(payload)

        try:
            atomic_write(self.path, write)
        except OSError as exc:
            raise CheckpointError(f"{self.path}: cannot save the checkpoint ({exc.strerror or exc}); it keeps its "
                                  f"last save, where a rerun resumes") from exc
        self.saved = dict(self.progress)


def differences(saved: dict[str, Any], now: dict[str, Any], named: Callable[[str], str] = str) -> str:
    """What differs between two identities, key by key (nested ones as ``outer.inner``): ``--text-field 'body',
    now 'content'``."""
    before, after = _flat(saved), _flat(now)
    return "; ".join(f"{named(key)} {before.get(key)!r}, now {after.get(key)!r}"
                     for key in sorted(before.keys() | after.keys()) if before.get(key) != after.get(key))


def _flat(identity: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in identity.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out
