"""What the examples' TunaMH bounds share: per-row norms, the rows this process holds, a centred distance.

Each example module builds its own bound (``tuna_bound(model, ...)``) with
:func:`tallmcmc.acceptance.tuna.tuna_bound`; the constants are computed in
float64 on the host from the rows of the data (:func:`host_rows`).
"""

from __future__ import annotations

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from tallmcmc import sharding
from tallmcmc.model import Model, Position


def norms(rows: np.ndarray) -> np.ndarray:
    """The Euclidean norm of each row (over every axis but the first), in float64."""
    return np.sqrt(np.sum(np.asarray(rows, np.float64) ** 2, axis=tuple(range(1, np.ndim(rows)))))


def host_rows(model: Model, leaf, function: str) -> sharding.HostRows:
    """The rows of a data ``leaf`` this process holds (:class:`tallmcmc.sharding.HostRows`), checked for layout.

    The bounds compute their constants in float64 on the host from these
    rows: in one process every row (what ``np.asarray`` gives, also for data
    split over local devices); across processes each its own rows, with
    per-row results and sums exchanged (so the data never move).
    ``tallmcmc.sharding.HostRows`` is read at each call (a test replaces it
    with a deliberately wrong reader).
    """
    sharding.row_sharding(model.data, function)  # refuses a layout other than rows split over a mesh
    return sharding.HostRows(leaf)


def flat(position: Position) -> jax.Array:
    """The position as one flat vector."""
    return jax.flatten_util.ravel_pytree(position)[0]


def centred_distance(center: np.ndarray, scale: float):
    """M(θ, θ′) = ‖θ′ − θ‖ · max(1, ‖½(θ + θ′) − x₀‖/s)."""
    center = jnp.asarray(center)

    def distance(a, b):
        a, b = flat(a), flat(b)
        middle = 0.5 * (a + b) - center.astype(a.dtype).ravel()
        return jnp.linalg.norm(b - a) * jnp.maximum(1.0, jnp.linalg.norm(middle) / scale)

    return distance
