"""What cronwave's services share: settings, errors, the server bootstrap, RPC
channels, telemetry and the calendar. Imported by services and the SDK; imports no
service."""
