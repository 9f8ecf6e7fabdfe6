#!/usr/bin/env bash
# The README's one command: install scrapy-zhdedup (with the example's extras) into .venv, then
# generate the example news site, serve it on 127.0.0.1, crawl it through the pipeline on the
# embedded store and print which pages repeat which.  Extra arguments go to run_example.py,
# e.g. `bash scripts/demo.sh --backend elasticsearch --es-url http://127.0.0.1:9200`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/bootstrap.sh examples
exec .venv/bin/python examples/run_example.py "$@"
