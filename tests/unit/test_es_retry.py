"""The retry policy through an outage (es_plugin/backend/retry.py, outage.py), on a clock of its own: requests retry
while the node is away for less than the budget, one probe at a time, give up past it, and the log says so in one
line each way; a request cut by the process's own closing says nothing."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
from elastic_transport import ConnectionError as EsConnectionError
from elasticsearch import ApiError

from es_plugin.backend import retry
from es_plugin.backend.outage import PROBE_POLL
from es_plugin.backend.retry import BACKOFF_CAP, Outage, RetryPolicy
from es_plugin.backend.stats import EsStats
from es_plugin.errors import ClosingError
from es_plugin.operations import Sleep


def pause(n: int) -> float:
    """The probes' backoff in the tests that call Outage directly: a second each."""
    return 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(retry.time, "monotonic", c)
    return c


def unavailable() -> ApiError:
    meta = ApiResponseMeta(status=503, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                           node=NodeConfig("http", "localhost", 9200))
    return ApiError("cluster_block_exception", meta=meta, body={"error": {"type": "cluster_block_exception",
                                                                           "reason": "state not recovered"}})


def run(policy: RetryPolicy, clock: Clock, failures: list[Exception]) -> tuple[Any, list[float]]:
    """One request through ``policy`` that fails with ``failures`` in turn, then answers "ok"; sleeps move the clock."""
    steps, slept = policy.call(lambda client: None, EsStats()), []
    step, pending = next(steps), list(failures)
    while True:
        try:
            if isinstance(step, Sleep):
                slept.append(step.seconds)
                clock.now += step.seconds
                step = steps.send(None)
            elif pending:
                step = steps.throw(pending.pop(0))
            else:
                step = steps.send("ok")
        except StopIteration as stop:
            return stop.value, slept


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_request_waits_out_an_outage_within_the_budget_with_one_line_each_way(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("http://node:9200", budget=300)
    policy = RetryPolicy(max_retries=5, outage=outage)
    with caplog.at_level(logging.WARNING), outage.holding(7):
        answer, slept = run(policy, clock, [EsConnectionError("refused")] * 40 + [unavailable()] * 5)
    assert answer == "ok"
    assert max(slept) <= BACKOFF_CAP  # the node's return is noticed within seconds
    lines = warnings(caplog)
    assert len(lines) == 2, lines
    assert "does not answer (no HTTP status: the connection failed)" in lines[0] and "300 s" in lines[0]
    assert "answers again after" in lines[1] and "7 items were held" in lines[1] and "nothing was given up" in lines[1]
    assert outage.since is None


def test_past_the_budget_a_request_fails_and_the_log_says_so_once(clock: Clock,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    policy = RetryPolicy(max_retries=2, outage=Outage("http://node:9200", budget=30))
    with caplog.at_level(logging.WARNING), pytest.raises(ApiError):
        run(policy, clock, [unavailable()] * 1000)
    assert clock.now - 1000.0 >= 30
    with pytest.raises(ApiError):  # the next request gives up after its own retries, and says nothing more
        run(policy, clock, [unavailable()] * 3)
    lines = warnings(caplog)
    assert len(lines) == 2, lines
    assert "(HTTP 503 cluster_block_exception)" in lines[0]
    assert "has not answered for 30 s" in lines[1] and "dead-letter file" in lines[1]
    assert "state not recovered" not in " ".join(lines)  # the status, not the node's error body


def test_without_a_budget_only_max_retries_are_made(clock: Clock) -> None:
    with pytest.raises(EsConnectionError):
        run(RetryPolicy(max_retries=3), clock, [EsConnectionError("refused")] * 10)
    answer, slept = run(RetryPolicy(max_retries=3), clock, [EsConnectionError("refused")] * 3)
    assert answer == "ok" and len(slept) == 3


def test_a_request_sent_before_the_node_came_back_opens_no_new_outage(clock: Clock,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("http://node:9200", budget=300)
    with caplog.at_level(logging.WARNING):
        outage.failed("no HTTP status: the connection failed", clock.now, pause)
        sent = clock.now + 1  # a request sent while the node was starting
        clock.now += 5
        outage.answered(clock.now)
        outage.failed("no HTTP status: the request timed out", sent, pause)  # it times out now
    assert outage.since is None
    assert len(warnings(caplog)) == 2


def test_an_answer_to_a_request_sent_before_the_node_went_away_does_not_end_the_outage(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("http://node:9200", budget=300)
    sent = clock.now  # a request on its way while the node shuts down
    clock.now += 1
    with caplog.at_level(logging.WARNING):
        outage.failed("no HTTP status: the connection failed", clock.now, pause)
        outage.answered(sent)  # answered before the node went
    assert outage.since is not None and len(warnings(caplog)) == 1


def test_while_the_node_is_away_one_probe_at_a_time_and_every_request_goes_once_it_is_back(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    """100 requests through a 60 s outage: before, each retried on its own backoff (2,250 failed requests in this
    test); now one probe at a time, the others wait for its answer, and every request is answered within one
    backoff cap of the node's return."""
    outage = Outage("http://node:9200", budget=300)
    policy = RetryPolicy(max_retries=5, outage=outage)
    back_at = clock.now + 60
    requests = [policy.call(lambda client: None, EsStats()) for _ in range(100)]
    wake = dict.fromkeys(range(len(requests)), clock.now)  # when each request runs next
    sent_while_away, done = 0, {}
    with caplog.at_level(logging.WARNING):
        while wake:
            i = min(wake, key=wake.__getitem__)
            clock.now = max(clock.now, wake.pop(i))
            try:
                step = requests[i].send(None)  # started, or its Sleep over
                while not isinstance(step, Sleep):  # a call: refused at once while the node is away
                    if clock.now < back_at:
                        sent_while_away += 1
                        step = requests[i].throw(EsConnectionError("refused"))
                    else:
                        step = requests[i].send("ok")
            except StopIteration:
                done[i] = clock.now
                continue
            wake[i] = clock.now + step.seconds
    assert len(done) == 100
    assert sent_while_away <= 100 + 60 / (BACKOFF_CAP / 2) + 1, sent_while_away  # the first failures, then probes
    assert max(done.values()) - back_at <= BACKOFF_CAP + PROBE_POLL + 1e-6
    assert len(warnings(caplog)) == 2


def test_a_request_cut_by_the_process_closing_opens_no_outage_and_is_not_retried(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    """Ctrl-C in `es ingest` closed the client under a lookup still in flight, which printed that the node did
    not answer before the interrupt line, about one run in two."""
    outage = Outage("http://node:9200", budget=300)
    outage.stop()
    with caplog.at_level(logging.WARNING), pytest.raises(ClosingError, match="client was closing"):
        run(RetryPolicy(max_retries=5, outage=outage), clock, [EsConnectionError("Server disconnected")])
    assert outage.since is None and warnings(caplog) == []


def test_timeouts_of_the_requests_that_went_together_when_the_node_came_back_open_no_new_outage(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    """The outage fault test's crawl: the waiting requests all went once the node answered, some timed out on the
    node just started, and that was said as a second outage (one line each way expected)."""
    outage = Outage("http://node:9200", budget=300)
    with caplog.at_level(logging.WARNING):
        outage.failed("no HTTP status: the connection failed", clock.now, pause)
        clock.now += 60
        outage.answered(clock.now)  # the probe: the node is back, the waiters go
        herd = clock.now + 0.1
        clock.now += 1
        outage.answered(herd)  # one of them answered
        clock.now += 4
        outage.failed("no HTTP status: the request timed out", herd, pause)  # another, sent with it, timed out
    assert outage.since is None
    assert len(warnings(caplog)) == 2
