"""The server's commands of the ``cronwave`` app, one module per command (or group),
each exposing a ``typer.Typer`` named ``app`` and importing only what its options need;
what a command needs to run (the suite, the benchmarks, SQLAlchemy, Redis...) is
imported inside it, so ``cronwave --help`` stays light. ``cronwave_server.commands``
adds them to the app."""
