"""What the benchmarks share: wall and CPU time of one call, and JAX's compilation time as it happens."""

from __future__ import annotations

import time

import jax

#: JAX's monitoring events whose durations add up to compilation (tracing, lowering, XLA).
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


class CompileClock:
    """Seconds JAX spends compiling from the last :meth:`reset` (a listener on its monitoring events)."""

    def __init__(self):
        self.seconds = 0.0
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event: str, duration: float, **_) -> None:
        if event in COMPILE_EVENTS:
            self.seconds += duration

    def reset(self) -> None:
        self.seconds = 0.0


def timed(function):
    """Call ``function()``; return ``(value, wall seconds, CPU seconds of this process, all threads)``."""
    wall = time.perf_counter()
    cpu = time.process_time()
    value = function()
    return value, time.perf_counter() - wall, time.process_time() - cpu
