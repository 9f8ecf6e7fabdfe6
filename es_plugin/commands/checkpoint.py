"""Where a resumable run (``es ingest``, ``es dedup-index``) stopped: one JSON file per run.

The file names what the run is over (``identity``: index, input, settings) and how far it got
(``progress``).  A later run goes on only if its identity is the same; a different one is an
error rather than a silent restart or a resume into the wrong place.  Saved atomically, and only
by the caller after Elasticsearch acknowledged everything up to that progress.
"""

from __future__ import annotations

import json
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
             way_out: str = "delete it") -> Checkpoint:
        """The saved checkpoint of this run, or one at ``start``; ``way_out`` is what an error advises."""
        if path is None or restart or not path.exists():
            return cls(path, identity, dict(start))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: unreadable checkpoint ({exc}); {way_out}") from exc
        if data.get("format") != FORMAT or data.get("identity") != identity:
            raise CheckpointError(f"{path}: checkpoint of another run ({data.get('identity')}, now {identity}); "
                                  f"{way_out}")
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
