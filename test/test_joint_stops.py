"""Mechanical stops (integration.JointStops): a free-running PUMA 560 (no controller, no
friction) cannot wind a joint past its stops, gains no energy at them, and is integrated
exactly as without stops while no joint is at one."""

import math
import os

import numpy as np
import pytest

from robot_dynamics import dynamics
from robot_dynamics.simulation import integration
from robot_dynamics.model import RobotModel

PUMA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config',
                    'puma560.yaml')

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
# A pose inside the preset's limits, with every joint moving: the arm falls and the wrist
# spins, so within a few seconds each joint reaches a stop.
Q_START = np.array([0.0, 0.3, -0.5, 0.0, 0.0, 0.0])
QD_START = np.array([0.5, -1.0, 2.0, 3.0, -4.0, 5.0])
# rad per s of integration step: the stops' frequency is 0.2 / step, so the penetration
# after an impact grows with the step; 0.05 rad at the plant's default 1 ms (measured
# 0.034 rad on the wrist, doc/simulation.md)
PENETRATION_PER_STEP = 50.0


@pytest.fixture(scope='module')
def puma():
    return RobotModel.from_yaml(PUMA)


def energy(model, q, qd):
    return float(dynamics.kinetic_energy(model, q, qd) + dynamics.potential_energy(model, q))


def free_run(model, seconds, dt, method='rk4', stops=True):
    """(positions (K, n), total energies (K,), largest stop effort per joint) of the arm
    released at Q_START with QD_START under zero effort."""
    joint_stops = integration.JointStops(model.position_min if stops else [-math.inf] * 6,
                                         model.position_max if stops else [math.inf] * 6)
    stepper = integration.METHODS[method]
    q, qd, tau = Q_START.copy(), QD_START.copy(), np.zeros(model.n)
    positions, energies, peak = [q], [energy(model, q, qd)], np.zeros(model.n)
    for _ in range(round(seconds / dt)):
        q, qd, stop = joint_stops.step(stepper, model, q, qd, tau, dt)
        peak = np.maximum(peak, np.abs(stop))
        positions.append(q)
        energies.append(energy(model, q, qd))
    return np.array(positions), np.array(energies), peak


@pytest.mark.parametrize('dt', [0.001, 0.005])
def test_a_free_running_arm_stays_within_its_stops_and_gains_no_energy(puma, dt):
    positions, energies, peak = free_run(puma, 5.0, dt)
    beyond = np.maximum(positions - puma.position_max, puma.position_min - positions)
    assert (peak > 0.0).all()                    # every joint has hit a stop
    # at 5 ms the spring alone lets the wrist 0.15 rad in: the hard end holds it at 0.05 rad
    assert beyond.max() <= min(PENETRATION_PER_STEP * dt, integration.MAX_PENETRATION) + 1e-12
    # T + U never rises above its start (the stops' spring energy is >= 0 on top of it);
    # the contacts dissipate: the arm ends with far less energy than it started with
    assert energies.max() <= energies[0] + 1e-6 * abs(energies[0])
    assert energies[-1] < energies[0] - 10.0     # J (it starts with 21.8 J above the end)


def test_without_stops_the_same_arm_winds_past_its_limits(puma):
    positions, energies, _ = free_run(puma, 5.0, 0.001, stops=False)
    beyond = np.maximum(positions - puma.position_max, puma.position_min - positions)
    assert beyond.max() > 1.0                    # rad: what the stops prevent
    np.testing.assert_allclose(energies, energies[0], rtol=1e-4)   # RK4 alone conserves it


def test_semi_implicit_euler_with_stops_stays_within_them(puma):
    positions, _, peak = free_run(puma, 3.0, 0.001, method='euler')
    beyond = np.maximum(positions - puma.position_max, puma.position_min - positions)
    assert peak.any() and beyond.max() <= PENETRATION_PER_STEP * 0.001


def test_far_from_the_stops_the_step_is_the_plain_step(puma):
    stops = integration.JointStops(puma.position_min, puma.position_max)
    tau = dynamics.gravity_torques(puma, Q_START) + 1.0
    plain = integration.rk4_step(puma, Q_START, QD_START, tau, 0.001)
    q, qd, stop = stops.step(integration.rk4_step, puma, Q_START, QD_START, tau, 0.001)
    assert np.array_equal(q, plain[0]) and np.array_equal(qd, plain[1])
    assert not stop.any()


def test_an_impact_is_critically_damped_with_the_documented_penetration(puma):
    """Joint 1 (vertical axis, no gravity) driven into its upper stop at 2 rad/s: the
    penetration is v / (e ω), ω = 0.2 / h, of the linear model (+ 7 % measured here: the
    contact starts inside a step), and the impact is close to perfectly inelastic: it takes
    the kinetic energy ½ m v² of the motion into the stop, m = 1 / (M⁻¹)_11, and what is
    left moves the other joints."""
    weightless = puma.with_gravity((0.0, 0.0, 0.0))
    stops = integration.JointStops(puma.position_min, puma.position_max)
    dt, v = 0.001, 2.0
    q = np.array([puma.position_max[0] - 0.01, 0.0, 0.0, 0.0, 0.0, 0.0])
    qd = np.array([v, 0.0, 0.0, 0.0, 0.0, 0.0])
    before = float(dynamics.kinetic_energy(weightless, q, qd))
    m = 1.0 / np.linalg.inv(dynamics.mass_matrix(weightless, q))[0, 0]
    deepest = 0.0
    for _ in range(300):
        q, qd, _ = stops.step(integration.rk4_step, weightless, q, qd, np.zeros(6), dt)
        deepest = max(deepest, q[0] - puma.position_max[0])
    omega = integration.STOP_OMEGA_H / dt
    assert 0.9 * v / (math.e * omega) < deepest <= 1.1 * v / (math.e * omega)
    after = float(dynamics.kinetic_energy(weightless, q, qd))
    assert after == pytest.approx(before - 0.5 * m * v * v, abs=0.05 * before)


def test_a_steady_effort_into_a_stop_gives_penetration_effort_over_stiffness(puma):
    """Joint 1 pushed into its lower stop with 50 N m (no gravity): it settles where the
    stop's effort balances the push, at 50 / k_1 beyond the limit."""
    weightless = puma.with_gravity((0.0, 0.0, 0.0))
    stops = integration.JointStops(puma.position_min, puma.position_max)
    dt = 0.001
    q = np.array([puma.position_min[0], 0.0, 0.0, 0.0, 0.0, 0.0])
    qd = np.zeros(6)
    tau = np.array([-50.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    tau[1:] = dynamics.gravity_torques(weightless, q)[1:]
    for _ in range(500):
        q, qd, stop = stops.step(integration.rk4_step, weightless, q, qd, tau, dt)
    k, _ = stops.gains(weightless, q, dt)
    assert stop[0] == pytest.approx(50.0, rel=1e-3)
    assert puma.position_min[0] - q[0] == pytest.approx(50.0 / k[0], rel=1e-2)


def test_joints_without_limits_have_no_stop(puma):
    stops = integration.JointStops([-math.inf] * 6, [math.inf] * 6)
    assert not stops.any
    q = np.full(6, 100.0)
    assert stops.inside(q) and not stops.outside(q).any()
    half = integration.JointStops([-1.0, -math.inf], [math.inf, 1.0])
    np.testing.assert_array_equal(half.outside([-3.0, 5.0]), [-2.0, 4.0])
    np.testing.assert_array_equal(half.outside([50.0, -50.0]), [0.0, 0.0])


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match='below its upper'):
        integration.JointStops([1.0], [0.0])
    with pytest.raises(ValueError, match='shape'):
        integration.JointStops([0.0, 0.0], [1.0])


def test_a_drive_stronger_than_the_spring_meets_the_hard_end(puma):
    """The PUMA's wrist joint 6 (no rotor inertia: its stop spring is k = 2 N m/rad at 1 ms)
    pushed into its upper stop with its full effort_max (21.3 N m, 10 rad of spring
    penetration): it stops MAX_PENETRATION beyond the limit, at rest."""
    stops = integration.JointStops(puma.position_min, puma.position_max)
    q = np.array([0.0, 0.3, -0.5, 0.0, 0.0, puma.position_max[5] - 0.01])
    qd = np.zeros(6)
    tau = dynamics.gravity_torques(puma, q)
    tau[5] = puma.effort_max[5]
    for _ in range(1000):
        q, qd, stop = stops.step(integration.rk4_step, puma, q, qd, tau, 0.001)
        assert q[5] - puma.position_max[5] <= integration.MAX_PENETRATION + 1e-12
    assert q[5] - puma.position_max[5] == pytest.approx(integration.MAX_PENETRATION)
    assert abs(qd[5]) < 1e-6 and stop[5] < 0.0
