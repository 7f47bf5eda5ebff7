"""The XLA programs a block of code compiles, counted from JAX's ``backend_compile_duration`` events: for the tests
that check a step compiles nothing (a program that JAX already holds in this process is not compiled again, so such
a test can pass after another test compiled the same program; run alone, each fails on the tree before its fix)."""

import contextlib

import jax


@contextlib.contextmanager
def compilations():
    """A list that gets one entry (the seconds) for each XLA compilation while the block runs."""
    compiled: list[float] = []

    def listener(event, duration, **_):
        if event.endswith("backend_compile_duration"):
            compiled.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield compiled
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
