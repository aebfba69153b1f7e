"""workflow-store: the only process that touches the scheduler's database.

It records runs (unique per schedule and fire time), refuses stale fencing tokens
and stale attempts, and serves schedules, job types and run history over gRPC.
"""
