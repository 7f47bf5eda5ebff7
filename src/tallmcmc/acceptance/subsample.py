"""Drawing data indices without replacement, in O(1) memory per index.

Every minibatch test here draws the points of one step without replacement,
so that a test that has used all ``N`` points has seen each exactly once and
its decision is then exact. Shuffling ``N`` indices each step would cost
``O(N)`` per step, which defeats the purpose of subsampling. Instead, each
step draws a key for a keyed pseudo-random *permutation* of ``{0, …, N−1}``
and asks it for its ``k``-th element only when the test needs the ``k``-th
point: an 8-round Feistel network on ``2**k ≥ N`` elements (the smallest such
``k`` from ``N > 64`` on; halves of ``⌈k/2⌉`` and ``⌊k/2⌋`` bits, alternating), restricted to
``[0, N)`` by cycle walking (Black & Rogaway 2002). The first ``n`` outputs are
``n`` distinct indices; over the key they form a (pseudo-)uniformly random
ordered subset.

At most half of ``[0, 2**k)`` lies outside ``[0, N)``, so a chunk of indices
walks a few rounds at any ``N``. (A balanced network needs ``4**h ≥ N``, up to
four times ``N``: at ``N = 10⁵``, 62% outside, ≈ 10 rounds for a chunk of 100.)
For even ``k`` the two are the same network and give the same indices.

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


# Below this many bits an unbalanced network's narrow halves are visibly non-uniform (k = 3: the first two draws of
# [0, 5) have p < 1e-50 in a chi-square test over 200,000 keys; k = 5, 7, 9, 11, 13 pass, as the balanced network
# does): odd k under it take the square domain 2**(k + 1) = 4**h, as before. Where it matters for cost, N is large.
_UNBALANCED_MIN_BITS = 7


def domain_bits(num_data: int) -> int:
    """Bits ``k`` of the domain ``[0, 2**k)`` the Feistel network permutes: the smallest ``k`` with
    ``2**k >= num_data``, made even (the balanced network on ``4**h``) below :data:`_UNBALANCED_MIN_BITS`."""
    bits = max(int(num_data) - 1, 0).bit_length()
    return bits + 1 if bits % 2 and bits < _UNBALANCED_MIN_BITS else bits


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


def _feistel(value: jax.Array, round_keys: jax.Array, bits: int) -> jax.Array:
    """The keyed bijection of ``[0, 2**bits)``: a value is a high part of ``⌈bits/2⌉`` bits and a low part of
    ``⌊bits/2⌋``; each round maps (high, low) to (low, high xor F(low)), so the parts swap widths and come back to
    them after the even number of rounds (for even ``bits``, the balanced network)."""
    high_bits, low_bits = (bits + 1) // 2, bits // 2
    keys = [lax.index_in_dim(round_keys, r, keepdims=False) for r in range(_ROUNDS)]
    high = _shift_right(value, low_bits)
    low = lax.bitwise_and(value, jnp.uint32((1 << low_bits) - 1))
    for r in range(_ROUNDS):
        mixed = lax.bitwise_and(_round_function(low, keys[r]), jnp.uint32((1 << high_bits) - 1))
        high, low = low, lax.bitwise_xor(high, mixed)
        high_bits, low_bits = low_bits, high_bits
    return lax.bitwise_or(lax.shift_left(high, jnp.uint32(low_bits)), low)


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
    bits = domain_bits(num_data)
    if bits == 0:
        return jnp.zeros_like(positions, dtype=jnp.int32)
    n = jnp.uint32(num_data)
    value = _feistel(positions.astype(jnp.uint32), round_keys, bits)

    # Cycle walking: re-encrypt values that fall outside [0, N); since the
    # Feistel network is a bijection of [0, 2**k), this is a bijection of [0, N).
    def outside(v):
        return jnp.any(v >= n)

    def walk(v):
        return jnp.where(v >= n, _feistel(v, round_keys, bits), v)

    value = lax.while_loop(outside, walk, value)
    return value.astype(jnp.int32)
