"""netio-trace benchmarks: `python -m bench.run` (or `make bench`)."""
