"""The outcome of a FollowJointTrajectory goal, without ROS (robot_dynamics.trajectory_goal):
tolerance resolution as joint_trajectory_controller does it, the result codes of refused
trajectories, and the monitor's decisions on constructed states."""

import math

import numpy as np
import pytest

from robot_dynamics.trajectories.profiles import sample_profile
from robot_dynamics.trajectories.sampler import (JointTrajectorySampler, Reference,
                                                 TrajectoryCommand, TrajectoryPoint,
                                                 TrajectoryRejected)
from robot_dynamics.trajectories.goal import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL,
                                              INVALID_JOINTS, joint_tolerances, JointTolerance,
                                              OLD_HEADER_TIMESTAMP, PATH_TOLERANCE_VIOLATED,
                                              rejection_code, resolve_tolerance, StateTolerances,
                                              SUCCESSFUL, TrajectoryGoalMonitor)

JOINTS = ('a', 'b', 'c')


def test_result_codes_are_control_msgs_values():
    control_msgs = pytest.importorskip('control_msgs.action')
    result = control_msgs.FollowJointTrajectory.Result
    assert (SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP,
            PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED) == (
        result.SUCCESSFUL, result.INVALID_GOAL, result.INVALID_JOINTS,
        result.OLD_HEADER_TIMESTAMP, result.PATH_TOLERANCE_VIOLATED,
        result.GOAL_TOLERANCE_VIOLATED)


@pytest.mark.parametrize('default, value, expected', [
    (0.2, 0.5, 0.5),        # > 0 replaces the default
    (0.2, 0.0, 0.2),        # 0 keeps it
    (0.2, -1.0, 0.0),       # -1 erases it: not checked
    (0.0, 0.0, 0.0),
])
def test_goal_tolerance_value_replaces_keeps_or_erases_the_default(default, value, expected):
    assert resolve_tolerance(default, value, 'f') == expected


@pytest.mark.parametrize('value', [-2.0, -0.5, math.nan, math.inf, 'x'])
def test_other_tolerance_values_are_refused_naming_the_field(value):
    with pytest.raises(TrajectoryRejected, match=r'^goal_tolerance\[1\]\.velocity'):
        resolve_tolerance(0.1, value, 'goal_tolerance[1].velocity')


def test_joint_tolerances_apply_per_joint_and_component():
    defaults = StateTolerances.uniform(3, position=0.01, velocity=0.02)
    entries = [JointTolerance('c', position=0.5), JointTolerance('a', velocity=-1.0,
                                                                 acceleration=3.0)]
    t = joint_tolerances(JOINTS, defaults, entries, 'goal_tolerance')
    np.testing.assert_array_equal(t.position, [0.01, 0.01, 0.5])
    np.testing.assert_array_equal(t.velocity, [0.0, 0.02, 0.02])
    np.testing.assert_array_equal(t.acceleration, [3.0, 0.0, 0.0])
    np.testing.assert_array_equal(defaults.position, [0.01] * 3)     # not changed


@pytest.mark.parametrize('entries, message', [
    ([JointTolerance('z', 0.1)], r"path_tolerance\[0\]\.name: unknown joint 'z'"),
    ([JointTolerance('a', 0.1), JointTolerance('a', 0.2)],
     r"path_tolerance\[1\]\.name: joint 'a' given twice"),
    ([JointTolerance('b', 0.1), JointTolerance('c', -3.0)],
     r"path_tolerance\[1\]\.position \(joint 'c'\)"),
])
def test_bad_tolerance_lists_are_refused_naming_entry_and_joint(entries, message):
    with pytest.raises(TrajectoryRejected, match=message):
        joint_tolerances(JOINTS, StateTolerances.uniform(3), entries, 'path_tolerance')


def sampler():
    s = JointTrajectorySampler(JOINTS, position_min=[-1.0] * 3, position_max=[1.0] * 3)
    s.hold([0.0, 0.0, 0.0], 10.0)
    return s


@pytest.mark.parametrize('command, code', [
    (TrajectoryCommand(('a', 'b', 'x'), (TrajectoryPoint(1.0, (0.1, 0.1, 0.1)),)),
     INVALID_JOINTS),
    (TrajectoryCommand(('a', 'b'), (TrajectoryPoint(1.0, (0.1, 0.1)),)), INVALID_JOINTS),
    (TrajectoryCommand((), (TrajectoryPoint(1.0, ()),)), INVALID_JOINTS),
    (TrajectoryCommand(JOINTS, (TrajectoryPoint(1.0, (0.1, 0.1, 0.1)),), start_time=5.0),
     OLD_HEADER_TIMESTAMP),
    (TrajectoryCommand(JOINTS, (TrajectoryPoint(1.0, (0.1, 2.0, 0.1)),)), INVALID_GOAL),
    (TrajectoryCommand(JOINTS, (TrajectoryPoint(1.0, (0.1, math.nan, 0.1)),)), INVALID_GOAL),
    (TrajectoryCommand(JOINTS, (TrajectoryPoint(1.0, (0.1,) * 3),
                                TrajectoryPoint(1.0, (0.2,) * 3))), INVALID_GOAL),
])
def test_each_sampler_rejection_maps_to_its_result_code(command, code):
    with pytest.raises(TrajectoryRejected) as error:
        sampler().accept(command, 10.0)
    assert rejection_code(error.value) == code


def reference(q, qd):
    return Reference(np.asarray(q, float), np.asarray(qd, float), np.zeros(3))


def monitor(path=None, goal=None, goal_time=0.0):
    return TrajectoryGoalMonitor(
        JOINTS, [0.3, -0.2, 0.1], start_time=10.0, end_time=12.0,
        path=path or StateTolerances.uniform(3),
        goal=goal or StateTolerances.uniform(3, position=0.01, velocity=0.01),
        goal_time_tolerance=goal_time)


def test_path_tolerance_is_checked_only_while_the_trajectory_runs():
    m = monitor(path=StateTolerances(np.array([0.0, 0.05, 0.0]), np.zeros(3), np.zeros(3)))
    ref = reference([0.2, 0.0, 0.0], [0.0, 0.0, 0.0])
    off = np.array([0.2, 0.06, 0.0])        # joint b 0.06 from its reference
    assert m.check(9.9, off, np.zeros(3), ref) is None           # before the start
    outcome = m.check(11.0, off, np.zeros(3), ref)
    assert outcome.code == PATH_TOLERANCE_VIOLATED
    assert "joint 'b' position error -0.06" in outcome.text
    assert m.check(11.0, off - [0, 0.02, 0], np.zeros(3), ref) is None   # 0.04 inside
    assert m.check(11.0, [5.0, 0.0, 5.0], np.zeros(3), ref) is None      # a, c not checked


def test_velocity_path_tolerance_and_nan_error_are_violations():
    m = monitor(path=StateTolerances(np.zeros(3), np.array([0.0, 0.0, 0.1]), np.zeros(3)))
    ref = reference(np.zeros(3), [0.0, 0.0, 0.5])
    assert m.check(11.0, np.zeros(3), [0.0, 0.0, 0.45], ref) is None
    assert m.check(11.0, np.zeros(3), [0.0, 0.0, 0.3], ref).code == PATH_TOLERANCE_VIOLATED
    assert m.check(11.0, np.zeros(3), [0.0, 0.0, math.nan],
                   ref).code == PATH_TOLERANCE_VIOLATED


def test_success_needs_every_joint_within_goal_tolerance_and_stopped():
    m = monitor()
    goal = np.array([0.3, -0.2, 0.1])
    rest = reference(goal, np.zeros(3))
    assert m.check(11.9, goal, np.zeros(3), rest) is None         # before the last point
    assert m.check(12.0, goal + [0, 0.02, 0], np.zeros(3), rest) is None
    assert m.check(12.0, goal, [0.0, 0.0, 0.02], rest) is None      # not stopped
    outcome = m.check(12.0, goal + [0.0, 0.009, -0.009], [0.005, 0, 0], rest)
    assert outcome.code == SUCCESSFUL


def test_goal_tolerance_violated_only_after_goal_time_tolerance():
    goal = np.array([0.3, -0.2, 0.1])
    rest = reference(goal, np.zeros(3))
    off = goal + [0.0, 0.0, 0.05]
    m = monitor(goal_time=0.5)
    assert m.check(12.4, off, np.zeros(3), rest) is None
    outcome = m.check(12.6, off, np.zeros(3), rest)
    assert outcome.code == GOAL_TOLERANCE_VIOLATED
    assert "joint 'c' position error" in outcome.text
    assert monitor(goal_time=0.0).check(1e6, off, np.zeros(3), rest) is None   # for ever


def test_monitor_on_a_sampled_profile_succeeds_when_the_state_follows_the_reference():
    s = JointTrajectorySampler(JOINTS)
    s.hold([0.0, 0.0, 0.0], 0.0)
    s.accept(sample_profile('quintic', [0.0] * 3, [0.3, -0.2, 0.1], 2.0, 20, JOINTS), 0.0)
    tight = StateTolerances.uniform(3, position=1e-9, velocity=1e-9)
    m = TrajectoryGoalMonitor(JOINTS, s.goal_positions, 0.0, 2.0, tight,
                              StateTolerances.uniform(3, 0.01, 0.01), 0.0)
    for t in np.arange(0.0, 2.0, 0.01):
        ref = s.sample(t)
        assert m.check(t, ref.positions, ref.velocities, ref) is None
    end = s.sample(2.0)
    assert m.check(2.0, end.positions, end.velocities, end).code == SUCCESSFUL
