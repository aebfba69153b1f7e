"""cronwave's server side as the ``cronwave`` command sees it: the commands that start
or drive a suite (``up``, ``worker``, ``load``, ``bench``, ``waterfall``, ``trace``).
They join the SDK's ``cronwave`` app through the entry point group ``cronwave.cli``
(``cronwave_server.commands:register``), so the SDK never imports them."""
