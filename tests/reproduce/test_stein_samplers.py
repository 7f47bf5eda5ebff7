"""The three Stein reproductions run end to end at tiny sizes and write what they promise."""

import json

import numpy as np

from tallmcmc.cli import main
from tallmcmc.reproduce import stein_austerity, stein_samplers, stein_sgld


def _summary(path):
    return json.loads((path / "summary.json").read_text())


def test_stein_sgld_smoke(tmp_path):
    status = main(
        [
            "reproduce",
            "stein-sgld",
            "--sequences",
            "2",
            "--length",
            "60",
            "--step-sizes",
            "1e-2",
            "1e-4",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    summary = _summary(tmp_path)
    assert summary["selected"]["stein"] in (1e-2, 1e-4) and summary["selected"]["ess"] in (1e-2, 1e-4)
    assert summary["paper_selected"] == {"ess": 5e-2, "stein": 5e-3}
    for values in summary["discrepancy"].values():
        assert len(values) == 2 and all(np.isfinite(values)) and min(values) > 0
    assert (tmp_path / "figure3_sgld_step_size.png").stat().st_size > 10_000


def test_stein_sgld_paper_grid():
    assert stein_sgld.PAPER_STEP_SIZES == (5e-2, 1e-2, 5e-3, 1e-3, 5e-4, 1e-4, 5e-5, 1e-5)


def test_stein_austerity_smoke(tmp_path):
    status = main(
        [
            "reproduce",
            "stein-austerity",
            "--epsilons",
            "0",
            "0.1",
            "--budget",
            "3000",
            "--burn-in",
            "300",
            "--length",
            "40",
            "--prefixes",
            "10",
            "40",
            "--surrogate-draws",
            "400",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    chains = _summary(tmp_path)["chains"]
    assert set(chains) == {"0", "0.1"}
    exact, approximate = chains["0"][0], chains["0.1"][0]
    assert exact["evaluations_per_step"] == 53  # the exact test evaluates θ′ on all N points
    assert 2 <= approximate["evaluations_per_step"] < 53
    for chain in (exact, approximate):
        assert chain["prefixes"] == [10, 40]
        assert all(300 <= e <= 3000 for e in chain["prefix_evaluations"])
        assert all(np.isfinite(chain["discrepancy"]))
        assert len(chain["mean_error"]) == 2 and all(0 <= e < 10 for e in chain["second_moment_error"])
    assert (tmp_path / "figure4_austerity_tradeoff.png").stat().st_size > 5_000


def test_austerity_thinning_follows_the_authors_rule():
    positions = np.arange(20.0)[:, None]
    evaluations = np.arange(1, 21) * 10
    points, spent = stein_austerity.thin(positions, evaluations, burn_in=55, length=4)
    assert spent[0] >= 55 and spent[-1] == 200 and points.shape == (4, 1)


def test_stein_samplers_smoke(tmp_path):
    status = main(
        [
            "reproduce",
            "stein-samplers",
            "--num-data",
            "2000",
            "--samples",
            "60",
            "--lengths",
            "3",
            "--shortest",
            "20",
            "--max-graph-points",
            "30",
            "--chains",
            "2",
            "--methods",
            "minibatch_barker",
            "exact_barker",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    methods = _summary(tmp_path)["methods"]
    assert set(methods) == {"minibatch_barker", "exact_barker"}
    assert methods["exact_barker"]["display_name"] == "full-data Barker"
    touched = methods["exact_barker"]["touched_at"]
    assert touched[-1] == 60 * 2000  # the full-data test touches all N points each step
    assert methods["minibatch_barker"]["touched_at"][-1] < touched[-1]
    for value in methods.values():
        assert all(np.isfinite(value["kernel"][0])) and all(np.isfinite(value["graph"][0]))
    assert (tmp_path / "stein_samplers.png").stat().st_size > 5_000


def test_chain_lengths_are_log_spaced_and_end_at_the_chain():
    lengths = stein_samplers.chain_lengths(5000, 10, 50)
    assert lengths[0] == 50 and lengths[-1] == 5000 and np.all(np.diff(lengths) > 0)
