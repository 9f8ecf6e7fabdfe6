"""An in-process TCP proxy between a client and the shared test node, to simulate an outage safely.

Failure tests must never stop or slow the node other engineers use, so they talk to it through this
proxy and break the proxy instead: :meth:`EsProxy.cut` drops every connection and refuses new ones
(a node that is down), :meth:`EsProxy.pause` holds all bytes (a node that hangs: clients time out),
:meth:`EsProxy.restore` lets traffic through again, :meth:`EsProxy.jitter` delays each chunk by a random
time (a loaded network: a later request's answer may overtake an earlier one's).  It runs on the test's
own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from urllib.parse import urlsplit


class EsProxy:
    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 9200)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.refusing = False
        self.connections = 0
        self._handlers: set[asyncio.Task[None]] = set()
        self._delay: tuple[random.Random, float] | None = None

    async def start(self) -> str:
        """Listen on a free loopback port; returns the URL to give the client."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def cut(self) -> None:
        """Drop every open connection and refuse (reset) new ones."""
        self.refusing = True
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def pause(self) -> None:
        """Keep connections open but forward nothing, so requests time out."""
        self._flowing.clear()

    def restore(self) -> None:
        self.refusing = False
        self._flowing.set()
        self._delay = None

    def jitter(self, seconds: float, seed: int = 0) -> None:
        """Hold each chunk for a random 0..``seconds`` before forwarding it (order within a connection kept)."""
        self._delay = (random.Random(seed), seconds)

    async def close(self) -> None:
        """Stop listening and let every connection handler end (cancelled handlers make asyncio log noise)."""
        self.cut()
        self._flowing.set()  # held pipes wake up, see `refusing` and stop
        if self._server is not None:
            self._server.close()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            client_writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        self.connections += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers.update((client_writer, upstream_writer))
        try:
            await asyncio.gather(self._pipe(client_reader, upstream_writer), self._pipe(upstream_reader, client_writer))
        finally:
            for writer in (client_writer, upstream_writer):
                self._writers.discard(writer)
                writer.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                if self._delay is not None:
                    rng, seconds = self._delay
                    await asyncio.sleep(rng.uniform(0, seconds))
                if self.refusing:
                    return
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()
