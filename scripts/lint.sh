#!/usr/bin/env bash
# Lint and type gates (.ci/run runs them before the tests): ruff on everything Python, mypy on the packages, corpora/ and benchmarks/ (files: pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check scrapy_zhdedup es_plugin tests benchmarks corpora examples
.venv/bin/mypy  # files and settings: [tool.mypy] in pyproject.toml
