"""What the benchmarks share: wall and CPU time of one call."""

from __future__ import annotations

import time


def timed(function):
    """Call ``function()``; return ``(value, wall seconds, CPU seconds of this process, all threads)``."""
    wall = time.perf_counter()
    cpu = time.process_time()
    value = function()
    return value, time.perf_counter() - wall, time.process_time() - cpu
