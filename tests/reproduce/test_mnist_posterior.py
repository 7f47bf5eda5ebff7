"""The untempered MNIST posterior comparison runs end to end on a few hundred points and writes what it promises."""

import json

import numpy as np
import pytest

from tallmcmc.cli import main
from tallmcmc.reproduce import experiments, mnist_posterior


def test_registered():
    assert experiments()["mnist-posterior"] is mnist_posterior


def test_pca_features_are_standardised_with_intercept():
    rng = np.random.default_rng(0)
    x_train, x_test = rng.random((200, 30)), rng.random((20, 30))
    a_train, a_test, info = mnist_posterior.features("pca50", x_train, x_test, components=5)
    assert a_train.shape == (200, 6) and a_test.shape == (20, 6) and a_train.dtype == np.float32
    np.testing.assert_allclose(a_train[:, 0], 1.0)
    np.testing.assert_allclose(a_train[:, 1:].mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(a_train[:, 1:].std(0, ddof=1), 1.0, rtol=1e-4)
    assert 0 < info["explained_variance"] < 1
    raw_train, _, _ = mnist_posterior.features("raw", x_train, x_test)
    assert raw_train.shape == (200, 30)


def test_predictive_of_a_point_mass():
    x = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    y = np.array([1.0, 0.0], np.float32)
    draws = np.tile(np.array([2.0, -2.0]), (1, 3, 1))  # (chain, draw, d), all at β = (2, −2)
    accuracy, log_loss = mnist_posterior.predictive(draws, x, y, max_draws=10)
    assert accuracy == 1.0
    np.testing.assert_allclose(log_loss, np.log1p(np.exp(-2.0)), rtol=1e-5)


def _run(tmp_path, *extra):
    status = main(
        [
            "reproduce",
            "mnist-posterior",
            "--num-train",
            "300",
            "--num-test",
            "100",
            "--components",
            "4",
            "--draws",
            "30",
            "--draws-rw",
            "30",
            "--chains",
            "2",
            "--residual-pairs",
            "3",
            "--predictive-draws",
            "20",
            "--methods",
            "exact-rw",
            "cv-hmc",
            "--no-progress",
            "--out",
            str(tmp_path / "out"),
            *extra,
        ]
    )
    assert status == 0
    return json.loads((tmp_path / "out" / "summary.json").read_text())


def _check_rows(summary, keys):
    assert [row["key"] for row in summary["methods"]] == keys
    for row in summary["methods"]:
        assert 0.0 <= row["accuracy"] <= 1.0
        assert np.isfinite(row["log_loss"]) and row["log_loss"] > 0
        assert row["per_step"] > 0 and row["all_per_step"] >= row["per_step"]
        assert row["ess_per_s"] >= 0  # 0 when a chain never moved
    assert summary["methods"][keys.index("exact-rw")]["per_step"] == 300  # the exact test touches all N


def test_smoke_without_reference(tmp_path):
    summary = _run(tmp_path, "--skip-nuts")
    assert summary["dimension"] == 5
    _check_rows(summary, ["exact-rw", "cv-hmc"])
    assert "reference" not in summary
    assert set(summary["residual_spread"]) == {"order2/rw", "order2/indep", "order1/rw", "order1/indep"}


# slow (13 s, suite time): test_smoke_without_reference stays in the default suite)
@pytest.mark.slow
def test_smoke_with_nuts_reference(tmp_path):
    pytest.importorskip("numpyro")
    cache = tmp_path / "cache"
    summary = _run(tmp_path, "--nuts-draws", "40", "--nuts-warmup", "40", "--cache-dir", str(cache))
    _check_rows(summary, ["nuts", "exact-rw", "cv-hmc"])
    assert len(list(cache.glob("nuts-*.npz"))) == 1
    nuts = summary["methods"][0]
    assert nuts["err_sd_max"] < 1e-4 and not nuts["cached"]
    assert nuts["per_step"] >= 300  # at least one full-data gradient per draw
    for row in summary["methods"][1:]:
        assert np.isfinite(row["err_sd_max"]) and row["err_sd_max"] >= row["err_sd_median"]
    again = _run(tmp_path, "--nuts-draws", "40", "--nuts-warmup", "40", "--cache-dir", str(cache))
    assert again["methods"][0]["cached"]
