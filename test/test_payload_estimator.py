"""PayloadEstimator, physical_consistency and exciting_trajectory on their own (no loop)."""

import math
import os
import warnings

import numpy as np
import pytest

from conftest import REPO
from robot_dynamics import dynamics
from robot_dynamics.identification import (ExcitationWarning, PayloadEstimator,
                                           exciting_trajectory, payload_parameters,
                                           payload_regressor, physical_consistency)
from robot_dynamics.model import ModelWarning, RobotModel

PAYLOAD = dict(mass=1.5, com=(0.02, -0.03, 0.08), inertia=[6e-3, 1e-4, 0.0, 5e-3, 0.0, 3e-3])


def load(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', name + '.yaml'))


def zero_order_hold_samples(plant, t, tau_of_state, q0, substeps=10):
    """Samples (t_k, q_k, q̇_k, τ_k) of an open-loop plant driven by a held effort,
    integrated exactly enough (RK4, `substeps` per period) to test the estimator alone."""
    from robot_dynamics.simulation.integration import rk4_step
    q, qd = np.array(q0, dtype=float), np.zeros(plant.n)
    out = []
    for k in range(len(t) - 1):
        tau = tau_of_state(k, q, qd)
        out.append((t[k], q.copy(), qd.copy(), tau))
        h = (t[k + 1] - t[k]) / substeps
        for _ in range(substeps):
            q, qd = rk4_step(plant, q, qd, tau, h)
    return out


@pytest.fixture(scope='module')
def puma_samples():
    """The PUMA 560 with a payload, driven by the efforts that would make the model
    *with* the payload follow an exciting trajectory (inverse dynamics plus a PD term)."""
    model = load('puma560')
    plant = model.with_payload(**PAYLOAD)
    t, q, qd, qdd = exciting_trajectory(model, 10.0)

    def tau(k, q_now, qd_now):
        servo = qdd[k] + 20.0 * (qd[k] - qd_now) + 100.0 * (q[k] - q_now)
        return dynamics.inverse_dynamics(plant, q_now, qd_now, servo)
    return model, zero_order_hold_samples(plant, t, tau, q[0], substeps=4)


def feed(estimator, samples):
    for sample in samples:
        estimator.add(*sample)
    return estimator.estimate()


def test_estimator_recovers_every_parameter_from_held_efforts(puma_samples):
    model, samples = puma_samples
    estimate = feed(PayloadEstimator(model), samples)
    assert estimate.usable, estimate.reason
    expected = payload_parameters(**PAYLOAD)
    scale = np.array([1.0, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01])
    assert np.max(np.abs(estimate.parameters - expected) / scale) < 1e-2
    assert estimate.mass == pytest.approx(PAYLOAD['mass'], rel=1e-3)
    np.testing.assert_allclose(estimate.com, PAYLOAD['com'], atol=2e-4)
    applied = model.with_payload(**estimate.payload)
    assert applied.payload.mass == estimate.mass
    assert estimate.samples == estimate.samples // model.n * model.n > 100
    assert np.all(estimate.parameters_std > 0.0) and estimate.mass_std > 0.0
    assert 1.0 <= estimate.condition_number < 300.0


def test_estimate_does_not_depend_on_the_block_size(puma_samples):
    """The per-block vectorisation is an implementation detail: same rows, same sums."""
    model, samples = puma_samples
    one = feed(PayloadEstimator(model, block=1), samples[:400])
    many = feed(PayloadEstimator(model, block=37), samples[:400])
    np.testing.assert_allclose(one.parameters, many.parameters, rtol=1e-9, atol=1e-12)
    assert one.samples == many.samples
    deferred = PayloadEstimator(model, block=0)      # add only appends; update() processes
    for sample in samples[:150]:
        deferred.add(*sample)
    assert deferred.samples == 0
    deferred.update()
    assert deferred.samples > 0
    for sample in samples[150:400]:
        deferred.add(*sample)
    np.testing.assert_allclose(deferred.estimate().parameters, one.parameters, rtol=1e-9,
                               atol=1e-12)


def test_existing_payload_of_the_model_is_replaced_not_added(puma_samples):
    """τ_0 is the model without payload: a model that already carries a (wrong) payload
    gives the same estimate of the whole payload."""
    model, samples = puma_samples
    guessed = model.with_payload(mass=5.0, com=(0.0, 0.0, 0.2))
    a = feed(PayloadEstimator(model), samples[:500])
    b = feed(PayloadEstimator(guessed), samples[:500])
    np.testing.assert_allclose(a.parameters, b.parameters, rtol=1e-9, atol=1e-12)


def test_too_few_samples_are_not_excited_and_reset_forgets(puma_samples):
    model, samples = puma_samples
    estimator = PayloadEstimator(model)
    empty = estimator.estimate()
    assert not empty.excited and not empty.usable and 'samples' in empty.reason
    assert math.isnan(empty.mass)
    feed(estimator, samples[:200])              # 2 s: fewer rows than min_samples
    short = estimator.estimate()
    assert not short.excited and 'need at least 100' in short.reason
    estimator.reset()
    assert estimator.samples == 0 and estimator.estimate().samples == 0


def test_add_rejects_bad_samples_naming_the_field():
    model = load('puma560')
    estimator = PayloadEstimator(model)
    good = np.zeros(6)
    with pytest.raises(ValueError, match='q:'):
        estimator.add(0.0, np.zeros(5), good, good)
    with pytest.raises(ValueError, match='qd:'):
        estimator.add(0.0, good, np.array([0, 0, math.nan, 0, 0, 0]), good)
    with pytest.raises(ValueError, match='tau:'):
        estimator.add(0.0, good, good, np.full(6, math.inf))
    with pytest.raises(ValueError, match='t:'):
        estimator.add(math.nan, good, good, good)
    estimator.add(1.0, good, good, good)
    with pytest.raises(ValueError, match='does not increase'):
        estimator.add(1.0, good, good, good)
    with pytest.raises(ValueError, match='cutoff_frequency'):
        PayloadEstimator(model, cutoff_frequency=0.0)


def test_a_time_gap_skips_the_interval_instead_of_forming_a_wrong_acceleration():
    """Across a gap longer than max_gap no row is formed (the mean acceleration over the
    gap would not pair with the effort held before it)."""
    model = load('puma560')
    estimator = PayloadEstimator(model, block=1, cutoff_frequency=100.0)
    q = np.full(6, 0.3)
    estimator.add(0.0, q, np.zeros(6), np.zeros(6))
    estimator.add(5.0, q, np.ones(6), np.zeros(6))
    assert estimator.samples == 0
    estimator.add(5.01, q, np.ones(6), np.zeros(6))
    assert estimator.samples == 1


def test_physical_consistency_names_the_violation():
    assert physical_consistency(1.0, [1e-3, 0, 0, 1e-3, 0, 1e-3]) == ''
    assert 'negative' in physical_consistency(-0.1, [1e-3, 0, 0, 1e-3, 0, 1e-3])
    assert 'semi-definite' in physical_consistency(1.0, [1e-3, 0, 0, -1e-3, 0, 1e-3])
    assert 'triangle' in physical_consistency(1.0, [1e-3, 0, 0, 1e-3, 0, 3e-3])
    assert physical_consistency(0.0, [0.0] * 6) == ''


def estimate_from_exact_efforts(model, pi, duration=8.0):
    """The estimate from the efforts of a payload π along an exciting trajectory, each
    period's held effort the mean of its ends (second-order accurate, like the rows)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ExcitationWarning)    # the Panda's speed limits
        t, q, qd, qdd = exciting_trajectory(model, duration)
    tau = dynamics.inverse_dynamics(model, q, qd, qdd) + payload_regressor(model, q, qd, qdd) @ pi
    estimator = PayloadEstimator(model)
    for k in range(len(t)):
        estimator.add(t[k], q[k], qd[k], 0.5 * (tau[k] + tau[min(k + 1, len(t) - 1)]))
    return estimator.estimate()


def test_inconsistent_data_are_reported():
    """Efforts of a 'payload' with negative mass: the fit finds it and says it is not
    physically consistent."""
    model = load('panda')
    pi = payload_parameters(-1.0, (0.0, 0.0, 0.1), [1e-3, 0, 0, 1e-3, 0, 1e-3])
    estimate = estimate_from_exact_efforts(model, pi)
    assert estimate.excited
    assert estimate.mass == pytest.approx(-1.0, rel=0.02)
    assert not estimate.consistent and not estimate.usable
    assert 'negative' in estimate.reason


@pytest.mark.parametrize('mass', [0.0, 2.5])
def test_bodies_on_the_edge_of_consistency_come_out_consistent(mass):
    """No payload (zero mass) and a point mass (zero centroidal inertia) are on the edge
    of the consistent set; their estimates land on either side of it and are moved onto
    it: usable, mass >= 0, centroidal inertia positive semi-definite, triangle inequality."""
    model = load('panda')
    pi = payload_parameters(mass, (0.05, 0.0, 0.15), [0.0] * 6)
    estimate = estimate_from_exact_efforts(model, pi)
    assert estimate.usable, estimate.reason
    assert estimate.mass >= 0.0 and estimate.mass == pytest.approx(mass, abs=0.01)
    moments = np.linalg.eigvalsh(np.array([[estimate.inertia[0], estimate.inertia[1],
                                            estimate.inertia[2]],
                                           [estimate.inertia[1], estimate.inertia[3],
                                            estimate.inertia[4]],
                                           [estimate.inertia[2], estimate.inertia[4],
                                            estimate.inertia[5]]]))
    assert moments[0] >= -1e-12 and moments[2] <= moments[0] + moments[1] + 1e-12
    assert np.max(np.abs(estimate.inertia)) < 1e-3


# ---------------------------------------------------------------------- excitation


@pytest.mark.parametrize('name', ['puma560', 'panda', 'stanford'])
def test_exciting_trajectory_starts_and_ends_at_rest_within_limits(name):
    model = load(name)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ExcitationWarning)
        t, q, qd, qdd = exciting_trajectory(model, 12.0, amplitude=0.4)
    start = q[0]
    assert t[0] == 0.0 and t[-1] == pytest.approx(12.0)
    for k in (0, -1):
        np.testing.assert_allclose(q[k], start, atol=1e-9)
        np.testing.assert_allclose(qd[k], 0.0, atol=1e-9)
        np.testing.assert_allclose(qdd[k], 0.0, atol=1e-9)
    assert np.all(q >= model.position_min) and np.all(q <= model.position_max)
    assert np.all(np.abs(qd) <= model.velocity_max)
    assert np.max(np.abs(q - start)) == pytest.approx(0.4, rel=1e-6) or name == 'stanford'
    # velocity and acceleration are the derivatives of the positions
    dt = t[1] - t[0]
    np.testing.assert_allclose(np.gradient(q, dt, axis=0)[1:-1], qd[1:-1], atol=5e-3)
    np.testing.assert_allclose(np.gradient(qd, dt, axis=0)[1:-1], qdd[1:-1], atol=5e-2)


def test_exciting_trajectory_is_scaled_down_to_the_limits_with_a_warning():
    model = load('puma560')            # joint 5: ±100°, started in the middle
    with pytest.warns(ExcitationWarning, match='joint index 4'):
        _, q, _, _ = exciting_trajectory(model, 10.0, amplitude=3.0)
    assert np.all(q <= model.position_max) and np.all(q >= model.position_min)


def test_exciting_trajectory_checks_its_arguments():
    model = load('puma560')
    with pytest.raises(ValueError, match='start'):
        exciting_trajectory(model, 10.0, start=np.full(6, 10.0))
    with pytest.raises(ValueError, match='harmonics'):
        exciting_trajectory(model, 10.0, harmonics=1)
    with pytest.raises(ValueError, match='duration'):
        exciting_trajectory(model, -1.0)


def test_exciting_trajectory_fits_whole_periods_and_is_reproducible():
    model = load('panda')
    a = exciting_trajectory(model, 7.0, base_frequency=0.2, seed=4)
    b = exciting_trajectory(model, 7.0, base_frequency=0.2, seed=4)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    c = exciting_trajectory(model, 7.0, base_frequency=0.2, seed=5)
    assert not np.allclose(a[1], c[1])


def test_a_planar_arm_cannot_determine_all_ten_parameters():
    """A planar 2R arm moves the payload in a plane: most inertia combinations never act,
    the condition number is infinite and their uncertainty too."""
    model = load('planar2')
    t, q, qd, qdd = exciting_trajectory(model, 10.0, amplitude=0.8)
    tau = dynamics.inverse_dynamics(model.with_payload(**PAYLOAD), q, qd, qdd)
    estimator = PayloadEstimator(model)
    for k in range(len(t)):
        estimator.add(t[k], q[k], qd[k], tau[k])
    estimate = estimator.estimate()
    assert estimate.condition_number == math.inf
    assert not estimate.excited and 'condition number inf' in estimate.reason
    assert np.any(np.isinf(estimate.parameters_std))
    assert np.all(np.isfinite(estimate.parameters))
