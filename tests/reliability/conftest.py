"""The reliability tests' fixtures: a pool of job processes without a worker."""

from tests.reliability.pools import pool

__all__ = ["pool"]
