"""
Your own model: a Poisson regression written by hand
====================================================

A :class:`tallmcmc.Model` is a per-datum log-likelihood ``log_likelihood(position, datum)``, a
``log_prior(position)`` and the data (a pytree whose leading axis is the N data points). Here: counts yᵢ with
log E[yᵢ] = xᵢᵀβ, N = 50,000. :func:`tallmcmc.find_mode` and :func:`tallmcmc.taylor_control_variate` make one
pass each; the minibatch Barker test then subsamples only the control variate's residuals, about a hundred points
per step, and a Laplace-shaped random walk proposes.
"""

# %%
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import tallmcmc

rng = np.random.default_rng(0)
num_data, dimension = 50_000, 3
true_beta = np.array([0.5, -0.3, 0.2])
X = rng.standard_normal((num_data, dimension)).astype(np.float32) / 2
y = rng.poisson(np.exp(X @ true_beta)).astype(np.float32)


def log_likelihood(beta, row):  # one datum: row["x"] has shape (d,), row["y"] is a count
    eta = row["x"] @ beta
    return row["y"] * eta - jnp.exp(eta)  # log Poisson(y | e^η), up to a constant


def log_prior(beta):
    return -0.5 * jnp.sum(beta**2) / 10.0  # N(0, 10 I)


model = tallmcmc.Model(log_likelihood, log_prior, {"x": X, "y": y}, position_shape=(dimension,))

# %%
# The mode, a control variate around it, then the chains.
mode = tallmcmc.find_mode(model, jnp.zeros(dimension))
cv = tallmcmc.taylor_control_variate(model, mode.position)
result = tallmcmc.sample(
    model,
    tallmcmc.laplace_random_walk(mode),
    tallmcmc.minibatch_barker(100, control_variate=cv),
    initial_position=mode.position,
    num_chains=4,
    num_samples=2000,
    seed=1,
    progress=False,
)
print("mode converged:", bool(mode.converged))
print(
    f"acceptance {float(result.acceptance_rate):.2f}; "
    f"{float(result.data_used.mean()):.0f} of {num_data:,} points per step"
)

# %%
# Each coefficient's draws beside the Laplace approximation at the mode.
draws = np.asarray(result.positions).reshape(-1, dimension)
laplace_sd = np.sqrt(np.diag(np.asarray(tallmcmc.laplace_covariance(mode))))
fig, axes = plt.subplots(1, dimension, figsize=(10, 3))
for k, ax in enumerate(axes):
    ax.hist(draws[:, k], bins=40, density=True, alpha=0.6, label="draws")
    grid = np.linspace(draws[:, k].min(), draws[:, k].max(), 200)
    centre = float(np.asarray(mode.position)[k])
    ax.plot(
        grid,
        np.exp(-0.5 * ((grid - centre) / laplace_sd[k]) ** 2) / (laplace_sd[k] * np.sqrt(2 * np.pi)),
        "k",
        lw=1,
        label="Laplace",
    )
    ax.axvline(true_beta[k], color="C3", ls="--", lw=1, label="truth")
    ax.set(xlabel=f"β{k + 1}")
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()
