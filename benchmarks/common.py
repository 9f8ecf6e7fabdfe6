"""What the benchmarks share: the machine's description, timing, memory, tables, the CLI and the node.

The machine these were written for has 2 cores shared with other work, hence :func:`interleaved`:
contenders take turns, each is repeated, and the best run counts (noise only ever slows a run).
``runner.py`` prints the machine first and saves it with every result, so a table in the README can
always be traced to a run.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpora import CACHE_DIR as CACHE_DIR  # scan files and fingerprints are cached there

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

PACKAGES = ("scrapy-zhdedup", "numpy", "rjieba", "jieba", "simhash", "datasketch", "rensa", "pybloom-live", "scrapy")


# --- the machine --------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def machine() -> dict[str, Any]:
    """What the numbers depend on: CPU, cores, RAM, Python, library versions, and the load then."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(_ram_gib(), 1),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "packages": {p: _version(p) for p in PACKAGES},
        "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def describe(info: Mapping[str, Any]) -> str:
    load = " ".join(f"{x:.2f}" for x in info["load_avg"])
    libs = ", ".join(f"{k} {v}" for k, v in info["packages"].items())
    es = info.get("elasticsearch")
    node = f"\nElasticsearch {', '.join(es['versions'])}, heap {' + '.join(mib(h) for h in es['heap_max_bytes'])}" if es else ""
    return (f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM, "
            f"Python {info['python']}, {info['os']}\n"
            f"load average at start: {load}   ({info['when']})\nlibraries: {libs}{node}")


# --- timing -------------------------------------------------------------------------------


def interleaved(contenders: Mapping[str, Callable[[], Any]], repeat: int = 3,
                setup: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """Run each contender ``repeat`` times, taking turns (A B C A B C ...); wall seconds per run.

    Taking turns spreads the noise of a shared machine over all contenders instead of
    letting one of them meet a busy minute alone.
    """
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            if setup is not None:
                setup()
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


# --- memory -------------------------------------------------------------------------------


def rss_bytes() -> int:
    """Current resident set size of this process (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


# --- output -------------------------------------------------------------------------------


def fmt(value: Any, digits: int = 3) -> str:
    """Numbers for tables: thousands separators, a few significant digits, '-' for missing."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if value != value:  # NaN
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}g}" if value else "0"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table (readable in a terminal, pasteable into the README)."""
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"

    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(r) for r in cells[1:]])


# --- subprocesses: the CLI, and measurements in a fresh interpreter ---------------------------------


def zhdedup_command() -> list[str]:
    script = Path(sys.executable).with_name("zhdedup")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scrapy_zhdedup.cli"]


def run_cli(args: Sequence[str]) -> tuple[float, str]:
    """Run ``zhdedup <args>``; wall seconds (start-up included) and its stderr + stdout."""
    cmd = [*zhdedup_command(), *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
    return wall, proc.stderr + proc.stdout


def _call(queue: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    queue.put(fn(*args))


def in_child(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a fresh interpreter (``spawn``), so its memory figures are its own; its result."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_call, args=(queue, fn, args))
    proc.start()
    result = queue.get()  # before join: a full pipe would block the child's exit
    proc.join()
    if proc.exitcode:
        raise RuntimeError(f"{fn.__name__} failed in its process (exit code {proc.exitcode})")
    return result


# --- the Elasticsearch node ---------------------------------------------------------------------------


def node(url: str) -> dict[str, Any]:
    """The node's versions and heaps, saved with the machine (the figures depend on them)."""
    from es_plugin.client import make_client  # whichever flavour the node is (es_plugin/flavour.py)
    from scrapy_zhdedup.config import EsConfig

    client = make_client(EsConfig(es_url=url, es_timeout=60))
    try:
        return {"url": url,
                "versions": [n["version"] for n in client.nodes.info(metric="process")["nodes"].values()],
                "heap_max_bytes": [n["jvm"]["mem"]["heap_max_in_bytes"]
                                   for n in client.nodes.stats(metric="jvm")["nodes"].values()]}
    finally:
        client.close()


def fresh_index(client: Elasticsearch, index: str) -> None:
    """Delete ``index``, its key registry and the template ``es install`` made for it, if there."""
    client.options(ignore_status=404).indices.delete(index=[index, f"{index}-keys"], ignore_unavailable=True)
    client.options(ignore_status=404).indices.delete_index_template(name=f"zhdedup-{index}")


def node_cpu_ms(client: Elasticsearch) -> int:
    """CPU milliseconds the cluster's node processes have used (``_nodes/stats``: what a node spends, not
    wall time; a node caches it for a second)."""
    nodes = client.nodes.stats(metric="process")["nodes"].values()
    return sum(node["process"]["cpu"]["total_in_millis"] for node in nodes)


def wait_until_quiet(client: Elasticsearch, *, share: float = 0.05, window: float = 2.0, limit: float = 20.0) -> None:
    """Wait until the cluster uses less than ``share`` of a core for
    ``window`` seconds (at most ``limit``): an index written by the run before merges for seconds after
    it returned (~0.6 s of CPU after an ``es ingest`` of 3,000 documents), and would otherwise run
    during the next one's timing.  The window is longer than the 1 s for which a node caches its
    process statistics."""
    deadline = time.monotonic() + limit
    before = node_cpu_ms(client)
    while time.monotonic() < deadline:
        time.sleep(window)
        now = node_cpu_ms(client)
        if now - before < share * window * 1000:
            return
        before = now


def expect(ok: bool, what: str) -> None:
    """A benchmark's self-check: stop before any figure is taken with an instrument that is wrong."""
    if not ok:
        raise SystemExit(f"self-check failed: {what}")
