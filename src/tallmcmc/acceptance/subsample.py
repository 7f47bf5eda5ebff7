"""Drawing data indices without replacement, in O(1) memory per index.

Every minibatch test here draws the points of one step without replacement,
so that a test that has used all ``N`` points has seen each exactly once and
its decision is then exact. Shuffling ``N`` indices each step would cost
``O(N)`` per step, which defeats the purpose of subsampling. Instead, each
step draws a key for a keyed pseudo-random *permutation* of ``{0, …, N−1}``
and asks it for its ``k``-th element only when the test needs the ``k``-th
point: an 8-round Feistel network on ``4**h ≥ N`` elements, restricted to
``[0, N)`` by cycle walking (Black & Rogaway 2002). The first ``n`` outputs are
``n`` distinct indices; over the key they form a (pseudo-)uniformly random
ordered subset.

References
----------
.. [1] Luby, M. and Rackoff, C. (1988). How to construct pseudorandom
   permutations from pseudorandom functions. SIAM J. Comput. 17(2).
.. [2] Black, J. and Rogaway, P. (2002). Ciphers with arbitrary finite
   domains. CT-RSA 2002, LNCS 2271.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

# Eight Feistel rounds: four (Luby-Rackoff's minimum) are visibly non-uniform on
# tiny domains (benchmarks/RESULTS.md); the uniformity test checks eight.
_ROUNDS = 8


def _half_bits(num_data: int) -> int:
    """Smallest ``h`` with ``4**h >= num_data``."""
    half = 0
    while 4**half < num_data:
        half += 1
    return half


# The rounds are written with lax's primitives rather than jax.numpy's operators: the same operations on uint32 (so
# the same bits), traced without jax.numpy's dispatch (a permutation traced in 23–41 ms instead of 39–49 ms in fresh
# processes; docs/compilation.md).
def _shift_right(x: jax.Array, bits: int) -> jax.Array:
    return lax.shift_right_logical(x, jnp.uint32(bits))


def _round_function(value: jax.Array, round_key: jax.Array) -> jax.Array:
    # MurmurHash3's 32-bit finaliser of (value xor key): a fast, well-mixing hash.
    x = lax.bitwise_xor(value, round_key)
    x = lax.bitwise_xor(x, _shift_right(x, 16))
    x = lax.mul(x, jnp.uint32(0x85EBCA6B))
    x = lax.bitwise_xor(x, _shift_right(x, 13))
    x = lax.mul(x, jnp.uint32(0xC2B2AE35))
    return lax.bitwise_xor(x, _shift_right(x, 16))


def _feistel(value: jax.Array, round_keys: jax.Array, half: int) -> jax.Array:
    mask = jnp.uint32((1 << half) - 1)
    keys = [lax.index_in_dim(round_keys, r, keepdims=False) for r in range(_ROUNDS)]
    high = _shift_right(value, half)
    low = lax.bitwise_and(value, mask)
    for r in range(_ROUNDS):
        high, low = low, lax.bitwise_xor(high, lax.bitwise_and(_round_function(low, keys[r]), mask))
    return lax.bitwise_or(lax.shift_left(high, jnp.uint32(half)), low)


def permutation_keys(rng_key: jax.Array) -> jax.Array:
    """Round keys of one random permutation (draw once per step)."""
    return jax.random.bits(rng_key, (_ROUNDS,), dtype=jnp.uint32)


def permuted_indices(round_keys: jax.Array, positions: jax.Array, num_data: int) -> jax.Array:
    """Elements ``positions`` of the keyed permutation of ``range(num_data)``.

    Parameters
    ----------
    round_keys
        From :func:`permutation_keys`.
    positions
        Integer array of positions in ``[0, num_data)``.
    num_data
        Size ``N`` of the data set (static).

    Returns
    -------
    jax.Array
        ``int32`` indices in ``[0, num_data)``; distinct positions give
        distinct indices.
    """
    if num_data < 1:
        raise ValueError("num_data must be at least 1")
    half = _half_bits(num_data)
    if half == 0:
        return jnp.zeros_like(positions, dtype=jnp.int32)
    n = jnp.uint32(num_data)
    value = _feistel(positions.astype(jnp.uint32), round_keys, half)

    # Cycle walking: re-encrypt values that fall outside [0, N); since the
    # Feistel network is a bijection of [0, 4**h), this is a bijection of [0, N).
    def outside(v):
        return jnp.any(v >= n)

    def walk(v):
        return jnp.where(v >= n, _feistel(v, round_keys, half), v)

    value = lax.while_loop(outside, walk, value)
    return value.astype(jnp.int32)
