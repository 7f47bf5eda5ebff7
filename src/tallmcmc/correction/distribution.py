r"""The correction distribution :math:`C_\sigma` of the minibatch Barker test.

The minibatch Metropolis-Hastings test of Seita et al. (2017) accepts a
proposal iff :math:`\Delta^* + X_{nc} + X_{corr} > 0`, where the Gaussian part
:math:`\Delta^* + X_{nc}` has (approximately) the law :math:`N(\Delta,
\sigma^2)` and :math:`X_{corr} \sim C_\sigma` is drawn independently. The test
is the Barker test exactly when

.. math::

    N(0, \sigma^2) * C_\sigma = \text{Logistic}(0, 1),
    \qquad S(x) = \frac{1}{1 + e^{-x}} .

Here :math:`C_\sigma` is a *discrete* law with atoms :math:`y_j` and
probabilities :math:`u_j \ge 0`, :math:`\sum_j u_j = 1`, so the CDF of the
convolution is :math:`F_\sigma(x) = \sum_j u_j \Phi((x - y_j)/\sigma)` and the
quality of the construction is :math:`\varepsilon_\sigma = \sup_x |F_\sigma(x)
- S(x)|`; by Section 5 of the paper the acceptance test then errs by at most
:math:`\varepsilon_\sigma` per step.

No probability law makes the convolution exactly logistic, the best
attainable :math:`\varepsilon_\sigma` grows quickly with :math:`\sigma`, and
:math:`\sigma` must stay below the logistic standard deviation
:math:`\pi/\sqrt 3 \approx 1.814` because :math:`\mathrm{Var}(X_{corr}) =
\pi^2/3 - \sigma^2 > 0`; the derivations are in ``docs/correction.md``.

This module is the runtime side: :func:`correction_distribution` (the
shipped tables, or an on-demand solve). The law's type
:class:`CorrectionDistribution` and :func:`max_cdf_error` live in
:mod:`tallmcmc.correction.base` and are importable from here too. The tables
are solved offline by :mod:`tallmcmc.correction.solve`.

References
----------
.. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch Acceptance
   Test for Metropolis-Hastings". UAI 2017 (Section 4, Appendix C.1 and
   Table 3).
"""

from __future__ import annotations

import functools
import warnings
from importlib import resources

import numpy as np

# the law's type and its CDF error live in base (shared with solve); importable from here as before
from tallmcmc.correction.base import (
    SIGMA_MAX,
    CorrectionDistribution,
    cdf_error_curve,
    check_sigma,
    max_cdf_error,
)
from tallmcmc.correction.solve import solve_correction

__all__ = [
    "CorrectionDistribution",
    "SHIPPED_SIGMAS",
    "SIGMA_MAX",
    "cdf_error_curve",
    "correction_distribution",
    "max_cdf_error",
]

#: The values of ``sigma`` whose tables ship with the package.
SHIPPED_SIGMAS: tuple[float, ...] = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4)

#: Package-data file with the shipped tables (rebuild: scripts/build_correction_tables.py).
DATA_FILE: str = "correction_tables.npz"


# --------------------------------------------------------------------------- loading


_CACHE: dict[float, CorrectionDistribution] = {}


@functools.lru_cache(maxsize=1)
def _shipped_tables() -> dict[float, CorrectionDistribution]:
    path = resources.files("tallmcmc").joinpath("data", DATA_FILE)
    found: dict[float, CorrectionDistribution] = {}
    with resources.as_file(path) as file, np.load(file) as data:
        for sigma in data["sigmas"]:
            tag = f"{float(sigma):.4f}"
            found[float(sigma)] = CorrectionDistribution(
                float(sigma),
                data[f"support_{tag}"],
                data[f"probabilities_{tag}"],
                float(data[f"max_cdf_error_{tag}"]),
                str(data[f"method_{tag}"]) if f"method_{tag}" in data.files else str(data["method"]),
            )
    return found


def correction_distribution(sigma: float = 1.0) -> CorrectionDistribution:
    r"""The correction :math:`C_\sigma` for a Gaussian part of standard deviation ``sigma``.

    Tables for ``sigma`` in :data:`SHIPPED_SIGMAS` (0.8, 0.9, ..., 1.4) ship
    with the package (``tallmcmc/data/correction_tables.npz``, built by
    ``scripts/build_correction_tables.py`` with
    :func:`~tallmcmc.correction.solve.solve_correction`); other values are
    solved on demand (a few seconds, with a warning) and cached for the
    session. A table's error :math:`\sup_x |F_\sigma - S|` is its
    ``max_cdf_error`` and the solver that produced it its ``method``; the
    error is at most :math:`10^{-6}` at sigma = 1.0, :math:`5 \cdot 10^{-5}`
    at 1.2 and :math:`10^{-3}` at 1.4 (checked by the tests).

    Parameters
    ----------
    sigma : float, optional
        In the open interval :math:`(0, \pi/\sqrt 3)`, default 1.

    Returns
    -------
    CorrectionDistribution

    Raises
    ------
    ValueError
        If ``sigma`` is not finite or outside :math:`(0, \pi/\sqrt 3)`: the
        correction's variance :math:`\pi^2/3 - \sigma^2` must be positive.

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. "An Efficient Minibatch
       Acceptance Test for Metropolis-Hastings". UAI 2017.
    """
    sigma = check_sigma(sigma)
    for shipped, table in _shipped_tables().items():
        if abs(shipped - sigma) < 1e-9:
            return table
    key = round(sigma, 12)
    if key not in _CACHE:
        warnings.warn(
            f"no shipped correction table for sigma={sigma}; solving one (this takes a few seconds, "
            f"longer for small sigma); shipped values: {SHIPPED_SIGMAS}",
            stacklevel=2,
        )
        _CACHE[key] = solve_correction(sigma)
    return _CACHE[key]
