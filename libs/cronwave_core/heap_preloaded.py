"""Imported last by a fork server's preload: the heap the preload built is frozen.

A fork server imports the libraries its children share (``cronwave_core.forked``,
``worker.job_forks``); each child is forked from it and shares those pages until it
writes one. The cyclic collector writes into every object it walks, so a child's first
full collection copies them all (about 24 MiB of each service's PSS). Frozen here
(``heap.freeze_alive``: ``gc.freeze`` after one collection), they sit in the
permanent generation, inherited by every child: no collection walks them, in the
server or in a child, and their pages stay shared. ``cronwave_core.heap.settle`` does
the same for what each service builds itself.

This module's import is its effect; it is only ever named in a preload list.
"""

from __future__ import annotations

from cronwave_core.heap import freeze_alive

freeze_alive()
