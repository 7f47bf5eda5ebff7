"""Scores ∇ log π at many points: the input every Stein discrepancy needs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.model import Model


def posterior_scores(model: Model, points: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Exact full-data scores ``∇ log π`` at many points (the input of the Stein diagnostics).

    Parameters
    ----------
    model
        The tempered target; its positions must be flat arrays of shape (d,).
    points
        Array (n, d) of positions.
    batch_size
        Points differentiated together (memory: ``batch_size × N`` per-datum terms).

    Returns
    -------
    numpy.ndarray
        Shape (n, d), float64.

    References
    ----------
    .. [1] Gorham, J. and Mackey, L. (2015). Measuring sample quality with
       Stein's method. NeurIPS 28.
    """
    points = np.asarray(points)
    if points.ndim != 2:
        raise ValueError(f"points must have shape (n, d); got {points.shape}")
    gradient = jax.jit(lambda data, theta: jax.grad(model.with_data(data).log_density)(theta))
    batched = jax.jit(lambda data, thetas: jax.lax.map(lambda theta: gradient(data, theta), thetas, batch_size=batch_size))
    return np.asarray(batched(model.data, jnp.asarray(points, jnp.float32)), dtype=np.float64)
