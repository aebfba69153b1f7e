"""The web console: a Starlette application over the suite's gRPC services.

It reads schedules, runs, events, dead letters, leases and health from the services
(never from the database: only the workflow-store touches it) and the latency
waterfall from the suite's spans. Operators pause, resume, trigger and replay from it;
see ``console.guard`` for who may.
"""
