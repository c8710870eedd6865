"""Closed-loop payload identification in simulated time (pure math, no ROS).

The plant carries a 2.5 kg payload with its centre of mass 5 cm off the flange axis; the
computed-torque controller's model has none. The controller tracks an exciting trajectory
and feeds the estimator what it measures and applies; the estimate must be within 2 % in
mass and 5 mm in centre of mass, and a [LEE]-style move tracked with it applied must have
at least 10x less maximum error than without.
"""

import warnings

import numpy as np
import pytest

from robot_dynamics import simulation
from robot_dynamics.identification import identify_in_closed_loop
from robot_dynamics.model import ModelWarning, RobotModel
from test_examples import load_example

# the set-up of examples/payload_identification.py, whose figures the doc page shows:
# 100 Hz, Kp = 100, Kd = 20, RK4 at 2 ms, the payloads and moves per preset
scenario = load_example('payload_identification')
PAYLOADS, MOVES, load = scenario.PAYLOADS, scenario.MOVES, scenario.load
EXCITATION = 20.0           # s of exciting trajectory


def identify(plant, model, reference, q0, duration, **noise):
    """The estimate and the run of computed torque with `model` on `plant`."""
    estimate, run, _ = identify_in_closed_loop(
        plant, model, reference, duration, q0, scenario.KP, scenario.KD,
        scenario.CONTROL_PERIOD, scenario.PLANT_STEP, **noise)
    return estimate, run


def excite(plant, model, **noise):
    """The estimate after the default exciting trajectory."""
    trajectory = scenario.excitation(model, EXCITATION)
    estimate, _, _ = scenario.identify(plant, model, trajectory, EXCITATION, **noise)
    return estimate


def move_error(plant, model, name):
    """Max tracking error of the quintic move (2 s + 0.5 s settling) with controller `model`."""
    return float(np.max(np.abs(scenario.move(plant, model, name).error)))


@pytest.fixture(scope='module', params=['puma560', 'panda'])
def identified(request):
    """(name, model, plant, estimate) of one excitation run per preset."""
    name = request.param
    model = load(name)
    plant = model.with_payload(**PAYLOADS[name])
    return name, model, plant, excite(plant, model)


def test_excitation_identifies_mass_within_2_percent_and_com_within_5_mm(identified):
    name, _, _, estimate = identified
    payload = PAYLOADS[name]
    assert estimate.usable, estimate.reason
    assert estimate.reason == ''
    assert abs(estimate.mass - payload['mass']) <= 0.02 * payload['mass']
    assert np.linalg.norm(estimate.com - np.asarray(payload['com'])) <= 5e-3


def test_estimate_applied_makes_the_move_track_10x_better(identified):
    name, model, plant, estimate = identified
    without = move_error(plant, model, name)
    applied = model.with_payload(**estimate.payload)
    with_estimate = move_error(plant, applied, name)
    assert with_estimate * 10.0 <= without, (with_estimate, without)
    # what is left is the sampled loop's own error with the heavier wrist, not the estimate's
    assert with_estimate <= 1.1 * move_error(plant, plant, name)


def test_holding_still_is_reported_not_excited():
    """A controller that knows the payload holds the arm still: the data then determine
    the gravity terms only, and the estimator says so (with encoder-like noise)."""
    model = load('panda')
    plant = model.with_payload(**PAYLOADS['panda'])
    start = MOVES['panda'][0]
    estimate, run = identify(plant, plant, simulation.hold(start), start, 8.0,
                             sigma_q=1e-4, sigma_qd=1e-3)
    assert np.max(np.abs(run.error)) < 1e-3                     # it did hold still
    assert estimate.samples >= 100 * model.n
    assert not estimate.excited
    assert 'condition number' in estimate.reason
    assert estimate.condition_number > 300.0


def test_measurement_noise_degrades_the_estimate_gracefully():
    """Gaussian noise on q and q̇ (σ_q = 1e-3 rad, 2.3 steps of [LEE] §5's 12-bit A/D
    converter, σ_q̇ = 0.02 rad/s): still within the 2 % / 5 mm bounds, with the error
    inside 5 reported standard deviations."""
    name = 'puma560'
    model = load(name)
    payload = PAYLOADS[name]
    plant = model.with_payload(**payload)
    estimate = excite(plant, model, sigma_q=1e-3, sigma_qd=2e-2)
    assert estimate.usable, estimate.reason
    mass_error = abs(estimate.mass - payload['mass'])
    assert mass_error <= 0.02 * payload['mass']
    assert mass_error <= 5.0 * estimate.mass_std
    assert np.linalg.norm(estimate.com - np.asarray(payload['com'])) <= 5e-3


def test_drive_model_with_coulomb_friction_is_identified_too():
    """The PUMA 560 with its drives (Corke's rotor inertia, viscous and Coulomb friction
    reflected to the joints, the commented block of config/puma560.yaml) in plant and
    model: reversing and sticking joints do not bias the estimate."""
    params = load('puma560').to_params()
    params.update(armature=[0.784, 2.3248, 0.5769, 0.1908, 0.1707, 0.1941],
                  viscous_friction=[5.8018, 9.4969, 3.9804, 0.4116, 0.4273, 0.2158],
                  coulomb_friction=[25.9836, 10.6198, 6.3642, 1.0683, 0.8544, 0.5544])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        model = RobotModel.from_params(params)
    payload = PAYLOADS['puma560']
    plant = model.with_payload(**payload)
    estimate = excite(plant, model)
    assert estimate.usable, estimate.reason
    assert abs(estimate.mass - payload['mass']) <= 0.02 * payload['mass']
    assert np.linalg.norm(estimate.com - np.asarray(payload['com'])) <= 5e-3
