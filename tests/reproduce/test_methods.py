"""The one registry of the tests the reproductions compare."""

import argparse

import pytest

import tallmcmc
from tallmcmc.reproduce import _methods, gmm, stein_austerity, stein_samplers, worst_case
from tallmcmc.reproduce._methods import METHODS, MethodSettings


def test_keys_are_the_public_factories_and_display_names_are_distinct():
    assert list(METHODS) == [
        "minibatch_barker",
        "austere",
        "austere_conservative",
        "confidence_sampler",
        "exact_metropolis",
        "exact_barker",
    ]
    assert len({m.display_name for m in METHODS.values()}) == len(METHODS)
    assert _methods.display_name("confidence_sampler") == "MHSubLhd"
    assert _methods.display_name("austere_conservative") == "AustereMH(c)"
    assert _methods.display_name("minibatch_barker") == "MHminibatch"
    for key, method in METHODS.items():
        assert method.key == key and callable(getattr(tallmcmc, key))
        test = method.build(MethodSettings(num_data=10_000))
        assert isinstance(test, tallmcmc.AcceptanceTest)
        assert test.name.split("(")[0] == key


def test_settings_reach_the_factories():
    assert _methods.build("austere", MethodSettings(batch_size=7, austere_epsilon=0.1)).name == "austere"
    settings = MethodSettings(austere_error_bound=0.05, num_data=10_000)
    assert _methods.build("austere_conservative", settings).name == (
        tallmcmc.austere_conservative(error_bound=0.05, num_data=10_000).name
    )


def test_experiments_use_registry_keys():
    for keys in (gmm.METHOD_KEYS, worst_case.METHOD_KEYS, stein_samplers.METHOD_KEYS):
        assert set(keys) <= set(METHODS)
    assert set(gmm.PAPER_TABLE_1) <= set(gmm.METHOD_KEYS) and set(gmm.PAPER_TABLE_4) <= set(gmm.METHOD_KEYS)
    assert stein_austerity.method_key(0.0) == "exact_metropolis" and stein_austerity.method_key(0.1) == "austere"


def test_unknown_keys_raise_naming_the_argument():
    with pytest.raises(ValueError, match="method must be one of"):
        _methods.method("minibatch")
    with pytest.raises(ValueError, match="--methods"):
        _methods.selected(["minibatch_barker", "confidence"], ("minibatch_barker", "confidence_sampler"))
    with pytest.raises(ValueError, match="--methods"):
        _methods.selected([], ("minibatch_barker",))
    assert _methods.selected(None, ("a", "b")) == ["a", "b"]
    assert _methods.selected(["b", "a", "b"], ("a", "b")) == ["b", "a"]
    with pytest.raises(ValueError, match="method must be one of"):
        _methods.add_methods_argument(argparse.ArgumentParser(), ["minibatch"])


def test_methods_option_accepts_only_canonical_keys(capsys):
    parser = argparse.ArgumentParser()
    _methods.add_methods_argument(parser, gmm.METHOD_KEYS)
    assert parser.parse_args(["--methods", "confidence_sampler", "exact_barker"]).methods == [
        "confidence_sampler",
        "exact_barker",
    ]
    assert parser.parse_args([]).methods is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--methods", "confidence"])
    assert "invalid choice: 'confidence'" in capsys.readouterr().err
