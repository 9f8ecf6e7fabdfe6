"""``DIR/log.bin``: every judged document appended as one framed record before its verdict is returned.

Frame: payload length (u32), CRC-32 of the payload (u32), payload.  A process killed mid-write
leaves a short or mismatching last frame; reading stops there and the caller cuts the file back
to the last whole record, so a torn tail costs only the record that was never acknowledged.
Each record is one ``write(2)`` straight to the OS (no user-space buffer), so ``kill -9`` loses
nothing already reported; ``fsync`` runs every ``fsync_interval`` seconds and on close, which
bounds what a power loss can take.

Records carry their entry and row numbers, so replaying a log over a snapshot that already
holds some of them (a crash between writing the snapshot and emptying the log) skips those
instead of adding them twice.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from pathlib import Path
from typing import NamedTuple

from ..memory.record import Record

LOG_FILE = "log.bin"
_FRAME = struct.Struct("<II")  # payload: Record.encode()


class ReadResult(NamedTuple):
    records: list[Record]
    good_bytes: int  # length of the whole, checksummed prefix
    dropped_bytes: int  # torn or foreign tail after it


def read_log(path: Path) -> ReadResult:
    """Every whole record of the log, stopping at the first frame that is short or fails its CRC."""
    data = path.read_bytes() if path.exists() else b""
    records: list[Record] = []
    pos = 0
    while pos + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, pos)
        payload = data[pos + _FRAME.size : pos + _FRAME.size + length]
        if len(payload) != length or zlib.crc32(payload) != crc:
            break
        try:
            records.append(Record.decode(payload))
        except (struct.error, UnicodeDecodeError):
            break
        pos += _FRAME.size + length
    return ReadResult(records, pos, len(data) - pos)


class LogWriter:
    """Appends records to a log already cut back to its whole prefix."""

    def __init__(self, path: Path, size: int, fsync_interval: float) -> None:
        self.path = path
        self.fsync_interval = fsync_interval
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, size)  # drop a torn tail before anything is appended after it
        os.lseek(self._fd, size, os.SEEK_SET)
        self.size = size
        self._synced_at = time.monotonic()

    def append(self, record: Record) -> None:
        payload = record.encode()
        frame = memoryview(_FRAME.pack(len(payload), zlib.crc32(payload)) + payload)
        try:
            while frame:  # a regular file takes it in one write unless the disk is full
                frame = frame[os.write(self._fd, frame):]
        except OSError:
            os.ftruncate(self._fd, self.size)  # no half record for later ones to hide behind
            os.lseek(self._fd, self.size, os.SEEK_SET)
            raise
        self.size += len(payload) + _FRAME.size
        if time.monotonic() - self._synced_at >= self.fsync_interval:
            self.sync()

    def sync(self) -> None:
        os.fsync(self._fd)
        self._synced_at = time.monotonic()

    def clear(self) -> None:
        """Empty the log once a snapshot holds everything in it."""
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.size = 0
        self.sync()

    def close(self) -> None:
        self.sync()
        os.close(self._fd)
