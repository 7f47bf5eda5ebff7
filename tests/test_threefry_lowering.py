"""JAX's Threefry hash lowered straight-line on a CPU (``tallmcmc.threefry_lowering``).

The rule must change the compiled program (no rolled loop left) and nothing drawn: the random numbers and a
sampler's draws are compared bit for bit with a process that opts out (``TALLMCMC_THREEFRY_STRAIGHT=0``), where
JAX 0.10.2 keeps its rolled loop.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import warnings

import jax
import pytest

#: Draws through every kind of call a step makes (split, fold_in, uniform, normal, logistic, permutation, bits), and
#: a short run of a sampler, hashed.
DRAWS = """
import hashlib, json, warnings, jax, jax.numpy as jnp, numpy as np, tallmcmc
from tallmcmc import threefry_lowering
from tallmcmc.examples import logistic_regression

@jax.jit
def draws(key):
    a, b = jax.random.split(key)
    c = jax.random.fold_in(a, 7)
    return (jax.random.uniform(a, (5, 3)), jax.random.normal(b, (11,)), jax.random.logistic(c, (4,)),
            jax.random.permutation(c, 9), jax.random.bits(b, (6,)), jax.random.key_data(jax.random.split(c, 3)))

values = [np.asarray(x) for x in draws(jax.random.key(3))] + [np.asarray(x) for x in draws(jax.random.key(-8))]
model = logistic_regression.model(*logistic_regression.simulate(2_000, 3, seed=0))
warnings.simplefilter("ignore")  # the test's share of N (it looks at most of the data here) is not the point
result = tallmcmc.sample(model, tallmcmc.random_walk(0.01), tallmcmc.minibatch_barker(100), jnp.zeros(3),
                         num_samples=50, num_chains=2, num_warmup=20, progress=False, seed=5)
values += [np.asarray(result.positions), np.asarray(result.info["data_used"])]
text = jax.jit(lambda key: jax.random.uniform(key, (4,))).lower(jax.random.key(0)).as_text()
print("RESULT " + json.dumps({
    "digest": hashlib.sha256(b"".join(np.ascontiguousarray(v).tobytes() for v in values)).hexdigest(),
    "applied": threefry_lowering.APPLIED,
    "rolled_loop": "stablehlo.while" in text,
}))
"""


def run(**environment) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TALLMCMC_COMPILATION_CACHE": "0", **environment}
    completed = subprocess.run([sys.executable, "-c", DRAWS], capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    line = next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def run_here() -> dict:
    """The same script in this process (which imported tallmcmc with the rule applied, unless opted out)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        exec(DRAWS, {})
    line = next(line for line in printed.getvalue().splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the rule is for the CPU")
def test_straight_line_hash_draws_the_same_bits_without_a_loop():
    straight = run_here()
    rolled = run(TALLMCMC_THREEFRY_STRAIGHT="0")
    assert not rolled["applied"]
    if not straight["applied"]:
        pytest.skip("this JAX has no rolled CPU rule to replace")
    assert rolled["rolled_loop"], "JAX's own CPU rule is rolled (a while loop); the opt-out did not keep it"
    assert not straight["rolled_loop"]
    assert straight["digest"] == rolled["digest"]
