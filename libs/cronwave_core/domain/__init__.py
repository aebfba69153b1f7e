"""What a schedule means, with no I/O: calendars and DST, the policies (overlap,
catch-up, backfill, jitter), specs, run states and trigger kinds, and the exact wait
for an instant.

These modules import the standard library, protobuf messages (each type converts
itself to and from its proto) and cronwave_core's value modules (``errors``,
``fields``, ``proto_enum``, ``wire``) -- never a network, a database, a broker or
telemetry. The rest of cronwave_core is the infrastructure the services share (RPC,
queueing, caching, telemetry, settings, start-up). ``tests/test_layers.py`` holds
the line.
"""
