"""Benchmark scripts (``python -m bench.load``). Not imported by the service."""
