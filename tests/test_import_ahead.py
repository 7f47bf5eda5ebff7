"""Importing the diagnosis's ArviZ in a thread while ``sample_tall`` works (``tallmcmc.import_ahead``).

The modules here are written to a temporary folder: each records the thread that ran its body, so a test can tell
an import made in the thread from one made by the caller.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

import tallmcmc
import tallmcmc.automatic
from tallmcmc import import_ahead
from tallmcmc.examples import logistic_regression
from tallmcmc.interop import arviz as arviz_bridge

RECORDING = textwrap.dedent(
    """
    import threading, time
    time.sleep({sleep})
    IMPORTED_IN = threading.current_thread().name
    {body}
    """
)


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """``write(name, sleep=0, body="")``: a module ``name`` in a folder on ``sys.path``, forgotten at the end."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def write(name, sleep=0.0, body=""):
        (tmp_path / f"{name}.py").write_text(RECORDING.format(sleep=sleep, body=body))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def test_the_module_is_imported_in_a_thread_after_the_first_ones_here(modules):
    library = modules("ahead_library", sleep=0.2)
    first = modules("ahead_first")
    importing = import_ahead.start(library, first=[first])
    assert sys.modules[first].IMPORTED_IN == "MainThread"  # before the thread started
    assert importing.thread is not None
    importing.wait()
    assert not importing.thread.is_alive()
    assert sys.modules[library].IMPORTED_IN == f"tallmcmc-import-{library}"


def test_an_import_that_fails_in_the_thread_raises_where_the_caller_imports(modules):
    broken = modules("ahead_broken", body="raise RuntimeError('broken on purpose')")
    importing = import_ahead.start(broken)
    importing.wait()  # the thread's failure is dropped there
    assert broken not in sys.modules
    with pytest.raises(RuntimeError, match="broken on purpose"):
        __import__(broken)


def test_nothing_runs_for_a_module_imported_absent_or_switched_off(modules, monkeypatch):
    assert import_ahead.start(None).thread is None
    assert import_ahead.start("numpy").thread is None  # imported already
    assert import_ahead.start("a_module_that_is_not_installed").thread is None
    monkeypatch.setenv(import_ahead.ENVIRONMENT_VARIABLE, "0")
    library = modules("ahead_switched_off")
    assert import_ahead.start(library).thread is None
    assert library not in sys.modules


@pytest.mark.filterwarnings("ignore:sample_tall:RuntimeWarning")  # 40 draws: r̂ may say run longer
def test_sample_tall_imports_the_diagnosis_module_ahead_and_waits_before_it_diagnoses(monkeypatch):
    """The run starts the import of the very module its diagnosis imports (SciPy's setup modules first), and waits
    for it before the diagnosis."""
    events = []
    started = []
    original_start, original_diagnose = import_ahead.start, tallmcmc.automatic.diagnose

    class Recorded(import_ahead.Importing):
        def wait(self):
            events.append("wait")
            super().wait()

    def start(name, first=()):
        started.append((name, tuple(first)))
        return Recorded(original_start(name, first).thread)

    def diagnose(*arguments, **options):
        events.append("diagnose")
        return original_diagnose(*arguments, **options)

    monkeypatch.setattr(import_ahead, "start", start)
    monkeypatch.setattr(tallmcmc.automatic, "diagnose", diagnose)
    model = logistic_regression.model(*logistic_regression.simulate(20_000, 3, seed=5))
    result = tallmcmc.sample_tall(model, num_samples=40, num_chains=2, num_warmup=40, progress=False)
    assert started == [(arviz_bridge.diagnostics_module(), ("scipy.special", "scipy.optimize"))]
    assert events[:2] == ["wait", "diagnose"]
    assert np.isfinite(result.diagnosis.r_hat_max)
