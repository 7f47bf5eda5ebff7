"""The analytic targets shared by the statistical tests.

Each is the conjugate Gaussian-mean model of :mod:`tallmcmc.examples.gaussian_mean`
(xᵢ ~ N(θ, I), prior N(0, σ₀²I), temperature K) on simulated data with a fixed
seed; its tempered posterior is Gaussian and known exactly
(:func:`tallmcmc.examples.gaussian_mean.posterior`, in float64), so a sampler's
draws can be checked against it with :func:`tallmcmc.testing.check_posterior_moments`.

Test modules import this file as ``analytic_models`` (``tests/conftest.py``
puts ``tests/`` on ``sys.path``). Models are built once per process.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mean


@dataclasses.dataclass(frozen=True, eq=False)
class AnalyticModel:
    """A conjugate Gaussian-mean target with its exact posterior.

    ``draw_data(rng)`` simulates the data from ``np.random.default_rng(data_seed)``.
    """

    name: str
    data_seed: int
    draw_data: Callable[[np.random.Generator], np.ndarray]
    prior_variance: float
    temperature: float = 1.0

    @functools.cached_property
    def data(self) -> np.ndarray:
        """The data, shape ``(N, d)``, float32."""
        return self.draw_data(np.random.default_rng(self.data_seed))

    @functools.cached_property
    def model(self) -> tallmcmc.Model:
        return gaussian_mean.model(self.data, self.prior_variance, self.temperature)

    @functools.cached_property
    def _posterior(self) -> tuple[np.ndarray, np.ndarray]:
        return gaussian_mean.posterior(self.data, self.prior_variance, self.temperature)

    @property
    def mean(self) -> np.ndarray:
        """Exact posterior mean, shape ``(d,)``."""
        return self._posterior[0]

    @property
    def variance(self) -> np.ndarray:
        """Exact posterior variance per coordinate, shape ``(d,)``."""
        return self._posterior[1]

    @property
    def num_data(self) -> int:
        return self.data.shape[0]

    def starts(self, how: int | str | None, num_chains: int) -> np.ndarray:
        """Starting positions ``(num_chains, d)``, float32.

        ``how`` is an int seed (independent exact posterior draws from
        ``np.random.default_rng(how)``), ``None`` (exact posterior draws
        continuing the data's own random stream, right after the data), or
        ``"mean"`` (every chain at the posterior mean).
        """
        if how == "mean":
            return np.broadcast_to(self.mean.astype(np.float32), (num_chains, self.mean.size)).copy()
        if how is None:
            rng = np.random.default_rng(self.data_seed)
            self.draw_data(rng)  # advance the stream past the data
        else:
            rng = np.random.default_rng(how)
        draws = self.mean + np.sqrt(self.variance) * rng.standard_normal((num_chains, self.mean.size))
        return draws.astype(np.float32)


#: N = 10⁴ points in d = 2, K = 100, σ₀² = 10: the minibatch tests' target.
TEMPERED_2D = AnalyticModel(
    "tempered_2d",
    data_seed=1953,
    draw_data=lambda rng: rng.normal([0.5, -1.0], 1.0, (10_000, 2)).astype(np.float32),
    prior_variance=10.0,
    temperature=100.0,
)

#: N = 2000 points in d = 1, K = 1, σ₀² = 10: the subsampling baselines' target.
CONJUGATE_1D = AnalyticModel(
    "conjugate_1d",
    data_seed=1970,
    draw_data=lambda rng: rng.normal(-0.4, 1.0, 2000).astype(np.float32)[:, None],
    prior_variance=10.0,
)

#: N = 100 points in d = 2, K = 1, σ₀² = 100: the gradient proposals' target.
SMALL_2D = AnalyticModel(
    "small_2d",
    data_seed=7,
    draw_data=lambda rng: (1.0 + rng.standard_normal((100, 2))).astype(np.float32),
    prior_variance=100.0,
)

MODELS = {model.name: model for model in (TEMPERED_2D, CONJUGATE_1D, SMALL_2D)}
