"""
Tall logistic regression, the automatic way
===========================================

:func:`tallmcmc.sample_tall` runs the whole tall-data path on any model: the mode, a Taylor control variate, a
proxy Hamiltonian proposal, warm-up, and then the test that warm-up measured to be cheaper per effective draw (the
minibatch Barker test on the control variate's residuals, or the exact test), with a diagnosis of the run.
Logistic regression with N = 100,000 rows and d = 5.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

import tallmcmc
from tallmcmc.examples import logistic_regression

X, y = logistic_regression.simulate(100_000, 5, seed=0)
model = logistic_regression.model(X, y)
result = tallmcmc.sample_tall(model, num_samples=2000, num_warmup=300, progress=False)
print(result.diagnosis)

# %%
# Left: the kept draws beside the Laplace approximation at the mode ``sample_tall`` found. Right: the whole run's
# data use, in passes over the 100,000 rows: the one-off passes before sampling (start check, mode, control
# variate), warm-up and the kept draws, against the exact test, which reads every row at every step.
diagnosis = result.diagnosis
draws = np.asarray(result.positions).reshape(-1, 5)
mode = np.asarray(diagnosis.mode.position)
covariance = np.asarray(tallmcmc.laplace_covariance(diagnosis.mode))
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
for k in range(5):
    sd = np.sqrt(covariance[k, k])
    left.errorbar(k, mode[k], yerr=2 * sd, fmt="o", color="k", capsize=4, label="Laplace ± 2 sd" if k == 0 else None)
    left.violinplot(draws[:, k], positions=[k + 0.25], widths=0.4, showextrema=False)
left.set(xlabel="coefficient", ylabel="value", title="posterior draws (violins) and Laplace")
left.legend()
stages = {
    "setup": result.setup_data_passes,
    "warm-up": diagnosis.warmup_passes,
    "kept draws": diagnosis.sampling_passes,
    "exact test,\nsame steps": float(result.data_used.size),
}
right.bar(list(stages), list(stages.values()), color=["C0", "C0", "C0", "C3"])
right.set(
    yscale="log",
    ylabel="passes over N = 100,000",
    title=f"{result.test_name}: {float(result.data_used.mean()):.0f} rows per step",
)
fig.tight_layout()
plt.show()
