"""The pipeline's ledger of items judged and not yet delivered (scrapy_zhdedup/pipelines/delivery.py), with real
processes: one SIGKILLed mid-run leaves its undelivered ids to the next, one alive keeps its own."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_zhdedup.pipelines.delivery import DeliveryLedger

pytestmark = pytest.mark.fault

NOTE_THEN = """
import os, signal, sys, time
from pathlib import Path
from scrapy_zhdedup.pipelines.delivery import DeliveryLedger
ledger = DeliveryLedger(Path(sys.argv[1]), "store")
ledger.open()
for doc_id in ("a", "b", "c\\n<d>", "e"):
    ledger.note(doc_id)
ledger.done("a")
ledger.done("e")
print("ready", flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
"""


def writer(directory: Path, then: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", NOTE_THEN, str(directory), then], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_a_killed_runs_undelivered_items_go_to_the_next_and_a_live_runs_stay_its_own(tmp_path: Path) -> None:
    killed = writer(tmp_path, "kill")
    assert killed.wait(timeout=30) == -signal.SIGKILL
    ledger = DeliveryLedger(tmp_path, "store")
    ledger.open()
    assert ledger.undelivered == {"b", "c\n<d>"}  # noted, never done: judged, never delivered
    assert len(list(tmp_path.glob(".zhdedup-undelivered-*.log"))) == 1  # the killed one's file was taken over
    alive = writer(tmp_path, "sleep")  # finds only a live ledger's file: takes nothing
    try:
        ledger.done("b")
        ledger.close()  # "c\n<d>" is still undelivered: the file stays for the next run
        again = DeliveryLedger(tmp_path, "store")
        again.open()
        assert again.undelivered == {"c\n<d>"}  # not the live one's b, c, <d>
        again.done("c\n<d>")
        again.close()
        assert len(list(tmp_path.glob(".zhdedup-undelivered-*.log"))) == 1  # only the live one's
    finally:
        alive.kill()
        alive.wait()
    last = DeliveryLedger(tmp_path, "store")
    last.open()
    assert last.undelivered == {"b", "c\n<d>"}  # the second process is gone too: its turn
    last.close()


def test_a_line_cut_short_by_a_kill_is_skipped(tmp_path: Path) -> None:
    ledger = DeliveryLedger(tmp_path, "store")
    (tmp_path / f"{ledger.stem}0123456789abcdef.log").write_text('+"a"\n+"b"\n-"a"\n+"c', encoding="ascii")
    ledger.open()
    assert ledger.undelivered == {"b"}
    ledger.close()
