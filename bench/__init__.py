"""Benchmarks: each script measures against a baseline in the same run and
writes its figures to `bench/results/<name>.json`. Never asserted in tests."""
