"""The bias study runs end to end (tiny sizes), and its moment check passes exact draws and fails shifted ones."""

import json

import numpy as np
import pytest

from tallmcmc.cli import main
from tallmcmc.examples import student_t_location
from tallmcmc.reproduce import bias


def gaussian_reference(mean=0.3, sd=2.0):
    grid = np.linspace(mean - 12 * sd, mean + 12 * sd, 2001)
    return bias.Reference.from_log_density([grid], -0.5 * ((grid - mean) / sd) ** 2)


def test_reference_moments_and_draws_match_the_density():
    reference = gaussian_reference()
    assert reference.mean == pytest.approx([0.3], abs=1e-9)
    assert reference.variance == pytest.approx([4.0], rel=1e-9)
    assert reference.edge_mass < 1e-20
    draws = reference.draw(np.random.default_rng(0), 40_000)
    assert draws.shape == (40_000, 1)
    assert abs(draws.mean() - 0.3) < 4 * 2.0 / np.sqrt(40_000)
    assert abs(draws.var() - 4.0) < 4 * 4.0 * np.sqrt(2 / 40_000)


def test_moment_errors_pass_exact_draws_and_flag_a_shift_of_a_tenth_of_an_sd():
    reference = gaussian_reference()
    draws = np.random.default_rng(1).normal(0.3, 2.0, size=(4, 2500, 1))
    exact = bias.moment_errors(draws, reference)
    assert np.all(np.abs(exact["mean_z"]) < 4) and np.all(np.abs(exact["variance_z"]) < 4)
    assert exact["ess_bulk"][0] > 5_000
    shifted = bias.moment_errors(draws + 0.2, reference)  # 0.1 sd: 10 MCSE at ESS 10,000
    assert shifted["mean_z"][0] > 4
    assert shifted["mean_error_sds"][0] == pytest.approx(0.1, abs=0.03)
    widened = bias.moment_errors(0.3 + 1.1 * (draws - 0.3), reference)  # sd 10% too large
    assert widened["variance_z"][0] > 4 and widened["sd_ratio"][0] == pytest.approx(1.1, abs=0.02)


def test_student_t_reference_density_matches_the_model():
    data = student_t_location.simulate(500, seed=3)
    model = student_t_location.model(data)
    grid = np.array([0.9, 1.0, 1.1])
    from_model = np.array([float(model.log_density(np.array([t], np.float32))) for t in grid])
    from_numpy = student_t_location.log_posterior_grid(data, grid)
    assert np.diff(from_model) == pytest.approx(np.diff(from_numpy), rel=1e-4, abs=5e-3)


def test_bias_smoke(tmp_path):
    status = main(
        [
            "reproduce",
            "bias",
            "--quick",
            "--targets",
            "small",
            "--methods",
            "exact_metropolis",
            "minibatch_barker_printed",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    target = summary["targets"]["small"]
    assert list(target["methods"]) == ["exact_metropolis", "minibatch_barker_printed"]
    exact = target["methods"]["exact_metropolis"]
    assert exact["exact"] and exact["data_per_step"] == target["settings"]["num_data"]
    for stats in target["methods"].values():
        for field in ("ksd", "data_per_step", "ess_per_million_data", "max_abs_z", "acceptance_rate"):
            assert np.isfinite(stats[field]), field
        assert len(stats["mean_z"]) == 2 and len(stats["variance_z"]) == 2
    assert target["reference"]["iid_ksd"]["median"] > 0
    assert (tmp_path / "bias_ksd_vs_data.png").stat().st_size > 10_000
