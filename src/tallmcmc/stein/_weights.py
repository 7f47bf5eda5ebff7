"""Validation of sample weights, shared by the Stein discrepancies."""

from __future__ import annotations

import numpy as np


def normalised_weights(weights: np.ndarray | None, n: int) -> np.ndarray:
    """Sample weights as float64 summing to 1 (uniform when ``None``), or a ``ValueError`` naming ``weights``."""
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
