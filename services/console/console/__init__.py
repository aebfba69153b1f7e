"""The web console: a Starlette application over the suite's gRPC services.

It reads schedules, runs, events, dead letters, leases and health from the services
(never from the database: only the workflow-store touches it) and the latency
waterfall from the suite's spans, as the console itself. A person who signs in with
an API key (``console.sign_in``, ``console.sessions``) may also pause, resume, trigger
and replay, each change made with that person's key (``console.actions``).
"""
