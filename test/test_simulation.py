"""Closed-loop simulation (robot_dynamics.simulation): zero-order hold, RK4 plant,
controllers of the [LEE] comparison."""

import math

import numpy as np
import pytest

from robot_dynamics import dynamics, simulation
from robot_dynamics.simulation.integration import rk4_step
from robot_dynamics.model import RobotModel


def planar_arm(gravity=(0.0, -9.81, 0.0), links=2):
    """A planar arm (all joint axes along base z) with gravity in its plane."""
    return RobotModel(
        'standard', ['revolute'] * links, a=[0.5, 0.4, 0.3][:links],
        alpha=[0.0] * links, d=[0.0] * links, theta=[0.0] * links,
        mass=[3.0, 2.0, 1.0][:links],
        com=[-0.25, 0.0, 0.0, -0.2, 0.01, 0.0, -0.15, 0.0, 0.0][:3 * links],
        inertia=[0.02, 0.0, 0.0, 0.07, 0.0, 0.07,
                 0.01, 0.0, 0.0, 0.03, 0.0, 0.03,
                 0.005, 0.0, 0.0, 0.01, 0.0, 0.01][:6 * links],
        gravity=gravity)


def spatial_arm(gravity=(0.0, 0.0, 0.0)):
    """Three revolute joints with twisted axes and offsets (Coriolis coupling in 3-D)."""
    return RobotModel(
        'standard', ['revolute'] * 3, a=[0.1, 0.4, 0.05], alpha=[1.2, -0.4, 0.9],
        d=[0.2, 0.05, 0.15], theta=[0.3, -0.2, 0.5], mass=[2.0, 1.5, 1.0],
        com=[0.02, 0.01, -0.03, -0.2, 0.02, 0.0, 0.0, 0.03, 0.05],
        inertia=[0.03, 0.002, 0.0, 0.04, 0.001, 0.02,
                 0.01, 0.0, 0.001, 0.05, 0.0, 0.05,
                 0.006, 0.0, 0.0, 0.006, 0.001, 0.004],
        gravity=gravity)


def sine_reference(amplitude, frequency, q0):
    amplitude, q0 = np.asarray(amplitude), np.asarray(q0)
    w = 2.0 * math.pi * frequency

    def reference(t):
        return (q0 + amplitude * np.sin(w * t), amplitude * w * np.cos(w * t),
                -amplitude * w * w * np.sin(w * t))
    return reference


def zero_controller(n):
    return lambda t, q, qd: np.zeros(n)


def test_computed_torque_error_shrinks_with_the_control_period():
    model = planar_arm()
    q0 = np.array([0.3, -0.5])
    reference = sine_reference([0.4, 0.6], 1.0, q0)
    q_start, qd_start, _ = reference(0.0)           # consistent initial state: e(0) = ė(0) = 0
    errors = []
    for period in (0.02, 0.01, 0.005):
        controller = simulation.computed_torque(model, 100.0, 20.0, reference)
        run = simulation.simulate_closed_loop(model, controller, reference, 1.0, period,
                                              0.0025, q_start, qd_start)
        errors.append(np.max(simulation.max_tracking_error(run)))
    assert errors[0] > 1e-5   # the hold really does cause an error at coarse sampling
    # zero-order hold error is first order in the period: halving it halves the error
    assert errors[1] < 0.65 * errors[0]
    assert errors[2] < 0.65 * errors[1]


def test_computed_torque_follows_the_continuous_error_dynamics_at_fast_sampling():
    # [LEE] (4.3): ë + 20ė + 100e = 0 → e(t) = (e0 + 10 e0 t) exp(−10 t)
    model = spatial_arm(gravity=(0.0, 0.0, -9.81))
    q_goal = np.array([0.2, -0.4, 0.7])
    e0 = np.array([0.05, -0.03, 0.02])
    reference = simulation.hold(q_goal)
    controller = simulation.computed_torque(model, 100.0, 20.0, reference)
    run = simulation.simulate_closed_loop(model, controller, reference, 0.6, 0.001, 0.001,
                                          q_goal - e0, np.zeros(3))
    expected = (e0 + 10.0 * np.outer(run.t, e0)) * np.exp(-10.0 * run.t)[:, None]
    assert np.max(np.abs(run.error - expected)) < 0.02 * np.max(np.abs(e0))


def test_zero_effort_on_a_gravity_free_arm_conserves_energy():
    model = spatial_arm(gravity=(0.0, 0.0, 0.0))
    run = simulation.simulate_closed_loop(
        model, zero_controller(3), simulation.hold(np.zeros(3)), 1.0, 0.01, 0.001,
        np.array([0.1, 0.2, -0.3]), np.array([1.5, -2.0, 2.5]))
    energy = dynamics.kinetic_energy(model, run.q, run.qd)
    assert np.ptp(run.qd[:, 0]) > 0.1       # the motion is really coupled, not a rigid spin
    assert np.max(np.abs(energy - energy[0])) < 1e-7 * energy[0]


def test_zero_order_hold_samples_only_at_control_instants_and_holds_the_effort():
    model = planar_arm()
    calls = []

    def controller(t, q, qd):
        calls.append(t)
        return np.array([1.0 + t, -2.0 * t])
    run = simulation.simulate_closed_loop(model, controller, simulation.hold(np.zeros(2)),
                                          0.1, 0.02, 0.005, np.zeros(2), np.zeros(2))
    assert np.allclose(calls, 0.02 * np.arange(5), rtol=0.0, atol=1e-12)
    assert len(run.t) == 21 and np.isclose(run.t[-1], 0.1)
    for k, t_k in enumerate(calls):
        held = run.tau[4 * k:4 * k + 4]
        assert np.allclose(held, [1.0 + t_k, -2.0 * t_k], rtol=0.0, atol=1e-12)


def test_held_effort_reproduces_a_hand_written_rk4_loop():
    model = spatial_arm(gravity=(0.0, 0.0, -9.81))
    tau = np.array([1.0, -0.5, 0.2])
    run = simulation.simulate_closed_loop(
        model, lambda t, q, qd: tau, simulation.hold(np.zeros(3)), 0.05, 0.01, 0.0025,
        np.zeros(3), np.zeros(3))
    q, qd = np.zeros(3), np.zeros(3)
    for _ in range(20):
        q, qd = rk4_step(model, q, qd, tau, 0.0025)
    assert np.allclose(run.q[-1], q, rtol=0.0, atol=1e-12)
    assert np.allclose(run.qd[-1], qd, rtol=0.0, atol=1e-12)


def test_gravity_compensation_removes_the_steady_state_sag_of_pd():
    model = planar_arm()
    q_goal = np.array([0.4, 0.3])
    kp, kd = simulation.effort_gains(model, q_goal, 100.0, 20.0)
    reference = simulation.hold(q_goal)
    args = (reference, 3.0, 0.01, 0.005, q_goal, np.zeros(2))
    sag = simulation.simulate_closed_loop(model, simulation.pd(kp, kd, reference), *args)
    held = simulation.simulate_closed_loop(
        model, simulation.pd_gravity(model, kp, kd, reference), *args)
    # PD alone settles, off the goal, where the spring Kp e balances gravity g(q)
    assert np.max(np.abs(sag.qd[-1])) < 1e-6
    assert np.min(np.abs(sag.error[-1])) > 0.05
    assert np.allclose(kp * sag.error[-1], dynamics.gravity_torques(model, sag.q[-1]),
                       rtol=1e-4, atol=0.0)
    assert np.max(np.abs(held.error)) < 1e-9


def test_pd_with_mass_matrix_gains_equals_computed_torque_on_a_single_joint():
    # one revolute link, no gravity: M is constant, so Kp·M (q_d − q) + Kd·M (q̇_d − q̇)
    # is exactly M (Kp e + Kd ė), the computed torque without feedforward
    model = planar_arm(gravity=(0.0, 0.0, 0.0), links=1)
    reference = simulation.hold(np.array([0.5]))
    kp, kd = simulation.effort_gains(model, [0.0], 100.0, 20.0)
    args = (reference, 0.5, 0.01, 0.005, np.zeros(1), np.zeros(1))
    ct = simulation.simulate_closed_loop(
        model, simulation.computed_torque(model, 100.0, 20.0, reference), *args)
    pd = simulation.simulate_closed_loop(model, simulation.pd(kp, kd, reference), *args)
    assert np.max(np.abs(ct.q - pd.q)) < 1e-12
    assert np.max(np.abs(ct.q[-1] - 0.5)) < 0.1 * 0.5


def test_measurement_hook_is_what_the_controller_sees():
    model = planar_arm()
    quantum = 1e-2
    seen = []

    def quantise(q, qd):
        return np.round(q / quantum) * quantum, qd

    def controller(t, q, qd):
        seen.append(q.copy())
        return np.array([5.0, 0.0])
    simulation.simulate_closed_loop(model, controller, simulation.hold(np.zeros(2)), 0.2,
                                    0.01, 0.01, np.array([0.0123, 0.0]), np.zeros(2),
                                    measurement=quantise)
    seen = np.array(seen)
    assert np.allclose(seen / quantum, np.round(seen / quantum), atol=1e-9)
    assert len(np.unique(seen[:, 0])) > 1      # the arm moved and the samples followed


def test_effort_limits_clip_the_held_effort():
    model = planar_arm()
    run = simulation.simulate_closed_loop(
        model, lambda t, q, qd: np.array([50.0, -50.0]), simulation.hold(np.zeros(2)), 0.05,
        0.01, 0.01, np.zeros(2), np.zeros(2), effort_limits=[3.0, 2.0])
    assert np.allclose(run.tau, [3.0, -2.0])


@pytest.mark.parametrize('kwargs, field', [
    (dict(plant_step=0.003), 'plant_step'),
    (dict(duration=0.105), 'control_period'),
    (dict(control_period=0.0), 'control_period'),
    (dict(plant_step=float('nan')), 'plant_step'),
    (dict(q0=[0.0]), 'q0'),
    (dict(qd0=[0.0, float('nan')]), 'qd0'),
])
def test_bad_arguments_raise_value_errors_naming_the_field(kwargs, field):
    args = dict(plant_model=planar_arm(), controller=zero_controller(2),
                reference=simulation.hold(np.zeros(2)), duration=0.1, control_period=0.01,
                plant_step=0.005, q0=np.zeros(2), qd0=np.zeros(2))
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        simulation.simulate_closed_loop(**args)


@pytest.mark.parametrize('effort', [[float('nan'), 0.0], [1.0, 2.0, 3.0]])
def test_bad_controller_output_raises_an_error_naming_the_controller(effort):
    with pytest.raises(ValueError, match='controller'):
        simulation.simulate_closed_loop(planar_arm(), lambda t, q, qd: np.array(effort),
                                        simulation.hold(np.zeros(2)), 0.02, 0.01, 0.01,
                                        np.zeros(2), np.zeros(2))
