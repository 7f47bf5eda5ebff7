"""JAX's Threefry hash lowered straight-line on a CPU, as upstream JAX does since pull request 37872 (not in 0.10.2).

Every ``jax.random`` call (a key's split or fold, a normal or uniform draw) runs the Threefry-2x32 hash. JAX 0.10.2
lowers it on a CPU as a ``fori_loop`` over its five groups of four rounds ("rolled"), and everywhere else as
straight-line code; upstream JAX has since dropped the CPU exception (jax-ml/jax pull request 37872: with XLA's
thunk runtime the rolled loop is slower to compile and to run). A chain step draws a dozen times (the chain's key,
the proposal's momentum and jitter, the test's order of the data, its added noise), so on a CPU each step ran a
dozen small loops, each a handful of kernels with copies between iterations. ``import tallmcmc`` registers JAX's
own straight-line rule for the CPU, which is what the next JAX release does for everyone.

The hash is integer arithmetic, so **every random number is bit for bit the same**; only the compiled program
changes: fewer kernels and far fewer copies, and a chain samples faster on a CPU (measured in
``docs/compilation.md``, "The random numbers' hash, straight-line on a CPU").

It is applied only where the installed JAX still has its CPU rule (``_threefry2x32_cpu_lowering_rule``) and its
straight-line rule under the names JAX 0.10.2 uses; anywhere else nothing is done (:data:`APPLIED` says which).
Opt out with the environment variable ``TALLMCMC_THREEFRY_STRAIGHT=0`` (read at ``import tallmcmc``).
"""

from __future__ import annotations

from tallmcmc._switches import switched_off

__all__ = ["APPLIED", "ENVIRONMENT_VARIABLE", "configure"]

ENVIRONMENT_VARIABLE = "TALLMCMC_THREEFRY_STRAIGHT"
#: Whether :func:`configure` registered the straight-line rule for the CPU in this process.
APPLIED = False


def configure(environ: dict[str, str] | None = None) -> bool:
    """Lower JAX's Threefry hash straight-line on a CPU (the module docstring says when); returns :data:`APPLIED`.

    Registering a lowering rule starts no backend, so this is safe before
    ``tallmcmc.distributed.initialize``. Programs already lowered keep their
    rule; JAX's persistent cache keys programs by their lowered text, so a
    program lowered either way is never loaded for the other.
    """
    global APPLIED
    if switched_off(ENVIRONMENT_VARIABLE, environ):
        return APPLIED
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32
    except ImportError:  # another JAX layout: leave JAX as it is
        return APPLIED
    straight = getattr(threefry2x32, "_threefry2x32_lowering_rule", None)
    primitive = getattr(threefry2x32, "threefry2x32_p", None)
    if straight is None or primitive is None or not hasattr(threefry2x32, "_threefry2x32_cpu_lowering_rule"):
        return APPLIED  # a JAX without the CPU exception (or with other names): nothing to do
    mlir.register_lowering(primitive, straight, platform="cpu", inline=False)
    APPLIED = True
    return APPLIED
