"""The ``zhdedup/es/*`` counters (retries, errors, documents indexed, conflicts), on a Scrapy stats collector
when there is one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Stats(Protocol):
    """Scrapy's stats collector, or anything with its ``inc_value``."""

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


@dataclass
class EsStats:
    """The ``zhdedup/es/*`` counters, on a Scrapy stats collector when there is one."""

    stats: Stats | None = None

    def inc(self, name: str, count: int = 1) -> None:
        self.inc_key(f"zhdedup/es/{name}", count)

    def inc_key(self, key: str, count: int = 1) -> None:
        if self.stats is not None and count:
            self.stats.inc_value(key, count)
