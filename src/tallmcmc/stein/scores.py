"""The inputs every Stein discrepancy shares: points, their scores ``∇ log π``, weights.

:func:`posterior_scores` computes exact full-data scores of a :class:`~tallmcmc.Model`
at many points. :func:`as_points`, :func:`as_scores` and :func:`normalised_weights`
are the one place where the discrepancies check and coerce what a user passes,
so every discrepancy accepts the same inputs and raises the same errors.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from tallmcmc.model import Model

__all__ = ["posterior_scores", "as_points", "as_scores", "normalised_weights"]

ScoreArgument = np.ndarray | Callable[[np.ndarray], np.ndarray]


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
    batched = jax.jit(
        lambda data, thetas: jax.lax.map(lambda theta: gradient(data, theta), thetas, batch_size=batch_size)
    )
    return np.asarray(batched(model.data, jnp.asarray(points, jnp.float32)), dtype=np.float64)


def as_points(points) -> np.ndarray:
    """Sample points as a float64 array (n, d); a 1-D array is n points in one dimension.

    Raises
    ------
    ValueError
        Naming ``points`` if the array is empty, has more than two axes, or is not finite.
    """
    array = np.asarray(points, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"points must have shape (n, d) or (n,) with n, d >= 1; got {np.shape(points)}")
    if not np.all(np.isfinite(array)):
        raise ValueError("points contain non-finite values (NaN or inf)")
    return array


def as_scores(scores: ScoreArgument, points: np.ndarray) -> np.ndarray:
    """Scores at ``points`` as a float64 array of the same shape (n, d).

    ``scores`` is either an array (one row per point; 1-D allowed when d = 1) or a
    callable. A callable is tried on the whole (n, d) array first, then, if that
    fails or returns the wrong number of values, one point at a time.

    Raises
    ------
    ValueError
        Naming ``scores`` if the shape does not match ``points`` or a value is not finite.
    """
    if callable(scores):
        try:
            array = np.asarray(scores(points), dtype=np.float64)
        except Exception:  # a score written for one point at a time
            array = None
        if array is None or array.size != points.size:
            array = np.stack([np.asarray(scores(row), dtype=np.float64).reshape(-1) for row in points])
    else:
        array = np.asarray(scores, dtype=np.float64)
    if array.ndim == 1 and points.shape[1] == 1:
        array = array[:, None]
    if array.shape != points.shape:
        raise ValueError(f"scores must have the shape of points {points.shape}; got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("scores contain non-finite values (NaN or inf) at the sample points")
    return array


def normalised_weights(weights: np.ndarray | None, n: int) -> np.ndarray:
    """Sample weights as float64 summing to 1 (uniform when ``None``).

    Raises
    ------
    ValueError
        Naming ``weights`` if the shape is not (n,), a weight is negative or
        non-finite, or they sum to zero.
    """
    if weights is None:
        return np.full(n, 1.0 / n)
    array = np.asarray(weights, dtype=np.float64)
    if array.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) to match points, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("weights contain non-finite values")
    if np.any(array < 0):
        raise ValueError("weights must be non-negative")
    total = array.sum()
    if not total > 0:
        raise ValueError("weights must have a positive sum")
    return array / total
