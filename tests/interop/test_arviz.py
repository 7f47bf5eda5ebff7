"""The bridge to ArviZ (tallmcmc.interop.arviz) under each installed ArviZ line, against independent references.

Each diagnostic runs under every line installed here (``TALLMCMC_ARVIZ=0``: ``arviz`` < 1; ``=1``: arviz-base and
arviz-stats, both installed by the ``[dev]`` extra) on independent normal draws, whose true values are known: ESS
= n, MCSE of the mean = σ/√n, MCSE of the sd = σ/√(2n) (normal fourth moment), r̂ = 1. Tolerances are 5 standard
deviations of each estimator over independent normal draws, measured over 200 coordinates of 4 × 1000 draws
(ESS/n: 2.4/√n; MCSE·√n/σ: 1.3/√n; MCSE(sd)·√(2n)/σ: 2.2/√n under 0.x, 1.8/√n under 1.x).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tallmcmc.interop import arviz as bridge
from tallmcmc.sampling.result import SamplingResult


def _arviz0_installed() -> bool:
    try:
        return int(importlib.metadata.version("arviz").split(".")[0]) < 1
    except importlib.metadata.PackageNotFoundError:
        return False


def _arviz1_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("arviz_base", "arviz_stats"))


LINES = [
    pytest.param(0, marks=pytest.mark.skipif(not _arviz0_installed(), reason="arviz<1 not installed")),
    pytest.param(1, marks=pytest.mark.skipif(not _arviz1_installed(), reason="arviz-base/arviz-stats not installed")),
]
CHAINS, DRAWS = 4, 1000
N = CHAINS * DRAWS


@pytest.fixture(params=LINES, ids=lambda line: f"arviz{line}")
def line(request, monkeypatch):
    monkeypatch.setenv(bridge.BACKEND_VARIABLE, str(request.param))
    return request.param


@pytest.fixture(scope="module")
def normal_draws():
    """4 chains × 1000 independent N(2, 3²) draws of 5 coordinates."""
    return 2.0 + 3.0 * np.random.default_rng(20261125).standard_normal((CHAINS, DRAWS, 5))


# ------------------------------------------------------------------------------------------------ which line


def test_the_switch_picks_the_line_and_refuses_nonsense(monkeypatch):
    monkeypatch.delenv(bridge.BACKEND_VARIABLE, raising=False)
    if _arviz0_installed():
        assert bridge.backend() == 0  # an arviz < 1 installed: its line, whatever else is there
    monkeypatch.setenv(bridge.BACKEND_VARIABLE, "2")
    with pytest.raises(ValueError, match="TALLMCMC_ARVIZ"):
        bridge.backend()
    if not _arviz0_installed():
        monkeypatch.setenv(bridge.BACKEND_VARIABLE, "0")
        with pytest.raises(ImportError):
            bridge.backend()


def test_the_line_is_the_one_asked_for(line):
    assert bridge.backend() == line
    assert bridge.diagnostics_backend() == line


@pytest.mark.skipif(not _arviz1_installed(), reason="arviz-base/arviz-stats not installed")
def test_the_diagnostics_use_arviz_stats_unless_told_and_never_import_arviz(monkeypatch):
    """Unset, the diagnostics take the 1.x line even beside an arviz 0.x (whose objects backend() keeps), and a
    process that computes them never imports ``arviz`` itself (3 s with numba compiling, docs/arviz.md)."""
    monkeypatch.delenv(bridge.BACKEND_VARIABLE, raising=False)
    assert bridge.diagnostics_backend() == 1
    code = (
        "import sys, numpy as np; from tallmcmc.interop import arviz as bridge; "
        "x = np.random.default_rng(0).standard_normal((4, 100, 2)); bridge.rhat(x); bridge.ess(x); bridge.mcse(x); "
        "print('arviz' in sys.modules)"
    )
    environment = {key: value for key, value in os.environ.items() if key != bridge.BACKEND_VARIABLE}
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "False"


# ----------------------------------------------------------------------------------------------- diagnostics


def test_ess_of_independent_draws_is_their_number(line, normal_draws):
    for method in ("bulk", "mean"):
        ess = bridge.ess(normal_draws, method=method)
        assert ess.shape == (5,) and ess.dtype == np.float64
        np.testing.assert_array_less(np.abs(ess / N - 1), 5 * 2.4 / np.sqrt(N))


def test_mcse_of_the_mean_and_of_the_sd(line, normal_draws):
    sd = normal_draws.std(axis=(0, 1), ddof=1)
    np.testing.assert_array_less(np.abs(bridge.mcse(normal_draws) * np.sqrt(N) / sd - 1), 5 * 1.3 / np.sqrt(N))
    mcse_sd = bridge.mcse(normal_draws, method="sd")
    np.testing.assert_array_less(np.abs(mcse_sd * np.sqrt(2 * N) / sd - 1), 5 * 2.2 / np.sqrt(N))


def test_rhat_is_one_for_mixed_chains_and_large_for_shifted_ones(line, normal_draws):
    np.testing.assert_array_less(bridge.rhat(normal_draws), 1.01)
    shifted = normal_draws + 3.0 * np.arange(CHAINS)[:, None, None] / 2  # chain means 0, ½σ, σ, 1½σ apart
    assert np.all(bridge.rhat(shifted) > 1.1)


def test_shapes_one_value_per_trailing_coordinate(line, normal_draws):
    assert isinstance(bridge.ess(normal_draws[..., 0]), float)
    assert isinstance(bridge.rhat(normal_draws[..., 0]), float)
    assert isinstance(bridge.mcse(normal_draws[..., 0], method="sd"), float)
    grid = normal_draws[..., :4].reshape(CHAINS, DRAWS, 2, 2)
    np.testing.assert_allclose(bridge.ess(grid), bridge.ess(normal_draws[..., :4]).reshape(2, 2), rtol=1e-12)
    assert bridge.ess(normal_draws[..., 0]) == pytest.approx(bridge.ess(normal_draws)[0], rel=1e-12)
    with pytest.raises(ValueError, match="chain, draw"):
        bridge.ess(normal_draws[0, :, 0])


@pytest.mark.skipif(not (_arviz0_installed() and _arviz1_installed()), reason="needs both ArviZ lines")
def test_both_lines_agree_where_they_compute_the_same_thing(monkeypatch, normal_draws):
    values = {}
    for line in (0, 1):
        monkeypatch.setenv(bridge.BACKEND_VARIABLE, str(line))
        values[line] = [
            bridge.ess(normal_draws),
            bridge.ess(normal_draws, "mean"),
            bridge.ess(normal_draws, "tail"),  # arviz_stats needs the tail's probability on arrays: 0.05, as 0.x
            bridge.rhat(normal_draws),
            bridge.mcse(normal_draws),
        ]
    for old, new in zip(values[0], values[1]):
        np.testing.assert_allclose(old, new, rtol=1e-10)


@pytest.mark.skipif(not _arviz0_installed(), reason="arviz<1 not installed")
def test_arviz0_mcse_sd_bug_does_not_reach_users(monkeypatch, normal_draws):
    """ArviZ 0.23's own mcse(method="sd") raises under NumPy 2.4 with numba; ours gives its numba-free value."""
    import arviz as az

    monkeypatch.setenv(bridge.BACKEND_VARIABLE, "0")
    x = normal_draws[..., 0]
    ours = bridge.mcse(x, method="sd")
    assert np.isfinite(ours)
    try:
        az.mcse(x, method="sd")
    except TypeError:  # the bug, where it is (ArviZ 0.23.4, numba installed, NumPy >= 2.4)
        pass
    was = az.Numba.numba_flag
    az.Numba.disable_numba()
    try:
        theirs = float(np.ravel(az.mcse(x, method="sd"))[0])
    finally:
        if was:
            az.Numba.enable_numba()
    assert ours == pytest.approx(theirs, rel=1e-12)
    assert bridge.mcse(np.ones((2, 3)), method="sd") != bridge.mcse(np.ones((2, 3)), method="sd")  # < 4 draws: NaN


def test_ecdf_band_holds_a_calibrated_sample_and_rejects_a_shifted_one(line):
    """The ECDF-difference plot of SBC ranks (0 … 99 uniform): the 1.x band is within 1 % of the 0.x band's counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import stats

    uniform = stats.randint(0, 100)
    ranks = uniform.rvs(500, random_state=np.random.default_rng(3))
    ax = bridge.plot_ecdf(ranks, eval_points=np.arange(100), cdf=uniform.cdf, rvs=uniform.rvs, ci_prob=0.99)
    assert ax.get_lines() or ax.collections
    plt.close(ax.figure)
    if line == 1:
        ecdf, cdf, lower, upper = bridge._ecdf_band(ranks, np.arange(100), uniform.cdf, 0.99, 1000, 0)
        assert np.all((lower <= ecdf) & (ecdf <= upper))
        shifted = np.clip(ranks + 15, 0, 99)
        ecdf, *_ = bridge._ecdf_band(shifted, np.arange(100), uniform.cdf, 0.99, 1000, 0)
        assert not np.all((lower <= ecdf) & (ecdf <= upper))
        if _arviz0_installed():
            from arviz.stats.ecdf_utils import ecdf_confidence_band

            lower0, upper0 = ecdf_confidence_band(500, np.arange(100), cdf, prob=0.99, method="optimized")
            np.testing.assert_allclose(lower, lower0, atol=0.01)
            np.testing.assert_allclose(upper, upper0, atol=0.01)


# ---------------------------------------------------------------------------------------------------- trees


def _result(warmup: bool, positions=None) -> SamplingResult:
    rng = np.random.default_rng(7)

    def info(draws):
        return {
            "accepted": rng.random((2, draws)) < 0.5,
            "statistic": rng.standard_normal((2, draws)).astype(np.float32),
            "data_used": rng.integers(0, 100, (2, draws)).astype(np.int32),
            "data_used_by_test": rng.integers(0, 100, (2, draws)).astype(np.int64),
            "used_full_data": rng.random((2, draws)) < 0.1,
            "non_finite": np.zeros((2, draws), bool),
            "proxy_acceptance": np.full((2, draws), np.nan, np.float32),
        }

    if positions is None:
        positions = {"mu": rng.standard_normal((2, 6)), "beta": rng.standard_normal((2, 6, 3)).astype(np.float32)}
    return SamplingResult(
        positions=positions,
        info=info(6),
        num_data=100,
        compile_seconds=0.5,
        sampling_seconds=1.25,
        final_state=None,
        test_name="minibatch_barker",
        proposal_name="random_walk",
        setup_data_used={"start check": 100},
        warmup_positions=(
            {"mu": rng.standard_normal((2, 4)), "beta": rng.standard_normal((2, 4, 3))} if warmup else None
        ),
        warmup_info=info(4) if warmup else None,
    )


RUN_ATTRS = {
    "test": "minibatch_barker",
    "proposal": "random_walk",
    "num_data": 100,
    "sampling_seconds": 1.25,
    "setup_data_passes": 1.0,
}


@pytest.mark.parametrize("warmup", [False, True], ids=["no_warmup", "warmup"])
def test_to_datatree_round_trips_through_netcdf(tmp_path, warmup):
    result = _result(warmup)
    tree = bridge.to_datatree(result)
    groups = ["posterior", "sample_stats"] + (["warmup_posterior", "warmup_sample_stats"] if warmup else [])
    assert sorted(tree.children) == sorted(groups)
    assert tree["posterior"]["beta"].dims == ("chain", "draw", "beta_dim_0")
    assert tree["sample_stats"]["accepted"].dims == ("chain", "draw")
    assert set(tree["sample_stats"].data_vars) == set(result.info)
    path = tmp_path / "run.nc"
    tree.to_netcdf(path, engine="h5netcdf")
    with xr.open_datatree(path, engine="h5netcdf") as back:
        assert sorted(back.children) == sorted(groups)
        for group in groups:
            source = (
                result.positions
                if group == "posterior"
                else result.info
                if group == "sample_stats"
                else result.warmup_positions
                if group == "warmup_posterior"
                else result.warmup_info
            )
            assert set(back[group].data_vars) == set(source)
            for name, value in source.items():
                read = back[group][name]
                assert read.dtype == np.asarray(value).dtype, (group, name, read.dtype)
                assert read.dims == tree[group][name].dims
                np.testing.assert_array_equal(read.values, value)
            assert back[group].attrs == tree[group].attrs
            np.testing.assert_array_equal(back[group]["chain"].values, [0, 1])
        assert dict(back.attrs) == RUN_ATTRS
        assert {key: back["posterior"].attrs[key] for key in RUN_ATTRS} == RUN_ATTRS
        assert back["posterior"].attrs["creation_library"] == "tallmcmc"


def test_to_datatree_names_variables_as_to_inference_data_always_did():
    rng = np.random.default_rng(0)
    bare = bridge.to_datatree(_result(False, positions=rng.standard_normal((2, 6, 3))))
    assert list(bare["posterior"].data_vars) == ["theta"]
    assert bare["posterior"]["theta"].dims == ("chain", "draw", "theta_dim_0")
    pair = bridge.to_datatree(_result(False, positions=(rng.standard_normal((2, 6)), rng.standard_normal((2, 6, 2)))))
    assert list(pair["posterior"].data_vars) == ["theta_0", "theta_1"]
    assert pair["posterior"]["theta_0"].dims == ("chain", "draw")


def test_inference_data_is_the_installed_lines_object(line):
    result = _result(True)
    data = bridge.inference_data(result)
    if line == 1:
        assert isinstance(data, xr.DataTree)
        assert sorted(data.children) == ["posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"]
        assert dict(data.attrs) == RUN_ATTRS
    else:
        import arviz as az

        assert isinstance(data, az.InferenceData)
        assert {"posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"} <= set(data._groups_all)
        assert data.attrs == RUN_ATTRS
        assert data.sample_stats["accepted"].dtype == bool
        np.testing.assert_array_equal(data.posterior["beta"].values, result.positions["beta"])


def test_a_saved_tree_opens_without_tallmcmc(tmp_path, line):
    """``arviz.from_netcdf`` (0.x) or ``arviz_base.convert_to_datatree`` (1.x) open what to_datatree wrote."""
    result = _result(True)
    path = tmp_path / "run.nc"
    bridge.to_datatree(result).to_netcdf(path, engine="h5netcdf")
    if line == 1:
        import arviz_base

        opened = arviz_base.convert_to_datatree(str(path))
        assert sorted(opened.children) == ["posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"]
        posterior, stats = opened["posterior"], opened["sample_stats"]
    else:
        import arviz as az

        opened = az.from_netcdf(str(path))
        assert opened.attrs == RUN_ATTRS
        posterior, stats = opened.posterior, opened.sample_stats
    np.testing.assert_array_equal(posterior["mu"].values, result.positions["mu"])
    assert stats["accepted"].dtype == bool
    assert bridge.ess(posterior["beta"].values).shape == (3,)
