"""
A NumPyro model
===============

:func:`tallmcmc.from_numpyro` turns a NumPyro model function with a data plate into a :class:`tallmcmc.Model`:
the per-datum log-likelihoods come from the plate's observed sites, the chain moves in NumPyro's unconstrained
space, and the draws come back on each site's own scale, named by site. Here a robust (Student-t) regression
with an unknown scale σ > 0, N = 20,000, sampled by :func:`tallmcmc.sample_tall`.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import numpyro
import numpyro.distributions as dist

import tallmcmc


def robust_regression(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))  # the chain moves log σ
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.StudentT(4.0, X @ beta, sigma), obs=y)


rng = np.random.default_rng(0)
X = rng.standard_normal((20_000, 2)).astype(np.float32)
y = (X @ np.array([1.0, -0.5]) + 0.7 * rng.standard_t(4.0, 20_000)).astype(np.float32)

model = tallmcmc.from_numpyro(robust_regression, X, y=y)
print(model.num_data, model.position_shape)

# %%
result = tallmcmc.sample_tall(model, num_samples=1000, num_warmup=200, progress=False)
print(result.diagnosis)

# %%
# The draws by site name, on the sites' own scale (σ, not log σ).
beta = np.asarray(result.positions["beta"]).reshape(-1, 2)
sigma = np.asarray(result.positions["sigma"]).ravel()
fig, axes = plt.subplots(1, 3, figsize=(10, 3))
for k, (ax, truth) in enumerate(zip(axes[:2], [1.0, -0.5])):
    ax.hist(beta[:, k], bins=40, alpha=0.7)
    ax.axvline(truth, color="C3", ls="--")
    ax.set(xlabel=f"beta[{k}]")
axes[2].hist(sigma, bins=40, alpha=0.7)
axes[2].axvline(0.7, color="C3", ls="--")
axes[2].set(xlabel="sigma")
fig.suptitle(f"test chosen: {result.test_name}; {float(result.data_used.mean()):,.0f} points per step")
fig.tight_layout()
plt.show()
