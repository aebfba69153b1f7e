"""A job type and its retry policy in their wire form, as the worker registers them
with the store (the SDK's types know nothing of protobuf)."""

from __future__ import annotations

from cronwave_proto.v1 import common_pb2

from cronwave import JobType, RetryPolicy
from cronwave_core.convert import td_to_duration


def retry_from_proto(msg: common_pb2.RetryPolicy) -> RetryPolicy:
    """A zero field means the default, as in the proto's wire form."""
    default = RetryPolicy()
    initial = msg.initial_interval.ToTimedelta() or default.initial_interval
    return RetryPolicy(
        initial_interval=initial,
        backoff_coefficient=msg.backoff_coefficient or default.backoff_coefficient,
        maximum_interval=msg.maximum_interval.ToTimedelta()
        or max(default.maximum_interval, initial),
        maximum_attempts=msg.maximum_attempts or default.maximum_attempts,
        non_retryable_errors=tuple(msg.non_retryable_errors),
    )


def retry_to_proto(policy: RetryPolicy) -> common_pb2.RetryPolicy:
    return common_pb2.RetryPolicy(
        initial_interval=td_to_duration(policy.initial_interval),
        backoff_coefficient=policy.backoff_coefficient,
        maximum_interval=td_to_duration(policy.maximum_interval),
        maximum_attempts=policy.maximum_attempts,
        non_retryable_errors=list(policy.non_retryable_errors),
    )


def job_type_to_proto(job_type: JobType) -> common_pb2.JobType:
    return common_pb2.JobType(
        name=job_type.name,
        duration_limit=td_to_duration(job_type.duration_limit),
        heartbeat_timeout=td_to_duration(job_type.heartbeat_timeout),
        retry=retry_to_proto(job_type.retry_policy),
        queue=job_type.queue,
        priority=job_type.priority,
        financial=job_type.financial,
    )
