"""The ``cronwave`` command line: ``cli.main`` builds the app from one module per
command group."""
