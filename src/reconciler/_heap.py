"""The cyclic garbage collector's policy for a long-running controller process.

CPython's collector walks every tracked container of a generation each time it collects
it. In an operator nearly all of them live as long as the process: the interpreter's own
modules, classes and functions, and the informers' first listing. With the default
thresholds the collector walked them again and again while the watch stream allocated: at
1,000 nodes it took ~1.8 s of the operator's ~18 CPU s to roll the stack out
(`bench/scale.py --nodes 1000 --no-floor`, timed with a `gc.callbacks` hook), 1.0 s of it
in five full collections. Freezing what is alive once the caches have synced, and letting
the youngest generation grow larger before it is collected, brought that to 0.3 s with no
change in peak memory.

Both are process-wide, so a library must not choose them: the operator's entry point calls
`tune_collector`, and a `Manager` built with `freeze_heap_after_sync=True` calls
`freeze_long_lived` once its caches are in.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("reconciler.heap")

# The young generation is collected after this many net container allocations (CPython's
# default is 700: a watch event's decoded object alone is dozens), the middle one after 20
# young collections and the oldest after 20 middle ones (CPython also waits until a quarter
# of the oldest generation is new). Cycles still die young: the young collection is what
# finds them.
THRESHOLDS = (20_000, 20, 20)


def tune_collector() -> None:
    """Collect less often: see `THRESHOLDS`."""
    gc.set_threshold(*THRESHOLDS)


def freeze_long_lived() -> None:
    """Collect once, then move every surviving object out of the collector's sight.

    Reference counting still frees them when they are dropped (a decoded object holds no
    cycle). A frozen cycle that dies later (a watch's first connection, say) is kept: at
    worst part of the heap as it was at the freeze, once, never a growing leak."""
    gc.collect()
    gc.freeze()
    log.debug("froze %d long-lived objects out of the collector's walks", gc.get_freeze_count())
