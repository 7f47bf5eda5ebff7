"""
Many chains and devices
=======================

``tallmcmc.sample(..., num_chains=C)`` runs C chains at once, vectorised with ``jax.vmap`` (``driver="vmap"``,
the default). With a minibatch test each chain's step needs a different number of minibatch rounds;
``driver="asynchronous"`` lets every chain start its next step as soon as its own test has decided, with the
same draws (``docs/drivers.md``). ``mesh=`` splits the chains (a ``"chains"`` axis) and/or the data's rows (a
``"data"`` axis) over devices (``docs/sharding.md``). On a CPU, XLA makes one device unless told otherwise
before JAX starts::

    XLA_FLAGS=--xla_force_host_platform_device_count=2 python plot_07_chains_devices.py

(the documentation build sets it). Here 64 chains on the paper's tempered mixture (N = 20,000, K = 200).
Timings on a shared, busy machine are only indicative; ``benchmarks/RESULTS.md`` has measured ones.
"""

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import tallmcmc
from tallmcmc.examples import gaussian_mixture

model = gaussian_mixture.model(num_data=20_000, temperature=200.0)
proposal, test = tallmcmc.random_walk(0.15), tallmcmc.minibatch_barker(50)
start = jnp.array([0.0, 1.0])
options = dict(num_chains=64, num_samples=500, seed=0, progress=False)

runs = {
    "vmap": tallmcmc.sample(model, proposal, test, start, driver="vmap", **options),
    "asynchronous": tallmcmc.sample(model, proposal, test, start, driver="asynchronous", **options),
}
devices = jax.devices()
print(f"{len(devices)} device(s): {devices}")
if len(devices) > 1:
    mesh = jax.make_mesh((len(devices),), ("chains",))
    runs[f"asynchronous,\n{len(devices)} devices"] = tallmcmc.sample(
        model, proposal, test, start, driver="asynchronous", mesh=mesh, **options
    )
else:
    print("one device: no mesh run (set XLA_FLAGS=--xla_force_host_platform_device_count=2 before JAX starts)")

for name, result in runs.items():
    print(
        f"{name.replace(chr(10), ' '):28s} {result.chain_steps_per_second:9,.0f} chain-steps/s   "
        f"acceptance {float(result.acceptance_rate):.3f}"
    )
same = all(np.array_equal(np.asarray(runs["vmap"].positions), np.asarray(result.positions)) for result in runs.values())
print("every driver and layout drew the same chains:", same)

# %%
# Left: the 64 chains' final positions (the mixture's posterior has two modes). Right: throughput per driver.
final = np.asarray(runs["vmap"].positions)[:, -1]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
left.plot(final[:, 0], final[:, 1], "o", ms=4)
left.set(xlabel="θ₁", ylabel="θ₂", title="last draw of each of 64 chains")
names = list(runs)
right.bar(names, [runs[name].chain_steps_per_second for name in names], color=[f"C{i}" for i in range(len(names))])
right.set(ylabel="chain-steps per second", title="throughput (compilation excluded)")
fig.tight_layout()
plt.show()
