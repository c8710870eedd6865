"""Trajectory feasibility at accept time (doc/trajectories.md, "Feasibility"): the
reference's velocities against robot.velocity_max and τ = ID(q_d, q̇_d, q̈_d) against the
effort limits, refused naming the joint, the time and the excess, or time-scaled to fit
with feasibility.allow_time_scaling: unit tests on the sampler's plans (through the nodes:
test_feasibility_nodes.py)."""

import numpy as np
import pytest

from robot_dynamics import dynamics
from robot_dynamics.trajectories.feasibility import (check_reference, MAX_SAMPLES, plan_samples,
                                                     sample_reference, scaled_command)
from robot_dynamics.model import RobotModel
from robot_dynamics.trajectories.profiles import sample_profile
from robot_dynamics.trajectories.sampler import JointTrajectorySampler
from ros_testing import PUMA, REPO

PANDA = f'{REPO}/config/panda.yaml'
JOINTS = [f'joint_{i}' for i in range(1, 7)]


def puma():
    return RobotModel.from_yaml(PUMA)


def plan_of(model, joints, start, goal, seconds, points=20, profile='quintic'):
    """The sampler's plan for a move from rest at `start` (accepted at t = 1 s)."""
    sampler = JointTrajectorySampler(joints)
    sampler.hold(start, 1.0)
    plans = []
    sampler.accept(sample_profile(profile, start, goal, seconds, points, joints), 1.0,
                   check=plans.append)
    return sampler, plans[0]


def test_the_vectorised_samples_are_the_samplers_reference():
    model = puma()
    start = np.array([0.1, -0.2, 0.3, 0.0, 0.2, -0.1])
    sampler, plan = plan_of(model, JOINTS, start, start + 0.5, 1.3, points=7,
                            profile='trapezoid')
    t = np.random.default_rng(3).uniform(1.0, 2.3, 50)
    q, qd, qdd = sample_reference(np.asarray(plan.times), np.asarray(plan.coefficients), t)
    for k, tk in enumerate(t):
        ref = sampler.sample(tk)
        np.testing.assert_allclose(q[k], ref.positions, atol=1e-12)
        np.testing.assert_allclose(qd[k], ref.velocities, atol=1e-12)
        np.testing.assert_allclose(qdd[k], ref.accelerations, atol=1e-9)


def test_a_fast_move_names_the_joint_the_time_and_the_excess():
    model = puma()
    start = np.zeros(6)
    goal = np.array([0.0, 1.2, 0.0, 0.0, 0.0, 0.0])
    sampler, plan = plan_of(model, JOINTS, start, goal, 0.25)
    velocity, effort, scale = check_reference(model, plan, JOINTS, model.velocity_max,
                                              model.effort_max)
    assert velocity is None                     # the PUMA preset has no velocity limits
    assert effort is not None and effort.joint == 1 and effort.name == 'joint_2'
    # the reported effort is the inverse dynamics of the sampler's own reference then
    ref = sampler.sample(1.0 + effort.time)
    tau = dynamics.inverse_dynamics(model, ref.positions, ref.velocities, ref.accelerations)
    assert tau[1] == pytest.approx(effort.value, rel=1e-9)
    assert abs(effort.value) > model.effort_max[1] == effort.limit
    text = effort.text()
    assert "'joint_2'" in text and f't = {effort.time:.3f} s' in text
    assert 'effort_limits[1]' in text
    assert 1.0 < scale < np.inf


def test_a_slow_move_is_feasible_and_a_scaled_one_fits():
    model = puma()
    start = np.zeros(6)
    goal = np.array([0.0, 1.2, 0.0, 0.0, 0.0, 0.0])
    _, slow = plan_of(model, JOINTS, start, goal, 4.0)
    assert check_reference(model, slow, JOINTS, model.velocity_max, model.effort_max)[:2] \
        == (None, None)
    command = sample_profile("quintic", start, goal, 0.25, 20, JOINTS)
    sampler = JointTrajectorySampler(JOINTS)
    sampler.hold(start, 1.0)
    plans = []
    sampler.accept(command, 1.0, check=plans.append)
    _, _, scale = check_reference(model, plans[0], JOINTS, model.velocity_max, model.effort_max)
    slower = scaled_command(command, scale * 1.02)
    assert slower.points[-1].time_from_start == pytest.approx(0.25 * scale * 1.02)
    sampler.accept(slower, 1.0, check=plans.append)
    velocity, effort, again = check_reference(model, plans[-1], JOINTS, model.velocity_max,
                                              model.effort_max)
    assert velocity is None and effort is None and again == 1.0
    # and not much slower than needed: 10 % faster than the estimate does not fit
    sampler.accept(scaled_command(command, scale * 0.9), 1.0, check=plans.append)
    assert check_reference(model, plans[-1], JOINTS, model.velocity_max,
                           model.effort_max)[1] is not None


def test_velocity_limits_are_checked():
    model = RobotModel.from_yaml(PANDA)
    joints = [f'panda_joint{i}' for i in range(1, 8)]
    start = np.array([0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0])
    goal = start.copy()
    goal[4] += 2.0                  # quintic peak 15·2/(8·1) = 3.75 rad/s > 2.61
    _, plan = plan_of(model, joints, start, goal, 1.0)
    velocity, _, scale = check_reference(model, plan, joints, model.velocity_max,
                                         np.full(7, 1e6))
    assert velocity.name == 'panda_joint5' and velocity.limit == 2.61
    assert velocity.value == pytest.approx(3.75, rel=1e-3)
    assert velocity.time == pytest.approx(0.5, abs=0.011)
    assert scale == pytest.approx(3.75 / 2.61, rel=1e-3)


def test_gravity_beyond_the_limit_cannot_be_scaled_away():
    model = puma()
    start = np.zeros(6)
    goal = np.array([0.0, 0.6, 0.0, 0.0, 0.0, 0.0])
    _, plan = plan_of(model, JOINTS, start, goal, 5.0)
    g = np.abs(dynamics.gravity_torques(model, goal))
    limits = np.array(model.effort_max, dtype=float)
    limits[1] = 0.5 * g[1]
    _, effort, scale = check_reference(model, plan, JOINTS, model.velocity_max, limits)
    assert effort is not None and effort.joint == 1 and scale == np.inf


def test_a_long_trajectory_is_sampled_on_a_bounded_grid():
    model = puma()
    start = np.zeros(6)
    _, plan = plan_of(model, JOINTS, start, start + 0.3, 600.0, points=400)
    t, q, *_ = plan_samples(plan)
    assert len(t) <= MAX_SAMPLES + 1 + 401 and q.shape == (len(t), 6)
    assert t[0] == plan.times[0] and t[-1] == plan.times[-1]
    assert set(np.asarray(plan.times)).issubset(set(t))


def test_a_plan_without_interpolation_is_checked_at_its_points():
    model = puma()
    sampler = JointTrajectorySampler(JOINTS, interpolation_method='none')
    start = np.zeros(6)
    sampler.hold(start, 1.0)
    from robot_dynamics.trajectories.sampler import TrajectoryCommand, TrajectoryPoint
    accelerations = [0.0, 200.0, 0.0, 0.0, 0.0, 0.0]     # a step the motors cannot make
    command = TrajectoryCommand(tuple(JOINTS), (
        TrajectoryPoint(0.1, tuple(start + 0.01), (0.0,) * 6, tuple(accelerations)),
        TrajectoryPoint(0.2, tuple(start + 0.02), (0.0,) * 6, (0.0,) * 6)))
    plans = []
    sampler.accept(command, 1.0, check=plans.append)
    _, effort, _ = check_reference(model, plans[0], JOINTS, model.velocity_max,
                                   model.effort_max)
    assert effort is not None and effort.name == 'joint_2'
    q = start + 0.01
    tau = dynamics.inverse_dynamics(model, q, np.zeros(6), np.array(accelerations))
    assert effort.value == pytest.approx(tau[1])
