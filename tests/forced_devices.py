"""Run a script of ``tests/scripts/`` in a subprocess with forced host CPU devices (the default suite's JAX has one)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

#: The scripts the tests run in subprocesses.
SCRIPTS = pathlib.Path(__file__).resolve().parent / "scripts"


def xla_flags(devices: int | None = None) -> str:
    """The suite's ``XLA_FLAGS`` (``suite_xla.SUITE_XLA_FLAGS`` or the user's), with ``devices`` forced host CPU
    devices in place of any count there (``None``: no forced devices, one CPU device)."""
    flags = [
        flag
        for flag in os.environ.get("XLA_FLAGS", "").split()
        if not flag.startswith("--xla_force_host_platform_device_count")
    ]
    if devices is not None:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    return " ".join(flags)


def run_on_host_devices(script: pathlib.Path, *arguments: str, devices: int = 4, timeout: int = 600) -> dict:
    """Run the file ``script`` with ``devices`` forced host devices; return the JSON it prints after ``RESULT ``."""
    env = dict(os.environ, XLA_FLAGS=xla_flags(devices), JAX_PLATFORMS="cpu")
    completed = subprocess.run(
        [sys.executable, str(script), *arguments], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    line = next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])
