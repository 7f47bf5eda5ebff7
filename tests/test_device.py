"""``tallmcmc._device.to_device`` and the chain program's paused collector: what they give, and that
``to_device`` compiles nothing where ``jnp.asarray`` compiles a program (JAX 0.10's ``lax.stage``)."""

from __future__ import annotations

import collections
import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tallmcmc._device import to_device
from tallmcmc.sampling.program import _collector_paused


@pytest.fixture
def compilations():
    """Counts XLA compilations (or persistent-cache loads) while the test runs."""
    counts = collections.Counter()

    def listener(event, duration, **_):
        if event.endswith("backend_compile_duration"):
            counts["programs"] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    yield counts
    jax.monitoring.unregister_event_duration_listener(listener)


@pytest.mark.parametrize(
    "value, dtype",
    [
        (np.arange(7.0), None),  # float64 → JAX's default float
        (np.arange(5, dtype=np.int64), np.int32),
        (np.asarray(True), bool),
        (3, np.uint32),
        (2.5, np.float32),
        ([[1.0, 2.0], [3.0, 4.0]], None),
    ],
)
def test_to_device_gives_what_jnp_asarray_gives(value, dtype):
    ours, theirs = to_device(value, dtype), jnp.asarray(np.asarray(value), dtype)
    assert isinstance(ours, jax.Array)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_to_device_compiles_nothing_where_jnp_asarray_compiles(compilations):
    shape = (3, 17, 29)  # a shape no other test converts, so jnp.asarray's program is not already compiled
    to_device(np.ones(shape, np.float32))
    assert compilations["programs"] == 0
    jnp.asarray(np.ones(shape, np.float32))
    if jax.__version_info__ >= (0, 10):  # lax.stage; older JAX transferred here too
        assert compilations["programs"] >= 1


def test_the_collector_is_paused_only_inside_and_left_as_it_was():
    assert gc.isenabled()
    with _collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), _collector_paused():
        raise RuntimeError("a failed compilation")
    assert gc.isenabled()
    gc.disable()
    try:
        with _collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # a caller's own pause is not undone
    finally:
        gc.enable()
