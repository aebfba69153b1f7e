"""Benchmarks of a running cronwave suite: each function starts real processes,
drives a scenario and returns JSON-able figures (``cronwave bench`` prints them)."""
