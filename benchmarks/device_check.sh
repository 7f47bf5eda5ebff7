#!/bin/bash
# The GPU check of issue 26 (and issue 11's chain figures), as one call of the `device` tool:
#   run(command="bash benchmarks/device_check.sh", carry=[".whl", ".devref"], timeout_s=590)
# Steps, each with its own time limit in seconds, from the environment:
# * the smoke run;
# * bench_all_in.py at N = 10⁷ (ALL_IN_SECONDS, 0 skips; each method METHOD_SECONDS; ALL_IN_OPTIONS adds options, e.g.
#   --with-bound; HMCECS's products at PEER_PRECISION, default highest: PEER_PRECISION=default gives JAX's TF32 on a
#   GPU, where HMCECS was 13.7 MCSE off, docs/precision.md);
# * bench_chains.py, only with CHAINS=1 (CHAINS_SECONDS);
# * users' own NumPyro models, bench_user_models.py at N = USER_MODELS_N (default 10⁶), the models USER_MODELS
#   (default "poisson student rare centred"), NUTS the reference at full float32 precision (USER_MODELS_SECONDS,
#   default 0: skipped);
# * the float32 probe, bench_float32_sums.py (PROBE_SECONDS, 0 skips);
# * bench_compilation.py's sample_tall runs and listing (COMPILATION_SECONDS; 0 skips);
# * bench_phases.py, a first and a warm call's phases, the warm one's PROFILE functions of most cumulative time under
#   cProfile (PHASES_SECONDS, 0 skips; added after the call below: ≈ 25 s more,
#   from the processes of bench_compilation's first and warm runs there, 15.9 + 9.2 s).
# * only with FLAG_SETS (XLA_FLAGS values separated by ';', "none" for XLA's own): a first run's phases under each
#   (bench_phases.py --runs 1 --draws FLAGS_DRAWS, default 10,000), for the GPU's compile options (FLAGS_SECONDS
#   each).
# * only with AGAINST (another tree's src folder, carried): bench_phases.py --runs 2 on that tree and on this one,
#   alternating, AB_ROUNDS rounds (default 2; AB_SECONDS each).
# * only with AHEAD_ROUNDS=K: bench_phases.py --runs 2 with TALLMCMC_COMPILE_AHEAD=1 and =0 alternating, K rounds
#   (AHEAD_SECONDS each; ≈ 20 s a process pair on the H200) — sample_tall's compile-ahead thread, first and second run.
# The defaults are sized from the H200 call of 2026-11-28 (RESULTS, "The N = 10⁷ rows on a GPU again"): 335 s for
# the steps before bench_phases (HMCECS alone 197 s), plus ≈ 30 s to start the machine; within one 15-minute device
# budget that leaves time for one shorter second call.
# .whl: the wheels the GPU image lacks (clarabel, cffi, pycparser, platformdirs, arviz, arviz-base, arviz-stats —
# without these two the diagnostics fall back to `import arviz`, 3 s a call there — h5netcdf, xarray-einstats), and
# numpyro 0.22 (the image's 0.21 HMCECS fails at its first step: "all sites must have unique names but got
# `_biased_corrected_log_likelihood` duplicated");
# .devref: the cached reference posteriors (~/.cache/tallmcmc/bench/reference_*.npz, 1.7 kB each).
# Every table is printed as it finishes and written under $OUT, so a step that runs out of time loses nothing before it.
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false  # the benches run one JAX process after another
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD/src
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" ~/.cache/tallmcmc/bench && cp .devref/*.npz ~/.cache/tallmcmc/bench/
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 - <<'PY' || exit
import time, jax, numpyro, numpy as np
print("jax", jax.__version__, "numpyro", numpyro.__version__, jax.devices())
import tallmcmc
from tallmcmc.examples import logistic_regression
x, y = logistic_regression.simulate(20_000, 5, seed=0)
began = time.perf_counter()
result = tallmcmc.sample_tall(logistic_regression.model(x, y), num_samples=200, progress=False)
print(f"smoke: sample_tall N = 20,000 ran in {time.perf_counter() - began:.1f} s, decision {result.diagnosis.decision}")
PY
[ "${ALL_IN_SECONDS:-380}" = 0 ] || timeout ${ALL_IN_SECONDS:-380} python3 benchmarks/bench_all_in.py --sizes 10000000 ${ALL_IN_OPTIONS:-} \
    --peer-precision ${PEER_PRECISION:-highest} --timeout ${METHOD_SECONDS:-280} \
    --json "$OUT/all_in.json" 2>&1 | tee "$OUT/all_in.log"
[ -z "${CHAINS:-}" ] || timeout ${CHAINS_SECONDS:-100} python3 benchmarks/bench_chains.py --only gmm logistic --chains 1 64 512 4096 \
    --repeats 2 2>&1 | tee "$OUT/chains.log"
[ "${USER_MODELS_SECONDS:-0}" = 0 ] || timeout ${USER_MODELS_SECONDS} python3 benchmarks/bench_user_models.py \
    --num-data ${USER_MODELS_N:-1000000} --only ${USER_MODELS:-poisson student rare centred} --reference-precision highest \
    2>&1 | tee "$OUT/user_models.log"
[ "${PROBE_SECONDS:-60}" = 0 ] || timeout ${PROBE_SECONDS:-60} python3 benchmarks/bench_float32_sums.py --num-data 10000000 2>&1 | tee "$OUT/float32_sums.log"
[ "${COMPILATION_SECONDS:-110}" = 0 ] || timeout ${COMPILATION_SECONDS:-110} python3 benchmarks/bench_compilation.py \
    --only sample_tall --where 2>&1 | tee "$OUT/compilation.log"
[ "${PHASES_SECONDS:-60}" = 0 ] || timeout ${PHASES_SECONDS:-60} python3 benchmarks/bench_phases.py --num-data 1000000 --runs 2 \
    --profile ${PROFILE:-60} 2>&1 | tee "$OUT/phases.log"
[ -z "${FLAG_SETS:-}" ] || (IFS=';'; for flags in $FLAG_SETS; do
    [ "$flags" = none ] && flags=
    echo "XLA_FLAGS=$flags"
    XLA_FLAGS="$flags" timeout ${FLAGS_SECONDS:-60} python3 benchmarks/bench_phases.py --num-data 1000000 --runs 1 --draws ${FLAGS_DRAWS:-10000} 2>&1 |
        grep -E "the call|sampling_seconds|warm-up|fast setup"
done) 2>&1 | tee "$OUT/flags.log"
[ -z "${AGAINST:-}" ] || for round in $(seq ${AB_ROUNDS:-2}); do
    for tree in "$AGAINST" "$PWD/src"; do
        echo "round $round: $tree"
        PYTHONPATH=/tmp/site:$tree timeout ${AB_SECONDS:-60} python3 benchmarks/bench_phases.py --num-data 1000000 --runs 2 2>&1 |
            grep -E "run|the call|sampling_seconds|warm-up|fast setup"
    done
done 2>&1 | tee "$OUT/against.log"
[ -z "${AHEAD_ROUNDS:-}" ] || for round in $(seq "$AHEAD_ROUNDS"); do
    for ahead in 1 0; do
        echo "round $round: TALLMCMC_COMPILE_AHEAD=$ahead"
        TALLMCMC_COMPILE_AHEAD=$ahead timeout ${AHEAD_SECONDS:-60} python3 benchmarks/bench_phases.py --num-data 1000000 \
            --runs 2 2>&1 | grep -E "run|the call|warm-up|fast setup"
    done
done 2>&1 | tee "$OUT/ahead.log"
