"""The worker: takes runs off its queues, claims each from the workflow-store, runs
the job with heartbeats, and records the outcome."""
