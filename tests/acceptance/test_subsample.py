"""Index draws without replacement: a bijection, and uniform over keys."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from tallmcmc.acceptance.subsample import permutation_keys, permuted_indices


@pytest.mark.parametrize("num_data", [1, 2, 3, 5, 10, 17, 65, 100, 1000, 4097, 100_000, 131_072, 131_073])
def test_is_a_permutation(num_data):
    keys = permutation_keys(jax.random.key(num_data))
    indices = np.asarray(permuted_indices(keys, jnp.arange(num_data), num_data))
    assert sorted(indices.tolist()) == list(range(num_data))


@pytest.mark.parametrize("num_data", [10, 1000])
def test_first_draws_are_uniform(num_data):
    keys = jax.random.split(jax.random.key(1), 40_000)
    draws = np.asarray(
        jax.jit(jax.vmap(lambda k: permuted_indices(permutation_keys(k), jnp.arange(2), num_data)))(keys)
    )
    for column in range(2):
        assert stats.chisquare(np.bincount(draws[:, column], minlength=num_data)).pvalue > 1e-4
    assert np.all(draws[:, 0] != draws[:, 1])


def _first_three(num_data, seed=1, count=40_000):
    keys = jax.random.split(jax.random.key(seed), count)
    draw = jax.jit(jax.vmap(lambda k: permuted_indices(permutation_keys(k), jnp.arange(3), num_data)))
    return np.asarray(draw(keys)).astype(np.int64)


def _uniformity_p_values(draws, num_data):
    """Chi-square p-values: each of the first three draws uniform on [0, N), and the steps between consecutive draws
    (mod N) uniform on [1, N) — what a uniformly random ordered subset gives, and a check of their joint law."""
    marginal = [stats.chisquare(np.bincount(draws[:, c], minlength=num_data)).pvalue for c in range(3)]
    steps = [
        stats.chisquare(np.bincount((draws[:, c + 1] - draws[:, c]) % num_data, minlength=num_data)[1:]).pvalue
        for c in range(2)
    ]
    return marginal + steps


# 100 and 300 (2**7 and 2**9 domains: halves of 4 and 3, 5 and 4 bits) take the unbalanced network, 1000 the balanced
@pytest.mark.parametrize("num_data", [100, 300, 1000])
def test_the_first_draws_and_their_steps_are_uniform(num_data):
    draws = _first_three(num_data)
    assert np.all(draws[:, 0] != draws[:, 1]) and np.all(draws[:, 1] != draws[:, 2])
    assert min(_uniformity_p_values(draws, num_data)) > 1e-4


def test_a_network_of_two_rounds_fails_the_same_check(monkeypatch):
    """The deliberately wrong permutation: two Feistel rounds, a bijection still, but far from uniform."""
    from tallmcmc.acceptance import subsample

    monkeypatch.setattr(subsample, "_ROUNDS", 2)
    assert min(_uniformity_p_values(_first_three(300), 300)) < 1e-10


def test_the_domain_is_the_smallest_power_of_two_from_seven_bits_on():
    """At most half of [0, 2**k) lies outside [0, N), so cycle walking takes a few rounds; at N = 10⁵ the square
    domain 4**9 would leave 62% outside. Below 2**7 an odd k takes the square domain (narrow halves mix poorly)."""
    from tallmcmc.acceptance.subsample import domain_bits

    expected = {1: 0, 2: 2, 5: 4, 16: 4, 17: 6, 64: 6, 65: 7, 100_000: 17, 131_073: 18, 10**6: 20}
    assert {n: domain_bits(n) for n in expected} == expected
