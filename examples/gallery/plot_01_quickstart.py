"""
Quickstart: the minibatch Barker test on a tempered mixture
===========================================================

The README's quickstart: 100,000 points from ½N(θ₁, 2) + ½N(θ₁+θ₂, 2), tempered so that N/K = 100 (the
experiment of Seita et al., §6.1), sampled with a random walk and the minibatch Barker test. Each step touches
about 170 of the 100,000 points; the draws are compared with the posterior on a grid.
"""

# %%
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture

model = gaussian_mixture.model(num_data=100_000, temperature=1_000.0)

result = tallmcmc.sample(
    model,
    proposal=tallmcmc.random_walk(0.15),  # standard deviation per coordinate
    test=tallmcmc.minibatch_barker(batch_size=50),  # sigma=1.0 by default
    initial_position=jnp.array([0.0, 1.0]),
    num_samples=2000,
    num_chains=4,
    seed=0,
    progress=False,
)
print(
    f"acceptance rate {float(result.acceptance_rate):.2f}, "
    f"{float(result.data_used.mean()):.0f} of {model.num_data:,} points per step"
)

# %%
# The draws over the exact (gridded) posterior, and the data each step used.
theta1 = np.linspace(-1.5, 2.5, 200)
theta2 = np.linspace(-3.0, 3.0, 200)
log_density = gaussian_mixture.log_posterior_grid(np.asarray(model.data), 1_000.0, theta1, theta2)

draws = np.asarray(result.positions).reshape(-1, 2)
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
left.contour(theta1, theta2, np.exp(log_density - log_density.max()).T, levels=6, colors="k", linewidths=0.8)
left.plot(draws[::4, 0], draws[::4, 1], ".", ms=2, alpha=0.4)
left.set(xlabel="θ₁", ylabel="θ₂", title="draws and the exact posterior")
right.hist(np.asarray(result.data_used).ravel(), bins=60)
right.set(xlabel="data points used by one step", ylabel="steps", title="cost per step")
fig.tight_layout()
plt.show()
