r"""
Choosing a test on a heavy-tailed model
=======================================

The untempered Student-t location model of :mod:`tallmcmc.examples.student_t_location` (N = 10,000): 1% of the
points are ten times more precise than the rest and 2% are gross outliers, so the per-datum log ratios have a heavy
tail, the case the normal approximation behind the minibatch tests handles worst (``docs/minibatch_error.md``).
The posterior is one-dimensional and known by quadrature. Four tests, the same random walk at 0.3 posterior sd:

* ``exact_metropolis()``: all N points per step;
* ``tuna(chi, bound)``: exact, a Poisson minibatch, needs a per-datum bound (here :math:`|∂_θ l_i| ≤ (ν+1)/(2\sqrt{ν}\, s_i)`);
* ``minibatch_barker(50)``: approximate, with its tail guard (the default);
* ``minibatch_barker(50, variance_rse=None)``: Algorithm 1 as printed, no guard.

What each one costs (points per step) and how far its mean and sd land from the exact ones (in Monte Carlo
standard errors) is what ``tallmcmc reproduce bias`` measures at full size; this is a small version of it.
"""

# %%
import math

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import tallmcmc
from tallmcmc.acceptance.tuna import tuna_bound
from tallmcmc.examples import student_t_location
from tallmcmc.interop.arviz import ess

data = student_t_location.simulate(10_000, seed=0)
model = student_t_location.model(data)

# the exact posterior on a grid (float64 quadrature)
grid = np.linspace(0.8, 1.2, 4001)
log_density = student_t_location.log_posterior_grid(data, grid)
grid = grid[np.exp(log_density - log_density.max()) > 1e-12]
log_density = student_t_location.log_posterior_grid(data, grid)
density = np.exp(log_density - log_density.max())
density /= density.sum() * (grid[1] - grid[0])  # a uniform grid: sums are integrals
weights = density / density.sum()
mean = float(np.sum(weights * grid))
sd = math.sqrt(np.sum(weights * (grid - mean) ** 2))
print(f"exact posterior: mean {mean:.5f}, sd {sd:.5f}")

# %%
# TunaMH's bound: :math:`|\log t(x; θ′, s) − \log t(x; θ, s)| ≤ c_i |θ′ − θ|` with
# :math:`c_i = (ν+1)/(2\sqrt{ν}\, s_i)`; a small floor
# on the distance covers float32 rounding of the two log-likelihoods.
nu = student_t_location.DEGREES_OF_FREEDOM
constants = (nu + 1.0) / (2.0 * math.sqrt(nu) * data[:, 1].astype(np.float64))
bound = tuna_bound(constants, lambda a, b: jnp.abs(b[0] - a[0]) + 1e-3 * 0.3 * sd)

tests = {
    "exact_metropolis()": tallmcmc.exact_metropolis(),
    "tuna(1.0, bound)": tallmcmc.tuna(1.0, bound),
    "minibatch_barker(50)": tallmcmc.minibatch_barker(50),
    "minibatch_barker(50,\nvariance_rse=None)": tallmcmc.minibatch_barker(50, variance_rse=None),
}
rows = {}
for name, test in tests.items():
    result = tallmcmc.sample(
        model,
        tallmcmc.random_walk(0.3 * sd),
        test,
        initial_position=jnp.array([mean]),
        num_chains=4,
        num_samples=3000,
        seed=2,
        progress=False,
    )  # no warm-up: it would tune the step
    draws = np.asarray(result.positions)[..., 0]  # (chain, draw)
    mcse = draws.std() / math.sqrt(float(ess(draws, method="mean")))
    rows[name] = (
        draws.ravel(),
        float(result.data_used.mean()),
        (draws.mean() - mean) / mcse,
        float(result.acceptance_rate),
    )
    print(
        f"{name.replace(chr(10), ' '):42s} {rows[name][1]:8.0f} points/step  mean off by "
        f"{rows[name][2]:+5.1f} MCSE  sd {draws.std() / sd:.3f}× exact  acceptance {rows[name][3]:.2f}"
    )

# %%
# Left: each test's draws against the exact density. Right: what a step cost.
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
left.plot(grid, density, "k", lw=1.5, label="exact")
for name, (draws, *_) in rows.items():
    left.hist(draws, bins=60, density=True, histtype="step", label=name.replace("\n", " "))
left.set(xlabel="θ", xlim=(mean - 4.5 * sd, mean + 4.5 * sd), title="draws against the exact posterior")
left.legend(fontsize=7, loc="upper left")
names = list(rows)
right.barh(names, [rows[name][1] for name in names])
right.set(xscale="log", xlabel="data points per step (log scale)", title="cost per step, N = 10,000")
right.invert_yaxis()
right.tick_params(axis="y", labelsize=8)
fig.tight_layout()
plt.show()
