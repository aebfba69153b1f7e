"""Transport security and authorisation: the local CA (``pki``), TLS credentials for
servers and channels (``tls``), who is calling (``identity``), the per-RPC rules
(``rules``) and the server interceptor that applies them (``authz``)."""
