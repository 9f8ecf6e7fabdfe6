"""Regenerate README.md's generated blocks: the settings table and the ``--print-body`` example.

    .venv/bin/python scripts/update_readme.py          # rewrite them in place
    .venv/bin/python scripts/update_readme.py --check  # exit 1 if README.md is stale (tests/unit/test_readme.py)

Both come from the code (config.py's dataclasses; the ``zhdedup es search`` command itself), so the
README cannot drift from what the package does.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SEARCH_EXAMPLE = ["es", "search", "--index", "news", "台风 登陆", "--inner-hits", "3", "--print-body"]


def print_body() -> str:
    """What ``zhdedup es search --index news "台风 登陆" --inner-hits 3 --print-body`` prints, at the defaults."""
    from scrapy_zhdedup.cli.main import main

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("ZHDEDUP_")}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            main(SEARCH_EXAMPLE)
    finally:
        os.environ.update(saved)
    return out.getvalue()


def blocks() -> dict[str, str]:
    from scrapy_zhdedup.config import settings_table

    return {"settings-table": settings_table(), "print-body": f"```bash\n{print_body()}```\n"}


def render(text: str) -> str:
    for name, body in blocks().items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"README.md has no <!-- {name}:start/end --> markers")
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), text)
    return text


def main(argv: list[str]) -> int:
    current = README.read_text(encoding="utf-8")
    wanted = render(current)
    if "--check" in argv:
        if current != wanted:
            print("README.md is stale: run .venv/bin/python scripts/update_readme.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
