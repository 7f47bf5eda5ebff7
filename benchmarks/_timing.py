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
    """Seconds JAX spends compiling from the last :meth:`reset` (a listener on its monitoring events).

    ``seconds`` adds the events' durations up; :attr:`wall_seconds` is the time during which at least one was under
    way (the union of their intervals), which is less where threads compile at once (``sample_tall`` compiles its
    chain program in a thread while its setup compiles and runs) or where one event runs inside another.
    """

    def __init__(self):
        self.seconds = 0.0
        self._intervals: list[tuple[float, float]] = []
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event: str, duration: float, **_) -> None:
        if event in COMPILE_EVENTS:
            self.seconds += duration
            end = time.perf_counter()
            self._intervals.append((end - duration, end))

    @property
    def wall_seconds(self) -> float:
        total, reach = 0.0, -float("inf")
        for begin, end in sorted(self._intervals):
            if end > reach:
                total += end - max(begin, reach)
                reach = end
        return total

    def reset(self) -> None:
        self.seconds = 0.0
        self._intervals = []


def cpu_probe_ms(repeats: int = 5) -> float:
    """Milliseconds of a fixed pure-Python loop (300,000 multiply-adds), the least of ``repeats``: how fast one core
    of this machine is just now.

    On the project's 2-core machine, idle: 16 ms (2026-11-29, 05:06 UTC). Its runs' timings (compilation included) have
    differed by a factor of about two between hours at the same load average, which the load does not show; this is
    printed beside the load by the benchmarks whose figures depend on it, so that figures of different hours can be
    told apart. Only figures of the same run, alternating, compare.
    """
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        total = 0
        for i in range(300_000):
            total += i * i
        best = min(best, time.perf_counter() - began)
    return 1e3 * best


def timed(function):
    """Call ``function()``; return ``(value, wall seconds, CPU seconds of this process, all threads)``."""
    wall = time.perf_counter()
    cpu = time.process_time()
    value = function()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def compiled_loop(body, iterations: int):
    """A compiled loop of ``iterations`` calls ``θ ← body(key_t, θ)``: ``run(θ, key)`` returns the final θ."""

    @jax.jit
    def run(theta, key):
        return jax.lax.fori_loop(0, iterations, lambda t, th: body(jax.random.fold_in(key, t), th), theta)

    return run


def seconds_per_call(bodies: dict, start, iterations: int, repeats: int) -> dict[str, list[float]]:
    """Per-call seconds of each ``bodies[name]`` (``body(key, θ) -> θ``), ``repeats`` times each.

    Each body runs as a :func:`compiled_loop` of ``iterations`` calls from ``start`` (compiled first, not timed);
    the order of the bodies rotates from one repeat to the next, so that a change of load touches them all alike.
    """
    loops = {name: compiled_loop(body, iterations) for name, body in bodies.items()}
    for run in loops.values():  # compile
        jax.block_until_ready(run(start, jax.random.key(0)))
    seconds: dict[str, list[float]] = {name: [] for name in loops}
    names = list(loops)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            key = jax.random.key(repeat + 1)
            _, wall, _ = timed(lambda run=loops[name], key=key: jax.block_until_ready(run(start, key)))
            seconds[name].append(wall / iterations)
    return seconds
