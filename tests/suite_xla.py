"""The default suite's XLA options (``conftest`` sets them) and the options that give a run-heavy check XLA's
defaults back.

About three quarters of the default suite's time was compiling (JAX's own compile-time events, summed per test:
XLA 1,235 s, lowering 209 s, tracing 182 s of 2,199 s on a slow 2-core CPU); with the older fusion emitters and
LLVM's expensive passes off, XLA's share halves and the suite takes about a quarter less (18 min 39 s -> 14 min 8 s
there, every test passing). The programs run slower, which the default suite's short runs do not feel; the few
checks that run one program long (tens of thousands of minibatch decisions) compile it with :data:`RUN_HEAVY`.

Tried and not used (2026-11-29, the same CPU): LLVM at level 0 for every program (these flags plus
``--xla_backend_optimization_level=0``, with ``TALLMCMC_XLA_OPTIONS=default`` so that the chain programs take it too).
``tests/test_chain_asynchronous.py`` and ``tests/test_sample_tall.py`` together ran in 88.6 s instead of 106.0 s, but
the asynchronous driver no longer drew the vmapped driver's bits
(``test_asynchronous_draws_equal_vmapped_draws[minibatch_barker]`` failed), which they do at the levels users get.
"""

#: ``XLA_FLAGS`` of the default suite (not with ``--runslow``, not where ``XLA_FLAGS`` is set: ``conftest``).
SUITE_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_llvm_disable_expensive_passes=true"

#: Per-program compiler options (``jax.jit(..., compiler_options=...)``) restoring XLA's defaults that
#: :data:`SUITE_XLA_FLAGS` changes: the heavy-tailed tail-guard check, 4 x 20,000 decisions, took 50 s alone under
#: the suite's flags and 20 s under these. Without the fusion emitters, a program that runs the minibatch tests'
#: stage loop many times runs it about three times slower (a random walk under the minibatch Barker test,
#: N = 10^5, 4 chains x 200 steps of about 690 stages of 100 points: 29 s against 8.5 s of running, for 1.5 s less
#: compiling; ``sample``, the compilation cache off, a fresh process each), so every
#: check that runs thousands of minibatch decisions in one program (``repeated_decisions``, and the jitted
#: decision programs of ``tests/acceptance``) compiles it with these (``tests/acceptance``: 258 s summed instead of
#: 328 s).
RUN_HEAVY = {"xla_cpu_use_fusion_emitters": True, "xla_llvm_disable_expensive_passes": False}
