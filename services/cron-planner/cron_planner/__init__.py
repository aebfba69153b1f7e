"""cron-planner: computes fire times and fires due schedules while it holds the lease."""
