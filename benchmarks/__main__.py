"""``python -m benchmarks`` lists the benchmarks; ``python -m benchmarks NAME [options]`` runs one (runner.py)."""

from benchmarks.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
