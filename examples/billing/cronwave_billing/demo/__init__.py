"""The billing demo: ``cronwave demo`` and ``cronwave demo billing`` (``cli``, this
package's entry point ``billing`` of the group ``cronwave.cli``) and the driver they
and the bench's scenario ``billing`` share (``driver``, entry point ``billing`` of the
group ``cronwave.demos``)."""
