"""The billing demo, packaged the way a user's job code is: ``billing.nightly`` (the
job, its database and its checkpoints) and the sandbox payment gateway it charges
through (``cronwave_billing.gateway``, the ``payment-gateway`` command).

Installed, it is found by every worker through its entry point
(``[project.entry-points."cronwave.jobs"]`` in its pyproject.toml names
``cronwave_billing.jobs``); its settings, drills, gateway identity and gateway rules
reach cronwave through ``cronwave_billing.extension`` (group ``cronwave.extensions``), its
gateway through ``cronwave_billing.suite_process`` (group ``cronwave.processes``), and the
demo (``cronwave demo``, the bench's scenario ``billing``) through
``cronwave_billing.demo`` (groups ``cronwave.cli`` and ``cronwave.demos``). Nothing in
cronwave imports it by name.
"""
