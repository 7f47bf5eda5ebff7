"""JAX's persistent compilation cache, on by default (``tallmcmc.compilation_cache``).

A script run a second time compiles its sampler from the cache (measured here: the kept draws' compile time falls
by more than half) and draws the same, and again after the folder is pruned; ``TALLMCMC_COMPILATION_CACHE=0`` leaves
the cache off; a cache configured before ``import tallmcmc`` is left as it is. The folder's bound: the least recently
used files go first, down to the pruned fraction of the bound, at most once a day, at the import. Cases that need
JAX's configuration fresh run in a subprocess (it is per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from forced_devices import SCRIPTS

import tallmcmc.compilation_cache as compilation_cache
from tallmcmc import cli


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
    # a folder pruned to nothing (JAX's programs and the kept chain programs alike) compiles again, and draws the same
    assert compilation_cache.prune(folder, 0).kept_bytes == 0
    third = run([str(SCRIPTS / "compiled_run.py")], TALLMCMC_COMPILATION_CACHE=str(folder))
    assert third["first_draw"] == first["first_draw"]
    assert third["compile_seconds"] > 2 * second["compile_seconds"], (second, third)


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


DAY = compilation_cache.PRUNE_INTERVAL_SECONDS


def make_file(path: Path, size: int, accessed: float, modified: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (accessed, modified))
    return path


def remaining(folder: Path) -> set[str]:
    return {file.path.name for file in compilation_cache.usage(folder).files}


KEPT = "tallmcmc-programs"


def test_prune_deletes_the_least_recently_used_files_down_to_the_pruned_fraction(tmp_path):
    now = 1.0e9
    for age in range(10):  # a-0 (used now) ... a-9 (used nine days ago), 100 bytes each
        make_file(tmp_path / f"a-{age}-cache", 100, now - age * DAY, now - age * DAY)
    # written long ago but read yesterday: its access time makes it recent, so it stays
    make_file(tmp_path / KEPT / "read-yesterday.jaxexport", 100, now - DAY, now - 30 * DAY)
    assert compilation_cache.prune(tmp_path, 1100) == (0, 0, 1100)  # at the bound: nothing
    assert len(remaining(tmp_path)) == 11
    pruned = compilation_cache.prune(tmp_path, 1000)  # over it: down to 0.8 × 1000 = 800 bytes
    assert pruned == (3, 300, 800)
    assert remaining(tmp_path) == {f"a-{age}-cache" for age in range(7)} | {"read-yesterday.jaxexport"}


def test_only_the_files_the_cache_writes_are_counted_pruned_or_cleared(tmp_path, monkeypatch, capsys):
    """A folder named by TALLMCMC_COMPILATION_CACHE may hold other files (a user's, in the worst case a home folder):
    they are never counted, pruned or cleared, however old and large."""
    from tallmcmc import program_cache
    from tallmcmc.sampling import ahead

    assert program_cache.FOLDER_NAME == KEPT and ahead.MARKS == "compiled-ahead"  # the names CACHE_FILES matches
    cache = [
        "jit_f-0123abc-cache",
        "jit_f-0123abc-atime",
        f"{KEPT}/{'e' * 64}.jaxexport",
        f"{KEPT}/.writing-k2j3h4",
        f"{KEPT}/compiled-ahead/{'0a' * 32}",
    ]
    others = ["notes.txt", "photo-cache.jpg", "sub/x-cache", f"{KEPT}/readme", f"{KEPT}/compiled-ahead/mine.txt"]
    for name in cache + others:
        make_file(tmp_path / name, 1000, 0.0, 0.0)
    folder = compilation_cache.usage(tmp_path)
    assert sorted(file.path.relative_to(tmp_path).as_posix() for file in folder.files) == sorted(cache)
    assert compilation_cache.prune(tmp_path, 0) == (5, 5000, 0)
    monkeypatch.setattr(compilation_cache, "_managed", tmp_path)
    make_file(tmp_path / cache[0], 1000, 0.0, 0.0)
    assert cli.main(["cache", "--clear"]) == 0 and "Deleted 1 files" in capsys.readouterr().out
    assert all((tmp_path / name).is_file() for name in others)


def test_prune_is_due_once_a_day_and_marks_the_folder(tmp_path):
    assert compilation_cache.prune_if_due(tmp_path / "absent", 0) is None
    make_file(tmp_path / "old-cache", 100, 0.0, 0.0)
    now = 2.0e9
    assert compilation_cache.prune_if_due(tmp_path, 1000, now=now) == (0, 0, 100)  # never looked at: due
    make_file(tmp_path / "new-cache", 2000, now, now)
    assert compilation_cache.prune_if_due(tmp_path, 1000, now=now + DAY - 1) is None  # looked at within the day
    assert remaining(tmp_path) == {"old-cache", "new-cache"}
    assert compilation_cache.prune_if_due(tmp_path, 1000, now=now + DAY) == (2, 2100, 0)
    assert (tmp_path / compilation_cache.STAMP_NAME).exists() and not remaining(tmp_path)


def test_the_bound_from_the_environment_and_a_clear_error():
    def bound(value):
        return compilation_cache.max_bytes({compilation_cache.MAX_SIZE_VARIABLE: value})

    assert bound("") == compilation_cache.DEFAULT_MAX_BYTES == compilation_cache.max_bytes({})
    assert bound("500000000") == 500_000_000
    assert bound(" 500M ") == bound("500mb") == bound("500MiB") == 500 << 20
    assert bound("1.5G") == 3 << 29
    assert bound("unbounded") is None and bound("None") is None
    for wrong in ("lots", "5 GB extra", "-5G", "1e9"):
        with pytest.raises(ValueError, match=f"{compilation_cache.MAX_SIZE_VARIABLE}=.*500M, 2G"):
            bound(wrong)


def test_the_import_prunes_the_folder_it_chose_and_not_one_configured_outside(tmp_path):
    chosen, outside = tmp_path / "chosen", tmp_path / "outside"
    for folder in (chosen, outside):
        make_file(folder / "old-cache", 5000, 0.0, 0.0)
    probe = "import tallmcmc, json; print('RESULT ' + json.dumps(None))"
    run(["-c", probe], TALLMCMC_COMPILATION_CACHE=str(chosen), TALLMCMC_COMPILATION_CACHE_MAX_SIZE="4k")
    run(
        ["-c", probe],
        TALLMCMC_COMPILATION_CACHE="",
        JAX_COMPILATION_CACHE_DIR=str(outside),
        TALLMCMC_COMPILATION_CACHE_MAX_SIZE="4k",
    )
    assert not remaining(chosen) and (chosen / compilation_cache.STAMP_NAME).exists()
    assert remaining(outside) == {"old-cache"}


def test_the_cache_command_shows_prunes_and_clears_the_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(compilation_cache, "_managed", tmp_path)
    monkeypatch.setenv(compilation_cache.MAX_SIZE_VARIABLE, "3k")
    for age in range(4):
        make_file(tmp_path / f"program-{age}-cache", 1024, 1.0e9 - age, 1.0e9 - age)
    assert cli.main(["cache"]) == 0
    shown = capsys.readouterr().out
    assert str(tmp_path) in shown and "4.0 KiB in 4 files" in shown and "bound:  3.0 KiB" in shown
    assert cli.main(["cache", "--prune"]) == 0  # 4 KiB over the 3 KiB bound: down to 0.8 × 3 KiB
    assert "Deleted 2 files" in capsys.readouterr().out
    assert remaining(tmp_path) == {"program-0-cache", "program-1-cache"}
    assert cli.main(["cache", "--clear"]) == 0
    assert "Deleted 2 files" in capsys.readouterr().out and not remaining(tmp_path)
    monkeypatch.setattr(compilation_cache, "_managed", None)
    # as for a folder configured outside tallmcmc: not cleared
    assert cli.main(["cache", "--clear"]) == 1
    assert "tallmcmc neither bounds nor clears it" in capsys.readouterr().out
