"""Run a script in a subprocess whose JAX has forced host CPU devices (the default suite's JAX has one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_on_host_devices(script: str, *arguments: str, devices: int = 4, timeout: int = 600) -> dict:
    """Run ``script`` with ``devices`` forced host devices; the JSON it prints after ``RESULT `` is returned."""
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    completed = subprocess.run(
        [sys.executable, "-c", script, *arguments], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    line = next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])
