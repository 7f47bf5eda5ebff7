"""``tallmcmc.testing.repeated_decisions``: one program per (model, test, settings, compiler options)."""

import jax.numpy as jnp
import numpy as np
from suite_xla import RUN_HEAVY

import tallmcmc
from tallmcmc import testing
from tallmcmc.examples import gaussian_mean


def test_repeated_decisions_compile_a_program_of_their_own_for_other_compiler_options():
    data = np.random.default_rng(3).normal(0.5, 1.0, 4000).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=None, temperature=50.0)
    test = tallmcmc.minibatch_barker(100)
    pair = (jnp.float32(0.45), jnp.float32(0.5))
    testing._DECISION_PROGRAMS.clear()
    plain = testing.repeated_decisions(model, test, *pair, 2000)
    again = testing.repeated_decisions(model, test, *pair, 2000)
    assert len(testing._DECISION_PROGRAMS) == 1  # the same settings: the program kept
    heavy = testing.repeated_decisions(model, test, *pair, 2000, compiler_options=RUN_HEAVY)
    assert len(testing._DECISION_PROGRAMS) == 2  # other options: compiled again, not the first program reused
    np.testing.assert_array_equal(plain.accepted, again.accepted)
    # the same decisions up to the last bits of Δ, which the options may change (fused multiply-adds)
    assert np.mean(np.asarray(plain.accepted) != np.asarray(heavy.accepted)) < 0.01
    assert 0.05 < float(np.mean(plain.accepted)) < 0.95


def test_warmup_decisions_keep_a_cache_that_describes_the_accepted_state_out():
    """An exact test caches the log-likelihood of the state it accepts: warm-up at the pair must not carry it.

    Before, the warm-up took every decision's cache, so after one accept the exact test's cached
    log-likelihood at ``position`` was the one at ``proposed``, and every later decision saw Δ = 0.
    """
    data = np.random.default_rng(3).normal(0.5, 1.0, 4000).astype(np.float32)
    model = gaussian_mean.model(data, prior_variance=None, temperature=50.0)
    pair = (jnp.float32(0.45), jnp.float32(0.5))
    cold = testing.repeated_decisions(model, tallmcmc.exact_barker(), *pair, 500)
    warm = testing.repeated_decisions(model, tallmcmc.exact_barker(), *pair, 500, warmup_decisions=20)
    np.testing.assert_allclose(np.asarray(warm.info.statistic), np.asarray(cold.info.statistic), rtol=1e-6)
    assert abs(float(cold.info.statistic[0])) > 0.1
