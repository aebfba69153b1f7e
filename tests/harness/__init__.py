"""The processes the tests start, one module per kind of thing, each with its fixtures
(registered for every test by ``tests/conftest.py``):

- ``processes``: ``ProcessTable``, which records every process a fixture starts and
  finds what those started in turn (job processes too); every fixture that starts
  processes ends with its ``close``, which stops all, kills and reports leftovers.
- ``suites``: ``TrackedSuite`` (the ``cronwave_core.suite.Suite`` that ``cronwave up``
  and the benchmarks use), ``make_suite`` and ``services``.
- ``store``: a workflow-store process on its own (``start_store``, ``store``) and the
  requests the tests send it.
- ``gateway``: the payment gateway on its own, and the billing suite.
- ``cluster``: store, dispatcher and worker (``cluster``), and the reliability rigs
  (``make_rig``).
- ``redis``: the session's Redis (``redis_url``) and one a test owns (``own_redis``).
- ``clients``: the SDK client of a suite (``client_for``).
- ``planner``: planner replicas as processes, and planners on manual clocks.
- ``beats``: a stand-in receiver of a job's heartbeats.
- ``netns``: a service process in a network namespace of its own, behind a veth link a
  test cuts for real (root only).
"""
