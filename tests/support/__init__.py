"""What several test modules need, one copy of each: texts, crawls, nodes, proxies, and the scripts the
tests run as programs (fault_spider.py, zhcrawl.py, judge_proc.py, which import nothing from here)."""

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
ROOT = SUPPORT.parent.parent  # the checkout: scripts/, examples/, README.md
README = ROOT / "README.md"
