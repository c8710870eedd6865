"""joint_trajectory_controller (JTC) options of the sampler and the goal monitor, without
ROS: effort feed-forward, interpolation_method 'none', allow_integration_in_goal_trajectories,
allow_nonzero_velocity_at_trajectory_end, the stop with decelerate_on_cancel, the command
timeout's bookkeeping, the state in ~/query_state refusals and acceleration tolerances.
Expected values are written out from JTC's rules (doc/trajectories.md), not taken from the
code under test."""

import numpy as np
import pytest

from robot_dynamics.trajectories.sampler import (deceleration_plan, JointTrajectorySampler,
                                                 OutsideTrajectory, Reference, TrajectoryCommand,
                                                 TrajectoryPoint, TrajectoryRejected)
from robot_dynamics.trajectories.goal import (AccelerationEstimate, GOAL_TOLERANCE_VIOLATED,
                                              PATH_TOLERANCE_VIOLATED, StateTolerances, SUCCESSFUL,
                                              TrajectoryGoalMonitor)

JOINTS = ('j1', 'j2', 'j3')
Q0 = np.array([0.1, -0.4, 0.8])
NOW = 100.0


def sampler(**kwargs):
    s = JointTrajectorySampler(JOINTS, **kwargs)
    s.hold(Q0, NOW)
    return s


def point(t, positions=(), velocities=(), accelerations=(), effort=()):
    return TrajectoryPoint(t, tuple(positions), tuple(velocities), tuple(accelerations),
                           tuple(effort))


def command(*points, names=JOINTS, start=0.0):
    return TrajectoryCommand(tuple(names), tuple(points), start)


# ---------------------------------------------------------------------- effort feed-forward

def test_effort_is_interpolated_linearly_from_the_current_feed_forward_and_kept_after_the_end():
    s = sampler()
    e1, e2 = np.array([2.0, -1.0, 0.5]), np.array([4.0, 1.0, 0.5])
    s.accept(command(point(1.0, Q0, effort=e1), point(3.0, Q0 + 0.1, effort=e2)), NOW)
    assert s.sample(NOW).effort.tolist() == [0.0, 0.0, 0.0]     # no feed-forward before
    np.testing.assert_allclose(s.sample(NOW + 0.25).effort, 0.25 * e1)
    np.testing.assert_allclose(s.sample(NOW + 1.0).effort, e1)
    np.testing.assert_allclose(s.sample(NOW + 2.5).effort, e1 + 0.75 * (e2 - e1))
    np.testing.assert_allclose(s.sample(NOW + 10.0).effort, e2)     # after the last point


def test_a_new_trajectory_starts_its_effort_from_the_running_feed_forward():
    s = sampler()
    s.accept(command(point(1.0, Q0, effort=[2.0, 2.0, 2.0])), NOW)
    s.accept(command(point(1.0, Q0, effort=[0.0, 0.0, 4.0])), NOW + 0.5)   # ff 1.0 then
    np.testing.assert_allclose(s.sample(NOW + 0.5).effort, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(s.sample(NOW + 1.0).effort, [0.5, 0.5, 2.5])


def test_a_trajectory_without_effort_and_a_stop_have_no_feed_forward():
    s = sampler()
    s.accept(command(point(1.0, Q0, effort=[2.0, 2.0, 2.0])), NOW)
    s.stop(NOW + 2.0)
    assert s.sample(NOW + 2.5).effort is None
    s.accept(command(point(1.0, Q0 + 0.1)), NOW + 3.0)
    assert s.sample(NOW + 3.5).effort is None


def test_partial_joints_get_zero_effort_as_jtc_fills_them():
    s = sampler(allow_partial_joints_goal=True)
    s.accept(command(point(1.0, [0.2], effort=[3.0]), names=('j2',)), NOW)
    np.testing.assert_allclose(s.sample(NOW + 2.0).effort, [0.0, 3.0, 0.0])


@pytest.mark.parametrize('effort, words', [
    ([1.0, 2.0], r'points\[1\]\.effort: 2 values for 3 joints'),
    ([1.0, np.nan, 0.0], r"points\[1\]\.effort\[1\] \(joint 'j2'\): not finite"),
])
def test_effort_of_the_wrong_size_or_not_finite_is_refused_naming_field_and_index(effort, words):
    s = sampler()
    with pytest.raises(TrajectoryRejected, match=words):
        s.accept(command(point(1.0, Q0, effort=[0.0] * 3), point(2.0, Q0, effort=effort)), NOW)
    assert s.status(NOW) == 'holding'


# ---------------------------------------------------------------------- interpolation none

def test_interpolation_none_jumps_to_the_next_point_as_jtc():
    s = sampler(interpolation_method='none')
    p1, p2 = Q0 + 0.1, Q0 + 0.3
    v1, v2 = [0.1, 0.2, 0.3], [0.0, 0.0, 0.0]
    s.accept(command(point(0.5, p1, v1, effort=[1.0] * 3), point(1.0, p2, v2,
                                                                  effort=[2.0] * 3)), NOW)
    before = s.sample(NOW + 0.2)               # before the first point: the start state
    np.testing.assert_array_equal(before.positions, Q0)
    assert not before.velocities.any() and not before.accelerations.any()
    assert before.effort.tolist() == [0.0] * 3
    between = s.sample(NOW + 0.7)              # on [point 0, point 1): point 1 as given
    np.testing.assert_array_equal(between.positions, p2)
    np.testing.assert_array_equal(between.velocities, v2)
    assert between.effort.tolist() == [2.0] * 3
    after = s.sample(NOW + 3.0)
    np.testing.assert_array_equal(after.positions, p2)
    assert s.goal_positions.tolist() == p2.tolist()


def test_interpolation_none_with_a_first_point_at_zero_takes_the_second_at_once():
    s = sampler(interpolation_method='none')
    p0, p1 = Q0 + 0.1, Q0 + 0.2
    s.accept(command(point(0.0, p0), point(1.0, p1)), NOW)
    np.testing.assert_array_equal(s.sample(NOW + 0.1).positions, p1)   # JTC: [p0, p1) -> p1
    assert not s.sample(NOW + 0.1).velocities.any()     # none given: zero


def test_interpolation_method_is_checked():
    with pytest.raises(ValueError, match='interpolation_method'):
        JointTrajectorySampler(JOINTS, interpolation_method='linear')


# ---------------------------------------------------------------------- integration

def test_velocity_only_points_are_integrated_by_the_trapezoidal_rule():
    s = sampler(allow_integration_in_goal_trajectories=True)
    v1, v2 = np.array([0.4, 0.0, -0.2]), np.array([0.0, 0.0, 0.0])
    s.accept(command(point(0.5, velocities=v1), point(1.5, velocities=v2)), NOW)
    # from rest at Q0: p1 = Q0 + (0 + v1)/2 * 0.5, p2 = p1 + (v1 + v2)/2 * 1.0
    p1 = Q0 + 0.25 * v1
    p2 = p1 + 0.5 * v1
    np.testing.assert_allclose(s.sample(NOW + 0.5).positions, p1, atol=1e-12)
    np.testing.assert_allclose(s.sample(NOW + 0.5).velocities, v1, atol=1e-12)
    np.testing.assert_allclose(s.goal_positions, p2, atol=1e-12)


def test_acceleration_only_points_are_integrated_twice():
    s = sampler(allow_integration_in_goal_trajectories=True)
    a1 = np.array([1.0, -2.0, 0.0])
    s.accept(command(point(1.0, accelerations=a1), point(2.0, accelerations=-a1)), NOW)
    # v1 = (0 + a1)/2 * 1 ; p1 = Q0 + v1/2 ; v2 = v1 + (a1 - a1)/2 = v1 ; p2 = p1 + v1
    v1 = 0.5 * a1
    np.testing.assert_allclose(s.sample(NOW + 1.0).positions, Q0 + 0.5 * v1, atol=1e-12)
    np.testing.assert_allclose(s.goal_positions, Q0 + 1.5 * v1, atol=1e-12)


def test_points_without_positions_are_refused_unless_integration_is_allowed():
    s = sampler()
    with pytest.raises(TrajectoryRejected, match=r'points\[0\]\.positions: 0 values'):
        s.accept(command(point(1.0, velocities=[0.1] * 3)), NOW)
    s.allow_integration_in_goal_trajectories = True         # a live parameter
    with pytest.raises(TrajectoryRejected, match='no positions, velocities or accelerations'):
        s.accept(command(point(1.0)), NOW)
    s.accept(command(point(1.0, velocities=[0.1, 0.0, 0.0], accelerations=[0.0] * 3)), NOW)


def test_integrated_positions_are_checked_against_the_limits():
    s = JointTrajectorySampler(JOINTS, position_max=[1.0, 1.0, 1.0],
                               allow_integration_in_goal_trajectories=True)
    s.hold(Q0, NOW)
    with pytest.raises(TrajectoryRejected, match=r"positions\[2\] \(joint 'j3'\).*outside"):
        s.accept(command(point(2.0, velocities=[0.0, 0.0, 1.0])), NOW)


# ---------------------------------------------------------------------- final velocity

def test_nonzero_final_velocity_beyond_float_epsilon_is_refused_when_not_allowed():
    s = sampler(allow_nonzero_velocity_at_trajectory_end=False)
    s.accept(command(point(1.0, Q0, [0.0, 1e-8, 0.0])), NOW)       # JTC: |v| <= float eps
    with pytest.raises(TrajectoryRejected, match=r"points\[1\]\.velocities\[1\] \(joint 'j2'\)"
                                                 r".*allow_nonzero_velocity_at_trajectory_end"):
        s.accept(command(point(1.0, Q0, [0.0] * 3), point(2.0, Q0, [0.0, 1e-6, 0.0])), NOW)


# ---------------------------------------------------------------------- stop / decelerate

@pytest.mark.parametrize('a0', [(0.0, 0.0, 0.0), (1.5, 3.0, -0.5), (-1.9, -3.9, 0.9)])
def test_deceleration_plan_never_exceeds_the_limit_and_keeps_the_acceleration_continuous(a0):
    v0 = np.array([1.0, -0.5, 0.0])
    a0 = np.array(a0)
    limit = np.array([2.0, 4.0, 1.0])
    plan = deceleration_plan(Q0, v0, limit, NOW, a0)
    q, qd, qdd = plan.sample(NOW)
    np.testing.assert_allclose(np.concatenate([q, qd, qdd]), np.concatenate([Q0, v0, a0]),
                               atol=1e-12)
    h, previous = 1e-3, None
    for t in np.arange(0.0, plan.end - NOW + 0.5, h):
        q, qd, qdd = plan.sample(NOW + t)
        assert np.all(np.abs(qdd) <= limit + 1e-9)
        if previous is not None:                # q̈ continuous: no step between samples
            assert np.all(np.abs(qdd - previous) <= 0.25)   # a step: >= 0.5 here
        previous = qdd
    q, qd, qdd = plan.sample(plan.end)
    assert np.all(np.abs(qd) < 1e-9) and np.all(np.abs(qdd) < 1e-9)
    np.testing.assert_allclose(q, plan.final, atol=1e-12)


def test_deceleration_from_rest_acceleration_ramps_to_the_full_limit():
    v0 = np.array([1.0, -0.5, 0.0])
    limit = np.array([2.0, 4.0, 1.0])
    plan = deceleration_plan(Q0, v0, limit, NOW)
    # jerk ramps of 0.15 |q̇0| / a to −a and back: 1.15 |q̇0| / a and 1.15 q̇0² / (2a) (JTC's
    # constant deceleration: |q̇0| / a, q̇0² / (2a)); joint 3 is at rest and holds
    T = 1.15 * np.abs(v0) / limit
    assert plan.end - NOW == pytest.approx(T.max(), rel=1e-9)
    np.testing.assert_allclose(plan.final, Q0 + 1.15 * v0 * np.abs(v0) / (2.0 * limit),
                               rtol=1e-9)
    peak = max(np.abs(plan.sample(NOW + t)[2][0]) for t in np.linspace(0.0, T[0], 1001))
    assert peak == pytest.approx(limit[0], rel=1e-9)            # the full limit, not above


def test_stop_decelerates_from_the_reference_or_from_a_given_state():
    s = sampler(max_deceleration_on_cancel=[2.0, 2.0, 2.0])
    s.accept(command(point(1.0, Q0 + 1.0, [1.0] * 3), point(2.0, Q0 + 2.0, [0.0] * 3)), NOW)
    ref = s.sample(NOW + 1.0)
    s.stop(NOW + 1.0)
    after = s.sample(NOW + 1.0)
    np.testing.assert_allclose(after.velocities, ref.velocities, atol=1e-12)
    np.testing.assert_allclose(after.accelerations, ref.accelerations, atol=1e-12)
    assert s.status(NOW + 1.5) == 'running' and s.status(NOW + 3.0) == 'finished'
    s.stop(NOW + 3.0, positions=Q0, velocities=[-0.2, 0.0, 0.0])     # 1.15 v² / (2a)
    np.testing.assert_allclose(s.goal_positions, Q0 - [1.15 * 0.2**2 / (2 * 2.0), 0.0, 0.0])


def test_stop_without_deceleration_holds_at_once_and_an_empty_trajectory_stops():
    s = sampler()
    s.accept(command(point(1.0, Q0 + 1.0, [1.0] * 3), point(2.0, Q0 + 2.0, [0.0] * 3)), NOW)
    q = s.sample(NOW + 1.0).positions
    s.accept(command(), NOW + 1.0)
    assert s.status(NOW + 1.0) == 'holding'
    np.testing.assert_array_equal(s.sample(NOW + 1.5).positions, q)
    d = sampler(max_deceleration_on_cancel=[1.0, 1.0, 1.0])
    d.accept(command(point(1.0, Q0 + 1.0, [1.0] * 3), point(2.0, Q0 + 2.0, [0.0] * 3)), NOW)
    d.accept(command(), NOW + 1.0)                          # decelerates instead
    assert d.status(NOW + 1.5) == 'running'


@pytest.mark.parametrize('decel', [[1.0, 0.0, 1.0], [1.0, -1.0, 1.0], [1.0, np.inf, 1.0],
                                   [1.0, 1.0]])
def test_max_deceleration_must_be_finite_and_positive_per_joint(decel):
    with pytest.raises(ValueError, match='max_deceleration_on_cancel'):
        JointTrajectorySampler(JOINTS, max_deceleration_on_cancel=decel)


# ---------------------------------------------------------------------- cmd_timeout

def test_command_timeout_counts_from_the_last_point_and_not_after_settle_or_stop():
    s = sampler()
    assert not s.command_timed_out(NOW + 100.0, 0.5)        # holding: never
    s.accept(command(point(1.0, Q0 + 0.1)), NOW)
    assert not s.command_timed_out(NOW + 1.4, 0.5)
    assert s.command_timed_out(NOW + 1.6, 0.5)
    assert not s.command_timed_out(NOW + 1.6, 0.0)          # 0: off
    s.settle()
    assert not s.command_timed_out(NOW + 1.6, 0.5)
    s.accept(command(point(1.0, Q0)), NOW + 2.0)
    s.stop(NOW + 2.5)
    assert not s.command_timed_out(NOW + 10.0, 0.5)


# ---------------------------------------------------------------------- query refusals

def test_query_refusals_carry_the_held_reference_after_the_end_and_none_before_the_start():
    s = sampler()
    with pytest.raises(OutsideTrajectory) as holding:
        s.query(NOW + 1.0)
    np.testing.assert_array_equal(holding.value.reference.positions, Q0)
    s.accept(command(point(1.0, Q0 + 0.2), start=NOW + 1.0), NOW)
    with pytest.raises(OutsideTrajectory) as before:
        s.query(NOW + 0.5)
    assert before.value.reference is None
    with pytest.raises(OutsideTrajectory) as after:
        s.query(NOW + 2.5)
    np.testing.assert_allclose(after.value.reference.positions, Q0 + 0.2)
    assert not after.value.reference.velocities.any()


# ---------------------------------------------------------------------- acceleration tolerances

def test_acceleration_estimate_is_the_difference_of_velocities_between_states():
    e = AccelerationEstimate()
    assert e.update(1.0, [0.0, 1.0]) is None
    np.testing.assert_allclose(e.update(1.5, [0.5, 0.0]), [1.0, -2.0])
    np.testing.assert_allclose(e.update(1.5, [9.0, 9.0]), [1.0, -2.0])  # same state time
    assert e.update(1.0, [0.0, 0.0]) is None                              # time went back


def monitor(path=None, goal=None, end=2.0):
    n = len(JOINTS)
    return TrajectoryGoalMonitor(JOINTS, np.zeros(n), 0.0, end,
                                 path or StateTolerances.uniform(n),
                                 goal or StateTolerances.uniform(n), 0.5)


def reference(acceleration=0.0):
    z = np.zeros(len(JOINTS))
    return Reference(z, z, np.full(len(JOINTS), acceleration))


def test_path_acceleration_tolerance_is_checked_against_the_measured_acceleration():
    m = monitor(path=StateTolerances(np.zeros(3), np.zeros(3), np.array([0.0, 0.5, 0.0])))
    z = np.zeros(3)
    assert m.check(0.0, z, z, reference()) is None
    assert m.check(0.1, z, np.array([0.0, 0.04, 0.0]), reference()) is None   # 0.4 rad/s²
    outcome = m.check(0.2, z, np.array([9.0, 0.1, 0.0]), reference())         # 0.6 on j2
    assert outcome.code == PATH_TOLERANCE_VIOLATED
    assert "joint 'j2' acceleration error" in outcome.text
    # a joint whose tolerance is 0 (or erased by -1) is not checked: j1's 90 rad/s² passed


def test_goal_acceleration_tolerance_waits_for_rest_then_succeeds_or_times_out():
    m = monitor(goal=StateTolerances(np.zeros(3), np.zeros(3), np.full(3, 0.1)))
    z = np.zeros(3)
    assert m.check(2.0, z, z, reference()) is None                  # no estimate yet
    assert m.check(2.1, z, np.full(3, 0.05), reference()) is None   # 0.5 rad/s²
    assert m.check(2.2, z, np.full(3, 0.05), reference()).code == SUCCESSFUL
    late = monitor(goal=StateTolerances(np.zeros(3), np.zeros(3), np.full(3, 0.1)))
    late.check(2.0, z, z, reference())
    assert late.check(2.6, z, np.full(3, 0.6), reference()).code == GOAL_TOLERANCE_VIOLATED


# ---------------------------------------------------------------------- with speed scaling

def test_under_speed_scaling_the_stop_is_continuous_and_cmd_timeout_counts_trajectory_time():
    s = sampler(max_deceleration_on_cancel=[2.0, 2.0, 2.0])
    s.accept(command(point(2.0, Q0 + 1.0, [0.5] * 3), point(4.0, Q0 + 2.0, [0.0] * 3)), NOW)
    s.set_speed_scaling_factor(0.5, NOW)            # reached at NOW + 0.25 (rate 2 s⁻¹)
    before = s.sample(NOW + 1.0)
    assert before.speed_scaling_factor == 0.5
    s.stop(NOW + 1.0)
    after = s.sample(NOW + 1.0)
    np.testing.assert_allclose(after.positions, before.positions, atol=1e-12)
    np.testing.assert_allclose(after.velocities, before.velocities, atol=1e-12)
    t = np.arange(NOW + 1.0, NOW + 5.0, 0.01)
    qdd = np.array([s.sample(x).accelerations for x in t])
    assert np.all(np.abs(qdd) <= 2.0 + 1e-9)
    assert not s.sample(NOW + 5.0).velocities.any()
    timed = sampler()
    timed.accept(command(point(1.0, Q0 + 0.1)), NOW)
    timed.set_speed_scaling_factor(0.5, NOW)        # 1 s of trajectory ≈ 2 s of clock
    assert not timed.command_timed_out(NOW + 2.0, 0.2)
    assert timed.command_timed_out(NOW + 2.8, 0.2)
