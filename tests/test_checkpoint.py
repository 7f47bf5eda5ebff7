"""Runs on disk: ``result.save`` / ``tallmcmc.load_result`` and ``sample(checkpoint=...)``.

* A saved run reads back equal (draws, every statistic with its dtype, setup counts, the state), opens without
  tallmcmc (xarray; ArviZ), and a loaded run resumes to the draws of one longer run.
* A checkpointed process killed with SIGKILL part-way and run again unchanged ends with the draws of an
  uninterrupted run, bit for bit; writing checkpoints (the asynchronous driver's chains brought level at each)
  changes no draw.
* Bad input: a checkpoint from another model, test, seed, length or library version; a truncated or corrupt file;
  a path that cannot be written; a write that fails part-way leaves the previous checkpoint whole.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from analytic_models import CONJUGATE_1D
from forced_devices import SCRIPTS

import tallmcmc
import tallmcmc.sampling.run_file as run_file
from tallmcmc.examples import gaussian_mean

TARGET = CONJUGATE_1D
START = jnp.zeros(1, jnp.float32)


def proposal():
    return tallmcmc.random_walk(float(2.0 * np.sqrt(TARGET.variance[0])))


def sample(num_samples, **options):
    options = {"num_chains": 2, "seed": 3, "progress": False, **options}
    return tallmcmc.sample(
        TARGET.model, proposal(), tallmcmc.minibatch_barker(20), START, num_samples=num_samples, **options
    )


def draws_equal(a, b) -> bool:
    pairs = zip(jax.tree_util.tree_leaves((a.positions, a.info)), jax.tree_util.tree_leaves((b.positions, b.info)))
    return all(np.array_equal(x, y, equal_nan=True) for x, y in pairs)


@pytest.fixture(scope="module")
def warmed_run():
    return sample(60, num_warmup=40)


def test_a_saved_run_reads_back_equal_and_opens_without_tallmcmc(warmed_run, tmp_path):
    path = tmp_path / "run.nc"
    warmed_run.save(path)
    loaded = tallmcmc.load_result(path)
    assert draws_equal(warmed_run, loaded)
    for name, value in warmed_run.info.items():
        assert loaded.info[name].dtype == value.dtype, name
    assert np.array_equal(loaded.warmup_positions, warmed_run.warmup_positions)
    assert loaded.setup_data_used == warmed_run.setup_data_used
    assert np.array_equal(loaded.step_size_factor, warmed_run.step_size_factor)
    assert loaded.final_state is None and loaded.last_state.steps_done == 60
    for saved, read in zip(warmed_run.last_state.leaves, loaded.last_state.leaves):
        assert np.array_equal(np.asarray(saved), read)
    # without tallmcmc: the draws are ArviZ's groups in a NetCDF file
    with xr.open_datatree(path, engine="h5netcdf") as tree:
        assert {"posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"} <= set(tree.children)
        assert np.array_equal(tree["posterior"]["theta"].values, warmed_run.positions)


def test_a_loaded_run_resumes_to_one_longer_run(warmed_run, tmp_path):
    warmed_run.save(tmp_path / "run.nc")
    resumed = tallmcmc.sample(
        TARGET.model,
        proposal(),
        tallmcmc.minibatch_barker(20),
        resume=tallmcmc.load_result(tmp_path / "run.nc"),
        num_samples=40,
        progress=False,
    )
    assert draws_equal(sample(100, num_warmup=40), resumed)


@pytest.mark.parametrize("driver", [pytest.param("vmap", marks=pytest.mark.slow), "asynchronous"])
def test_writing_checkpoints_changes_no_draw(driver, tmp_path):
    plain = sample(60, num_chains=8, driver=driver, num_warmup=20)
    path = tmp_path / "run.nc"
    checkpointed = sample(60, num_chains=8, driver=driver, num_warmup=20, checkpoint=path, checkpoint_every=20)
    assert draws_equal(plain, checkpointed)
    assert draws_equal(plain, tallmcmc.load_result(path))
    again = sample(60, num_chains=8, driver=driver, num_warmup=20, checkpoint=path)  # the file already holds the run
    assert draws_equal(plain, again) and again.sampling_seconds == checkpointed.sampling_seconds


def run_script(path, driver, hang_after_steps=None):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if hang_after_steps is not None:
        env["HANG_AFTER_STEPS"] = str(hang_after_steps)
    return subprocess.Popen(
        [sys.executable, str(SCRIPTS / "checkpointed_run.py"), str(path), driver],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("driver", ["vmap", pytest.param("asynchronous", marks=pytest.mark.slow)])
def test_a_killed_run_resumes_where_it_stopped(driver, tmp_path):
    killed_path, whole_path = tmp_path / "killed.nc", tmp_path / "whole.nc"
    uninterrupted = run_script(whole_path, driver)
    # 50 warm-up steps, then 400 draws checkpointed every 100: the run stops for good at its 250th draw, after the
    # checkpoint of 200 draws, and is killed there
    process = run_script(killed_path, driver, hang_after_steps=50 + 250)
    deadline = time.monotonic() + 300
    draws = 0
    while draws < 200:
        assert process.poll() is None, "the run ended before it could be killed: " + process.stderr.read()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
        try:
            draws = tallmcmc.load_result(killed_path).num_draws
        except ValueError:  # not there yet
            draws = 0
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    saved = tallmcmc.load_result(killed_path)  # the file the killed process left is whole
    assert saved.num_draws == 200
    resumed = run_script(killed_path, driver)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()[-2000:]
    assert uninterrupted.wait(timeout=600) == 0, uninterrupted.stderr.read()[-2000:]
    finished, whole = tallmcmc.load_result(killed_path), tallmcmc.load_result(whole_path)
    assert finished.num_draws == 400
    assert draws_equal(whole, finished)
    assert all(np.array_equal(a, b) for a, b in zip(whole.last_state.leaves, finished.last_state.leaves))


@pytest.fixture(scope="module")
def checkpoint_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpoint") / "run.nc"
    sample(40, checkpoint=path, checkpoint_every=20)
    return path


@pytest.mark.parametrize(
    ("change", "name"),
    [
        (dict(seed=4), "seed"),
        (dict(num_chains=3), "num_chains"),
        (dict(num_samples=50), "num_samples"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused(checkpoint_file, change, name):
    with pytest.raises(ValueError, match=name):
        sample(change.pop("num_samples", 40), checkpoint=checkpoint_file, **change)


def test_a_checkpoint_of_another_model_or_test_is_refused(checkpoint_file):
    other_data = gaussian_mean.model(np.asarray(TARGET.model.data) + 1.0)
    with pytest.raises(ValueError, match="another model"):
        tallmcmc.sample(
            other_data,
            proposal(),
            tallmcmc.minibatch_barker(20),
            START,
            num_samples=40,
            num_chains=2,
            seed=3,
            progress=False,
            checkpoint=checkpoint_file,
        )
    with pytest.raises(ValueError, match="test"):
        tallmcmc.sample(
            TARGET.model,
            proposal(),
            tallmcmc.exact_barker(),
            START,
            num_samples=40,
            num_chains=2,
            seed=3,
            progress=False,
            checkpoint=checkpoint_file,
        )


def test_a_checkpoint_of_another_library_version_is_refused(checkpoint_file, monkeypatch):
    monkeypatch.setattr(run_file.importlib.metadata, "version", lambda name: "99.0")
    with pytest.raises(ValueError, match="tallmcmc 99.0|was written by tallmcmc"):
        sample(40, checkpoint=checkpoint_file)


def test_truncated_and_corrupt_files_are_refused(checkpoint_file, tmp_path):
    truncated = tmp_path / "truncated.nc"
    truncated.write_bytes(checkpoint_file.read_bytes()[: checkpoint_file.stat().st_size // 2])
    corrupt = tmp_path / "corrupt.nc"
    corrupt.write_bytes(b"not a tallmcmc run" * 100)
    for path in (truncated, corrupt):
        with pytest.raises(ValueError, match="checkpoint=.*cannot be read"):
            sample(40, checkpoint=path)
        with pytest.raises(ValueError, match="cannot be read"):
            tallmcmc.load_result(path)


def test_a_path_that_cannot_be_written_is_refused_before_sampling(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    for path, message in (
        (a_file / "run.nc", "does not exist"),
        (tmp_path, "is a folder"),
        (tmp_path / "missing" / "run.nc", "does not exist"),
    ):
        with pytest.raises(ValueError, match=f"checkpoint=.*{message}"):
            sample(10, checkpoint=path)
    with pytest.raises(ValueError, match="checkpoint_every"):
        sample(10, checkpoint=tmp_path / "run.nc", checkpoint_every=0)
    with pytest.raises(ValueError, match="checkpoint_every needs checkpoint"):
        sample(10, checkpoint_every=5)


def test_a_checkpoint_file_given_writes_its_record_into_every_checkpoint(tmp_path, monkeypatch):
    """``sample(checkpoint=CheckpointFile(path, every, made_by=record))`` (what ``sample_tall`` passes) writes the
    record into each checkpoint, the first one after warm-up included; ``checkpoint_every`` then belongs to the file."""
    from tallmcmc.sampling.checkpoint import CheckpointFile

    path = tmp_path / "run.nc"
    record = {"seed": 3, "batch_size": 20}
    records = []
    original = CheckpointFile.write

    def write(self, result, target):
        original(self, result, target)
        records.append(tallmcmc.load_result(self.path).made_by)

    monkeypatch.setattr(CheckpointFile, "write", write)
    result = sample(20, num_warmup=10, checkpoint=CheckpointFile(path, 10, made_by=record))
    assert records == [record] * 3  # after warm-up, after 10 draws, at the end
    assert result.num_draws == 20 and tallmcmc.load_result(path).made_by == record
    with pytest.raises(ValueError, match="checkpoint_every: give it to the CheckpointFile"):
        sample(20, checkpoint=CheckpointFile(path, 10), checkpoint_every=10)


def test_a_write_that_fails_leaves_the_previous_checkpoint_whole(checkpoint_file, tmp_path, monkeypatch):
    path = tmp_path / "run.nc"
    path.write_bytes(checkpoint_file.read_bytes())
    before = path.read_bytes()

    def failing(self, target, **options):
        with open(target, "wb") as partial:
            partial.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(xr.DataTree, "to_netcdf", failing)
    with pytest.raises(OSError, match="disk full"):
        tallmcmc.load_result(path).save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.nc"]  # no temporary file left behind
