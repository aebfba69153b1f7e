"""Wrapping a gRPC method handler: the four call shapes, in one place.

A server interceptor that must run code around every call (who is calling, how an
error becomes a status) wraps the method handler grpc found for it. A handler is one
of four shapes (unary or streaming request, unary or streaming response), and a
streaming response is a generator, so what runs around it must run around its
iteration. ``around`` does that for each shape: an interceptor states only what runs
around a call, as a context manager made per call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import grpc

#: Made for each call, entered before the servicer runs and left after it (for a
#: streaming response: after its last message, or when it fails or is cancelled).
Guard = Callable[[grpc.ServicerContext], AbstractContextManager[object]]


def around(handler: Any, guard: Guard, decode: Callable[[Any], Any] | None = None) -> Any:
    """``handler`` (a ``grpc.RpcMethodHandler``) with each call run inside
    ``guard(context)``. With ``decode``, the handler takes the request's bytes and its
    requests are decoded inside the guard, which then sees a decoding error too."""
    replaced: dict[str, Any] = {"request_deserializer": None} if decode is not None else {}
    if handler.unary_unary:
        inner_uu = handler.unary_unary

        def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
            with guard(context):
                return inner_uu(decode(request) if decode else request, context)

        return handler._replace(unary_unary=unary_unary, **replaced)
    if handler.unary_stream:
        inner_us = handler.unary_stream

        def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            with guard(context):
                yield from inner_us(decode(request) if decode else request, context)

        return handler._replace(unary_stream=unary_stream, **replaced)
    if handler.stream_unary:
        inner_su = handler.stream_unary

        def stream_unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            with guard(context):
                return inner_su(map(decode, requests) if decode else requests, context)

        return handler._replace(stream_unary=stream_unary, **replaced)
    if handler.stream_stream:
        inner_ss = handler.stream_stream

        def stream_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            with guard(context):
                yield from inner_ss(map(decode, requests) if decode else requests, context)

        return handler._replace(stream_stream=stream_stream, **replaced)
    return handler
