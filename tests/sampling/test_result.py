"""A result's repr: a few lines a user can read (the draws' shape and variables, what made them, what they cost),
not the dataclass's dump of every array, the model's data and the state to resume from."""

from __future__ import annotations

import numpy as np

from tallmcmc.automatic import TallDiagnosis
from tallmcmc.sampling.result import SamplingResult


def result(positions, **fields) -> SamplingResult:
    chains, draws = np.shape(next(iter(positions.values())) if isinstance(positions, dict) else positions)[:2]
    info = {
        "accepted": np.arange(chains * draws).reshape(chains, draws) % 4 != 0,  # 3 of 4 accepted
        "data_used": np.full((chains, draws), 25, np.int32),
    }
    options = dict(
        num_data=1000,
        compile_seconds=2.5,
        sampling_seconds=0.125,
        final_state=None,
        test_name="minibatch_barker",
        proposal_name="random_walk",
        setup_data_used={"start check": 1000},
    )
    return SamplingResult(positions=positions, info=info, **{**options, **fields})


def test_the_repr_of_a_bare_array_run_is_a_few_lines_with_its_figures():
    shown = repr(result(np.zeros((4, 800, 10))))
    assert shown == (
        "SamplingResult: 4 chains × 800 draws of 10 parameters, N = 1,000\n"
        "  minibatch_barker test, random_walk proposal, vmap driver; acceptance 0.750\n"
        "  data per step 2.5% of N; setup 1 pass over N; sampling 0.125 s, compiling 2.5 s"
    )


def test_the_repr_names_a_dict_runs_variables_and_a_diagnosis_in_one_line():
    diagnosis = TallDiagnosis(
        "minibatch",
        "a long reason " * 100,
        setup_passes={"mode": 1.0, "control variate": 1.25},
        r_hat_max=1.0042,
        ess_bulk_min=1234.4,
        problems=["the sd's ESS is low"],
    )
    positions = {"beta": np.zeros((2, 5, 3)), "sigma": np.ones((2, 5))}
    shown = repr(result(positions, diagnosis=diagnosis))
    assert "2 chains × 5 draws of 4 parameters ('beta' (3,), 'sigma' ())" in shown
    assert shown.endswith(
        "diagnosis: TallDiagnosis(decision='minibatch', setup 2.25 passes, r̂ max 1.004, bulk ESS min 1234, "
        "1 problem(s), see str())"
    )
    assert len(shown) < 500 and "a long reason" not in shown  # str(diagnosis) has the reason
    assert "a long reason" in str(diagnosis)


def test_a_run_without_draws_and_an_inexact_one_say_so():
    empty = repr(result(np.zeros((2, 0, 3)), setup_data_used={}))
    assert "2 chains × 0 draws of 3 parameters" in empty and "acceptance" not in empty and "setup" not in empty
    assert "of 1 parameter, N" in repr(result(np.zeros((2, 4))))  # a scalar position
    assert "of 6 parameters (2, 3), N" in repr(result(np.zeros((2, 4, 2, 3))))
    inexact = repr(result(np.zeros((2, 4, 3)), inexact_proposal=True))
    assert "the draws do not target the posterior" in inexact
