"""The neural-network reproduction (Chen et al. 2016) runs end to end at --quick size and writes what it promises."""

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tallmcmc
from tallmcmc.cli import main
from tallmcmc.reproduce import nn


def test_nn_quick_smoke(tmp_path):
    status = main(["reproduce", "nn", "--quick", "--no-progress", "--out", str(tmp_path)])
    assert status == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    settings = summary["settings"]
    assert settings["quick"] and settings["num_train"] == nn.QUICK["num_train"]
    assert settings["widths"] == [36, 8, 8, 1] and settings["dimension"] == 36 * 8 + 8 + 8 * 8 + 8 + 8 + 1
    assert settings["left_out"] == ["dropout", "batch normalisation"]
    assert list(summary["methods"]) == list(nn.METHOD_KEYS)
    for key, stats in summary["methods"].items():
        assert stats["steps"] > 0 and stats["passes"] >= nn.QUICK["passes"], key
        assert stats["wall_seconds"] > 0, key
        for field in ("train_log_likelihood", "test_log_likelihood", "train_accuracy", "test_accuracy"):
            assert np.isfinite(stats["final"][field]), (key, field)
        assert 0.0 <= stats["final"]["test_accuracy"] <= 1.0
        assert stats["final"]["test_log_likelihood"] < 0
        curve = summary["curves"][key]
        assert curve["passes"][0] == 0 and curve["steps"][0] == 0  # the common start
        assert np.all(np.diff(curve["passes"]) > 0) and curve["passes"][-1] == pytest.approx(stats["passes"])
    methods = summary["methods"]
    # SGHMC has no proposal ratio: under the minibatch test the run says its target is not the posterior
    assert methods["sghmc_test"]["inexact_proposal"] is True
    assert methods["sghmc"]["inexact_proposal"] is False and methods["hamiltonian_test"]["inexact_proposal"] is False
    assert any("allow_inexact_proposal" in message for message in methods["sghmc_test"]["warnings"])
    # SGHMC alone reads m points a step; under the test at least 2m; the exact test reads all N every step
    m, n = settings["batch_size"], settings["num_train"]
    assert methods["sghmc"]["steps"] * m / n == pytest.approx(methods["sghmc"]["passes"])
    assert methods["sghmc"]["acceptance_rate"] == 1.0
    assert methods["sghmc_test"]["mean_test_data_per_step"] >= m
    assert methods["hamiltonian_exact"]["mean_test_data_per_step"] == n
    for key in nn.TESTED:
        assert 0.0 < methods[key]["acceptance_rate"] <= 1.0
    assert {claim["claim"] for claim in summary["claims"]} == {
        "test_beats_adagrad",
        "both_beat_adagrad",
        "test_improves_on_sghmc_alone",
        "acceptance_high",
        "exact_alternative_vs_sghmc_test",
    }
    claims = {claim["claim"]: claim for claim in summary["claims"]}
    assert all(claim["holds"] is None or isinstance(claim["holds"], bool) for claim in claims.values())
    assert isinstance(claims["test_beats_adagrad"]["holds"], bool)  # every method evaluated by the common passes
    assert claims["acceptance_high"]["ours"]["acceptance_rate"] == methods["sghmc_test"]["acceptance_rate"]
    assert all(stats.get("at_temperature_1") is None for stats in methods.values())  # --quick: no K = 1 probe
    assert set(summary["paper"]["claims"]) == set(nn.PAPER_CLAIMS)
    assert summary["references"]["constant_prediction"]["test_accuracy"] > 0.5
    for name in ("nn_log_likelihood.png", "nn_accuracy.png", "nn_acceptance.png"):
        assert (tmp_path / name).stat().st_size > 5_000, name


def test_schedules():
    steps = np.array([0, 1, 3, 10**6 - 1, 10**7])
    assert nn.temperatures(steps, 1000.0, 0.5) == pytest.approx([1000.0, 1000 / np.sqrt(2), 500.0, 1.0, 1.0])
    assert nn.step_factors(np.array([0, 1]), 0.4) == pytest.approx([1.0, 2**-0.4])


def _args(**changes):
    parser = argparse.ArgumentParser()
    nn.add_arguments(parser)
    args = parser.parse_args([])
    for name, value in changes.items():
        setattr(args, name, value)
    return args


def test_step_scales():
    """SGHMC's η on the ∇log π_K scale is the paper's learning rate × K_i / N; the Hamiltonian ε is its root."""
    args, num_data = _args(), 100_000
    steps = np.array([0, 99])
    proposal, test, factor, inexact = nn.sampler_for("sghmc_test", args, num_data)
    assert inexact and "minibatch_barker" in test.name
    assert f"step_size={0.01 * 1000 / num_data:g}" in proposal.name
    assert factor(steps) == pytest.approx([1.0, 100**-0.4 * 100 / 1000])
    proposal, test, factor, inexact = nn.sampler_for("hamiltonian_test", args, num_data)
    assert not inexact and f"step_size={np.sqrt(0.01 * 1000 / num_data):g}" in proposal.name
    assert factor(steps) == pytest.approx(np.sqrt([1.0, 100**-0.4 * 100 / 1000]))
    proposal, _, factor, _ = nn.sampler_for("sghmc", _args(sghmc_rescale="adagrad"), num_data)
    assert "step_size=0.01," in proposal.name and "adagrad" in proposal.name
    assert factor(steps) == pytest.approx([1.0, 100**-0.4])


def test_network_and_model():
    params = nn.init_params(jax.random.key(0), (36, 32, 32, 1))
    assert sum(leaf.size for leaf in jax.tree_util.tree_leaves(params)) == 2273
    x = jnp.ones((5, 36), jnp.float32)
    y = jnp.array([0, 1, 0, 1, 1], jnp.float32)
    model = nn.build_model(x, y, params, 1.0, 10.0)
    per_datum = model.per_datum_log_likelihood(params)
    assert per_datum.shape == (5,)
    z = nn.logits(params, x)
    assert per_datum == pytest.approx(np.where(y > 0.5, jax.nn.log_sigmoid(z), jax.nn.log_sigmoid(-z)), rel=1e-5)
    assert nn.gaussian_log_prior(2.0)(params) == pytest.approx(
        -0.5 * sum(float(jnp.sum(leaf**2)) for leaf in jax.tree_util.tree_leaves(params)) / 4.0, rel=1e-5
    )


def test_bad_input_names_the_argument(tmp_path):
    x = np.random.default_rng(0).normal(size=(300, 36)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    params = nn.init_params(jax.random.key(0), (36, 4, 4, 1))

    # a network whose per-datum log-likelihood is the 2-class log-softmax vector instead of the label's entry
    def both_classes(theta, row):
        z = nn.logits(theta, row["x"])
        return jnp.stack([jax.nn.log_sigmoid(-z), jax.nn.log_sigmoid(z)])

    vector = tallmcmc.Model(both_classes, nn.gaussian_log_prior(1.0), {"x": x, "y": y}, 1.0)
    with pytest.raises(ValueError, match="log_likelihood"):
        tallmcmc.sample(
            vector,
            tallmcmc.sghmc(1e-4, 0.1, 50),
            tallmcmc.always_accept(),
            params,
            num_samples=2,
            progress=False,
            check_starts=False,
        )
    model = nn.build_model(x, y, params, 1.0, 1.0)
    with pytest.raises(ValueError, match="temperature_schedule"):
        tallmcmc.sample(
            model,
            tallmcmc.sghmc(1e-4, 0.1, 50),
            tallmcmc.always_accept(),
            params,
            num_samples=10,
            temperature_schedule=np.ones(5),
            progress=False,
            check_starts=False,
        )
    with pytest.raises(ValueError, match="batch_size"):
        main(["reproduce", "nn", "--quick", "--batch-size", "5000", "--no-progress", "--out", str(tmp_path)])


def test_claims_at_equal_passes():
    def curve(passes, values):
        return {"passes": np.asarray(passes, float), "test_log_likelihood": np.asarray(values, float)}

    curves = {
        "sghmc_test": curve([1, 2], [-0.60, -0.52]),
        "sghmc": curve([1, 3], [-0.58, -0.50]),
        "adagrad": curve([1, 3], [-0.57, -0.55]),
    }
    stats = {"sghmc_test": {"acceptance_rate": 0.5, "acceptance_rate_second_half": 0.49}}
    claims = {c["claim"]: c for c in nn.claims_of(curves, stats)}
    beats = claims["test_beats_adagrad"]
    assert beats["passes"] == 2 and beats["ours"]["adagrad"] == pytest.approx(-0.56) and beats["holds"]
    alone = claims["test_improves_on_sghmc_alone"]
    assert alone["ours"]["difference"] == pytest.approx(-0.52 + 0.54) and alone["holds"]
    assert claims["both_beat_adagrad"]["holds"] and not claims["acceptance_high"]["holds"]
    # a method first evaluated beyond the common pass count (a segment that overran its budget) is not comparable
    curves["sghmc_test"] = curve([0, 30], [-0.69, -0.54])
    claims = {c["claim"]: c for c in nn.claims_of(curves, stats)}
    assert claims["test_beats_adagrad"]["passes"] == 3 and claims["test_beats_adagrad"]["holds"] is None


# slow (13 s, suite time): the --quick smoke run stays in the default suite)
@pytest.mark.slow
def test_probe_at_temperature_1(tmp_path):
    """After a tested run, steps at K = 1 (not counted in its passes) measure what the test reads there."""
    status = main(
        [
            "reproduce",
            "nn",
            "--quick",
            "--methods",
            "hamiltonian_test",
            "--probe-steps",
            "3",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    stats = json.loads((tmp_path / "summary.json").read_text())["methods"]["hamiltonian_test"]
    probe = stats["at_temperature_1"]
    assert probe["temperature"] == 1.0 and probe["schedule_step"] == 10**6 - 1
    assert probe["steps"] == stats["segment_length"]  # one segment of the run's length (its compiled step reused)
    assert probe["mean_test_data_per_step"] >= 200 and 0.0 <= probe["acceptance_rate"] <= 1.0
    assert probe["step_size_factor"] == pytest.approx(np.sqrt((10**6) ** -0.4 * 1 / 1000))
