"""payment-gateway: the sandbox payment gateway that ships with the billing demo.

Stripe-like idempotency keys make a charge safe to repeat: the same key returns the
first result and never charges twice, the same key with other parameters is refused.
It can be told to time out after committing, so a caller can be shown a charge that
happened although its call failed.
"""
