"""A ``sample_tall`` run saved by one process and continued by another (``tests/test_sample_tall.py``).

``python continued_sample_tall.py PATH first`` runs ``sample_tall`` (30 kept draws) and saves it to ``PATH``;
``python continued_sample_tall.py PATH later`` loads it, continues it by 30 draws with the same arguments and
saves the continued run over ``PATH``. Each prints ``DONE``. The model and arguments are the test's.
"""

import sys
import warnings

import tallmcmc
from tallmcmc.examples import logistic_regression

warnings.simplefilter("ignore")
path, stage = sys.argv[1], sys.argv[2]
model = logistic_regression.model(*logistic_regression.simulate(5_000, 3, seed=0))
options = dict(num_warmup=20, num_chains=2, seed=1, progress=False)
if stage == "first":
    tallmcmc.sample_tall(model, num_samples=30, **options).save(path)
else:
    tallmcmc.sample_tall(model, resume=tallmcmc.load_result(path), num_samples=30, **options).save(path)
print("DONE")
