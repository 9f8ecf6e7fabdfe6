"""The node as the requests of one client see it: answering, away (an outage), or no longer asked
because this process is closing.

Why one probe: while the node is away every request of the process would otherwise retry on its own
backoff, and a crawl holds many (a run measured 7,000 failed requests in a two-minute outage).  So
while it is away one request at a time is sent, the *probe*, at capped, jittered exponential
intervals; the others wait for its answer and go as soon as it is answered, so the node's return is
noticed within one interval, as before.  Past the budget (``ZHDEDUP_ES_OUTAGE_TIMEOUT``) requests go
on their own again, each with its own few retries, on their way to the dead-letter file.

Why ``stop``: a request cut by this process's own closing (Ctrl-C, the end of a crawl, the client
closed under a lookup still in flight) says nothing about the node; it must neither open an outage
nor print that the node does not answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)

PROBE_POLL = 0.1  # seconds between looks at a probe in flight: how late the waiters follow its answer
PROBE_LEASE = 60.0  # seconds after which a probe never answered (its request cut) no longer holds the others


@dataclass
class Outage:
    """Away from a request's first transient failure until a request is answered.  ``budget``: seconds
    the requests keep retrying while it is away.  ``holding`` counts the items waiting for a judgement
    meanwhile (the backend's), for the lines."""

    url: str = ""
    budget: float = 0.0
    since: float | None = None  # time.monotonic() of the first failure, while the node is away
    back: float = 0.0  # time.monotonic() of the node's last answer
    held: int = 0  # items waiting for a judgement now
    peak: int = 0  # most items held at once in this outage
    failures: int = 0  # failed requests in this outage
    gave_up: bool = False  # the budget ran out in this outage
    probes: int = 0  # failed probes in this outage (its first failure counts as one)
    probe: float | None = None  # time.monotonic() the probe in flight was sent at, its token
    next_probe: float = 0.0  # time.monotonic() from which the next probe may be sent
    stopped: bool = False  # this process is closing: what fails now was cut by us

    @contextmanager
    def holding(self, items: int) -> Iterator[None]:
        self.held += items
        if self.since is not None:
            self.peak = max(self.peak, self.held)
        try:
            yield
        finally:
            self.held -= items

    def stop(self) -> None:
        """This process is closing its client: a request failing from now on was cut by that, not by
        the node, and is neither retried nor said."""
        self.stopped = True

    def turn(self, now: float) -> float:
        """Seconds a request must wait before it is sent at ``now``; 0: send it now (while the node is
        away, as the probe, whose token is ``now``).  Requests wait only within the budget."""
        if self.since is None or self.over():
            return 0.0
        if self.probe is not None and now - self.probe < PROBE_LEASE:
            return PROBE_POLL
        if now < self.next_probe:
            return self.next_probe - now
        self.probe = now
        return 0.0

    def release(self, sent: float) -> None:
        """The request sent at ``sent`` ended without an answer or a failure (cancelled): if it was the
        probe, the next waiter probes at once."""
        if self.probe == sent:
            self.probe = None

    def failed(self, why: str, sent: float, pause: Callable[[int], float]) -> None:
        """A request sent at ``sent`` (time.monotonic()) failed; one sent before the node's last answer
        (a timeout from the restart, or of the requests that all went when it came back) is retried
        without opening an outage: the node answered since.  ``pause(n)``: the seconds between the
        ``n``-th failed probe and the next."""
        if self.stopped or (self.since is None and sent < self.back):
            return
        self.failures += 1
        now = time.monotonic()
        if self.since is None:
            self.since, self.peak, self.gave_up, self.probes, self.probe = now, self.held, False, 0, None
            logger.warning("zhdedup: Elasticsearch at %s does not answer (%s); items wait for it, and a crawl "
                           "slows down, for up to %g s (ZHDEDUP_ES_OUTAGE_TIMEOUT)", self.url or "the node", why,
                           self.budget)
        elif self.probe != sent:
            return  # sent before the outage began, or past the budget: the probes' schedule stays
        self.probes += 1
        self.probe, self.next_probe = None, now + pause(self.probes)

    def answered(self, sent: float) -> None:
        """A request sent at ``sent`` was answered; one sent before the node went away (answered while it
        was shutting down) does not say it is back."""
        if self.since is None or sent < self.since:
            self.back = max(self.back, time.monotonic())
            return
        seconds = time.monotonic() - self.since
        lost = ("past the budget, what could not wait is in the dead-letter file (see the line at close)"
                if self.gave_up else "nothing was given up")
        logger.warning("zhdedup: Elasticsearch at %s answers again after %.0f s: %d items were held meanwhile, "
                       "%d failed requests retried; %s", self.url or "the node", seconds, self.peak, self.failures,
                       lost)
        self.since, self.failures, self.peak, self.back, self.probe = None, 0, 0, time.monotonic(), None

    def over(self) -> bool:
        """The node has been away longer than the budget (requests stop waiting for it)."""
        return self.since is not None and time.monotonic() - self.since >= self.budget

    def give_up(self, why: str) -> None:
        """A request stops retrying; said once per outage when it is the budget that ran out."""
        if self.gave_up or self.since is None or self.budget <= 0:
            return
        self.gave_up = True
        logger.warning("zhdedup: Elasticsearch at %s has not answered for %g s (ZHDEDUP_ES_OUTAGE_TIMEOUT; %s): "
                       "items are held no longer; what cannot be judged or stored goes to the dead-letter file, "
                       "not delivered (see the line at close)", self.url or "the node", self.budget, why)
