r"""A zero-inflated Poisson regression fitted to data with no zero inflation, written in NumPyro as a user would.

.. math:: y_i \sim π_i\, δ_0 + (1 − π_i)\, \mathrm{Poisson}(λ_i), \qquad
          \mathrm{logit}\, π_i = a_g + z_iᵀ b_g, \quad \log λ_i = a_r + x_iᵀ b_r,

with a_g ~ N(0, 2.5²), b_g ~ N(0, 2.5² I), a_r ~ N(0, 5²), b_r ~ N(0, I); two covariates each. :func:`simulate`
draws pure Poisson counts (no zero is inflated), so the data only bound the gate from above: the gate intercept
a_g has a long left tail down to its prior, which the Laplace approximation at the mode misses (its sd there is
about half the posterior's). The 2026-11-30 user-model audit's case, where ``sample_tall``'s plain proxy-HMC move
gave a_g's sd 18% narrow (12 seeds) and the draws could not show it (``docs/sample_tall.md``, "Tails wider than the Laplace
approximation"); ``tests/data/reference_posteriors.json`` holds a long NumPyro NUTS run on N = 20,000
(``scripts/reference_posteriors.py``).
"""

from __future__ import annotations

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist

from tallmcmc.interop.numpyro import from_numpyro
from tallmcmc.model import Model

__all__ = ["COORDINATES", "TRUTH", "model", "numpyro_model", "simulate"]

#: The posterior's coordinates as reported (every site is unconstrained): ``site[k]`` for a vector site.
COORDINATES = ("a_gate", "a_rate", "b_gate[0]", "b_gate[1]", "b_rate[0]", "b_rate[1]")
#: The Poisson rate's generating intercept and slopes (:func:`simulate`; no gate: no zero is inflated).
TRUTH = {"a_rate": 1.0, "b_rate": (0.4, -0.3)}


def numpyro_model(X, Z, y=None):
    """The NumPyro model: ``X`` (n, 2) the rate's covariates, ``Z`` (n, 2) the gate's, ``y`` the counts."""
    gate = numpyro.sample("a_gate", dist.Normal(0, 2.5)) + Z @ numpyro.sample(
        "b_gate", dist.Normal(0, 2.5).expand([2]).to_event(1)
    )
    rate = numpyro.sample("a_rate", dist.Normal(0, 5)) + X @ numpyro.sample(
        "b_rate", dist.Normal(0, 1).expand([2]).to_event(1)
    )
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.ZeroInflatedPoisson(jax.nn.sigmoid(gate), jax.numpy.exp(rate)), obs=y)


def simulate(num_data: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, Z, y)``: standard normal covariates (float32) and pure Poisson counts (int32) with log rate
    ``1 + X @ (0.4, −0.3)``, from ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(num_data, 2)).astype(np.float32)
    Z = rng.normal(size=(num_data, 2)).astype(np.float32)
    y = rng.poisson(np.exp(TRUTH["a_rate"] + X @ np.array(TRUTH["b_rate"]))).astype(np.int32)
    return X, Z, y


def model(X, Z, y) -> Model:
    """The :class:`~tallmcmc.model.Model` of :func:`numpyro_model` on the data (:func:`tallmcmc.from_numpyro`)."""
    return from_numpyro(numpyro_model, X, Z, y=y)
