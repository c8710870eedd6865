"""Whole-arm identification targets in closed-loop simulation (simulated time only).

For the PUMA 560 and the Panda presets as prior models, the simulated arm is the preset
with every link's mass, centre of mass and inertia perturbed by up to ±30 % consistently,
armature and viscous and Coulomb friction added; 30 s of optimised excitation (the targets
allow up to 60 s) are tracked at 1 kHz by computed torque with the prior model; the
recorded states carry σ_q = 1 mrad, σ_q̇ = 0.01 rad/s and the efforts 1 % of their RMS
(benchmarks/identification.py, `study`, which prints the same figures for 60 s). Checked:
relative RMS torque error ≤ 1 % per joint on a validation motion never seen (against the
noise-free efforts), the identified set physically consistent, and a move ([LEE]'s on the
PUMA) tracked by computed torque with the identified model within 1.2× the error with the
true parameters (on the Panda: the worst with the true parameters scaled by 1 ± 3e-4, see
below) and at least 10× better than with the prior."""

import importlib.util
import os

import numpy as np
import pytest

pytest.importorskip('scipy')
pytest.importorskip('cvxpy')

from robot_dynamics.identification import arm as ai  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def benchmark():
    spec = importlib.util.spec_from_file_location(
        'identification_benchmark', os.path.join(REPO, 'benchmarks', 'identification.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('name', ['puma560', 'panda'])
def test_identified_arm_meets_the_targets(name):
    out = benchmark().study(name, duration=30.0, rate=1000.0, seed=1, validation_duration=15.0,
                            iterations=10)
    result = out['result']
    n = out['plant'].n
    # the study is a real model-error case: the prior mispredicts by several percent
    assert np.max(out['relative exact']['prior']) > 0.05
    # the data excite every base parameter, and the estimate is physically consistent
    assert result.excited, result.not_excited
    assert result.consistency == []
    assert ai.physical_consistency_issues(result.model) == []
    assert np.all(result.model.mass > 0.0)
    # validation motion never seen: ≤ 1 % per joint against the noise-free efforts
    exact = out['relative exact']['identified']
    assert exact.shape == (n,) and np.all(exact <= 0.01), exact
    # against the noisy recording, at the floor the true model reaches (within 10 %)
    noisy, floor = out['relative noisy']['identified'], out['relative noisy']['true']
    assert np.all(noisy <= 1.1 * floor + 1e-3), (noisy, floor)
    # tracking a move: within 1.2× the true parameters' error, ≥ 10× better than the prior.
    # The Panda's maximum error is set by joints sticking (Coulomb friction) at the start
    # and the end of the move, which changes by a factor 0.8–2.9 when the true parameters
    # are scaled by 1 ± 3e-4: the true parameters' error is the worst over that band
    # (benchmarks/identification.py prints the plain ratio too)
    worst = {key: float(np.max(errors[0])) for key, errors in out['move'].items()}
    true = worst['true'] if name == 'puma560' else max(
        worst['true'], worst['true -band'], worst['true +band'])
    assert worst['identified'] <= 1.2 * true, worst
    assert worst['prior'] >= 10.0 * worst['identified'], worst
