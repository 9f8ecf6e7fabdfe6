"""Serve the generated example site on 127.0.0.1 with the standard library.

    python -m examples.site.serve [--port 8765] [--dir examples/site/public]

Files go out as raw bytes, never transcoded.  HTML declaring a non-UTF-8 charset
(the GBK and Big5 pages) is sent as plain ``text/html`` without a charset, as many
real Chinese sites do, so the crawler has to find the encoding from the ``<meta>``
tag or the bytes; UTF-8 pages get ``text/html; charset=utf-8``.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import threading
from collections.abc import Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_DIR = Path(__file__).resolve().parent / "public"
_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_-]+)""", re.I)


def html_content_type(head: bytes) -> str:
    """Content-Type for an HTML file from its first bytes: charset only when UTF-8."""
    match = _META_CHARSET.search(head)
    declared = match.group(1).decode("ascii").lower() if match else "utf-8"
    return "text/html; charset=utf-8" if declared in ("utf-8", "utf8") else "text/html"


class SiteHandler(SimpleHTTPRequestHandler):
    """Static file handler that keeps the example's charset behaviour and stays quiet."""

    def guess_type(self, path: str | Path) -> str:
        if str(path).endswith((".html", ".htm")):
            with open(path, "rb") as f:
                return html_content_type(f.read(2048))
        if str(path).endswith(".json"):
            return "application/json"
        return super().guess_type(path)

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:  # type: ignore[attr-defined]
            super().log_message(format, *args)


def make_server(directory: str | Path, port: int = 0, verbose: bool = False) -> ThreadingHTTPServer:
    root = Path(directory)
    if not (root / "index.html").is_file():
        raise FileNotFoundError(f"{root}/index.html not found; run `python -m examples.site.generate {root}` first")
    server = ThreadingHTTPServer((HOST, port), functools.partial(SiteHandler, directory=str(root)))
    server.verbose = verbose  # type: ignore[attr-defined]
    return server


def start_server(directory: str | Path, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``directory`` in a daemon thread; return the server and its base URL.

    ``port=0`` picks a free port.  Stop it with ``server.shutdown(); server.server_close()``.
    """
    server = make_server(directory, port)
    threading.Thread(target=server.serve_forever, name="example-site", daemon=True).start()
    return server, f"http://{HOST}:{server.server_address[1]}/"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.site.serve", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="generated site directory")
    args = parser.parse_args(argv)
    try:
        server = make_server(args.dir, args.port, verbose=True)
    except FileNotFoundError as err:
        print(err, file=sys.stderr)
        return 1
    print(f"serving {args.dir} at http://{HOST}:{server.server_address[1]}/ (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
