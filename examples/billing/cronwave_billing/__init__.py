"""The billing demo, packaged the way a user's job code is: ``billing.nightly`` (the
job, its database and its checkpoints) and the sandbox payment gateway it charges
through (``cronwave_billing.gateway``, the ``payment-gateway`` command).

Installed, it is found by every worker through its entry point
(``[project.entry-points."cronwave.jobs"]`` in its pyproject.toml names
``cronwave_billing.jobs``); nothing in cronwave imports it, but for ``cronwave demo``,
which loads it when run.
"""
