"""JAX's persistent compilation cache, on by default (``tallmcmc.compilation_cache``).

A script run a second time compiles its sampler from the cache (measured here: the kept draws' compile time falls
by more than half) and draws the same; ``TALLMCMC_COMPILATION_CACHE=0`` leaves the cache off; a cache configured
before ``import tallmcmc`` is left as it is. Each case runs in a subprocess (JAX's configuration is per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
from forced_devices import SCRIPTS

import tallmcmc.compilation_cache as compilation_cache


def run(script: list[str], **environment) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **environment}
    completed = subprocess.run([sys.executable, *script], capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    line = next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_a_second_run_compiles_from_the_cache(tmp_path):
    folder = tmp_path / "cache"
    first = run([str(SCRIPTS / "compiled_run.py")], TALLMCMC_COMPILATION_CACHE=str(folder))
    second = run([str(SCRIPTS / "compiled_run.py")], TALLMCMC_COMPILATION_CACHE=str(folder))
    assert first["cache"] == str(folder) and any(folder.iterdir())
    assert second["compile_seconds"] < 0.5 * first["compile_seconds"], (first, second)
    assert second["first_draw"] == first["first_draw"]


PROBE = "import jax, tallmcmc, json; print('RESULT ' + json.dumps({'cache': jax.config.jax_compilation_cache_dir}))"


def test_opting_out_and_a_cache_configured_before(tmp_path):
    assert run(["-c", PROBE], TALLMCMC_COMPILATION_CACHE="0")["cache"] is None
    # the other spellings, without a process each: configure() on an unconfigured JAX leaves it off for them
    before = jax.config.jax_compilation_cache_dir
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        for off in ("off", "False", " no "):
            assert compilation_cache.configure({compilation_cache.ENVIRONMENT_VARIABLE: off}) is None
            assert jax.config.jax_compilation_cache_dir is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    own = str(tmp_path / "own")
    assert run(["-c", PROBE], TALLMCMC_COMPILATION_CACHE="", JAX_COMPILATION_CACHE_DIR=own)["cache"] == own
    default = run(["-c", PROBE], TALLMCMC_COMPILATION_CACHE="")["cache"]
    assert default == str(compilation_cache.default_directory())
