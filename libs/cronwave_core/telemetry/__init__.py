"""Tracing: spans named by hop and kind, one trace per run across every service.

The package re-exports nothing: a caller imports a name from the module that owns it,
and the modules depend on each other in one direction only, listed here from the
bottom up (``fanout`` opens spans, and ``tracing`` installs its exporters, so a
re-export here would make the package import itself through them):

- ``vocabulary``: ``Hop``, ``Kind``, the attribute names, ``RUN_KEYS``, ``BAGGAGE_KEYS``;
- ``lean``: ``LeanSpan``, ``LeanTracer``, ``LeanTracerProvider``;
- ``spans``: ``tracer``, ``hop_span``, ``kind_span``, ``codec_call``;
- ``setup``: a connection's set-up, ``dns`` and ``connect`` spans (``resolve``,
  ``connecting``);
- ``propagation``: trace context and run attributes across processes and into child
  spans (``inject_context``, ``extracted_context``, ``run_baggage``,
  ``RunAttributesProcessor``);
- ``rpc_hops``: the hop of each RPC, by a rule per gRPC service (``rpc_hop``);
- ``fanout``: a batch call's spans copied into every run's trace;
- ``export``: the local span store's JSON lines (``JsonLinesSpanExporter``);
- ``deferred``: a worker's spans of runs not sampled, held until the run's outcome
  decides (``DeferredSpans``, ``RECORD_UNSAMPLED_RUNS``);
- ``tracing``: ``init_tracing``, ``tracing_enabled``.
"""
