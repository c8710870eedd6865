"""Continuous joints (URDF `continuous`, or `robot.continuous` of a DH model), as
joint_trajectory_controller's angle wraparound since Jazzy: the position error is wrapped
into (−π, π] and a new trajectory's first segment starts from the turn of the current
reference nearest its first point, so a goal across ±π takes the short way."""

import math

import numpy as np
import pytest

from robot_dynamics.model import RobotModel
from robot_dynamics.trajectories.sampler import (JointTrajectorySampler, nearest_turn,
                                                 shortest_angle, TrajectoryCommand,
                                                 TrajectoryPoint)
from robot_dynamics.trajectories.goal import (GOAL_TOLERANCE_VIOLATED, StateTolerances, SUCCESSFUL,
                                              TrajectoryGoalMonitor)
from robot_dynamics.model.urdf import model_from_urdf, model_to_urdf

TWO_PI = 2.0 * math.pi
JOINTS = ('j1', 'j2')


def test_shortest_angle_is_in_minus_pi_to_pi_and_the_same_angle():
    x = np.linspace(-50.0, 50.0, 10001)
    wrapped = shortest_angle(x)
    assert np.all(wrapped > -math.pi) and np.all(wrapped <= math.pi)
    turns = (x - wrapped) / TWO_PI
    np.testing.assert_allclose(turns, np.round(turns), atol=1e-9)
    assert shortest_angle(math.pi) == pytest.approx(math.pi)
    assert shortest_angle(-math.pi) == pytest.approx(math.pi)
    assert shortest_angle(-6.0) == pytest.approx(TWO_PI - 6.0)


@pytest.mark.parametrize('start, target, travel', [
    (3.0, -3.0, TWO_PI - 6.0),          # across +pi: 0.28 rad forwards, not 6 back
    (-3.0, 3.0, -(TWO_PI - 6.0)),
    (0.1, 0.1 + 4.0 * math.pi, 0.0),    # two turns ahead: already there
    (0.0, 2.0, 2.0),
    (0.0, math.pi, math.pi),            # half a turn: the way target - start says
    (0.0, -math.pi, -math.pi),
    (7.0, 0.5, 0.5 - (7.0 - TWO_PI)),
])
def test_nearest_turn_gives_the_short_way(start, target, travel):
    moved = nearest_turn(start, target)
    assert target - moved == pytest.approx(travel, abs=1e-12)
    turns = (moved - start) / TWO_PI
    assert turns == pytest.approx(round(turns), abs=1e-12)


def sampler(continuous=(False, True), **options):
    s = JointTrajectorySampler(JOINTS, continuous=list(continuous), **options)
    s.hold([0.2, 3.0], 0.0)
    return s


def goal(positions, seconds=1.0, joints=JOINTS):
    return TrajectoryCommand(tuple(joints), (TrajectoryPoint(seconds, tuple(positions)),))


def travel(s, t0, t1, joint, samples=201):
    q = np.array([s.sample(t).positions[joint] for t in np.linspace(t0, t1, samples)])
    return q, float(np.sum(np.abs(np.diff(q))))


@pytest.mark.parametrize('interpolation', ['splines', 'none'])
def test_a_goal_across_pi_takes_0_28_rad_not_6(interpolation):
    s = sampler(interpolation_method=interpolation)
    s.accept(goal([0.2, -3.0]), 0.0)
    q, distance = travel(s, 0.0, 1.5, 1)
    assert distance == pytest.approx(TWO_PI - 6.0, rel=1e-6)
    assert q[-1] == pytest.approx(-3.0)             # the trajectory's own angle
    assert s.goal_positions[1] == -3.0
    # the start moved by one turn: the same angle as the held 3.0
    assert q[0] == pytest.approx(3.0 - TWO_PI)
    # the same goal on a joint that is not continuous: the long way
    plain = sampler(continuous=(False, False), interpolation_method=interpolation)
    plain.accept(goal([0.2, -3.0]), 0.0)
    assert travel(plain, 0.0, 1.5, 1)[1] == pytest.approx(6.0, rel=1e-6)


def test_only_the_first_segment_is_wrapped_and_only_for_named_continuous_joints():
    s = sampler(continuous=(True, True), allow_partial_joints_goal=True)
    # a partial goal: j1 (continuous, not named) keeps its reference; j2 moves the short way
    s.accept(goal([-3.0], joints=('j2',)), 0.0)
    q1, distance1 = travel(s, 0.0, 1.5, 0)
    assert distance1 == 0.0 and q1[0] == 0.2
    # later points are followed as given, a whole turn included (as JTC)
    s = sampler()
    s.accept(TrajectoryCommand(JOINTS, (TrajectoryPoint(1.0, (0.2, -3.0)),
                                        TrajectoryPoint(3.0, (0.2, -3.0 + TWO_PI)))), 0.0)
    q, _ = travel(s, 0.0, 3.5, 1)
    assert q[-1] - q[0] == pytest.approx(TWO_PI - 6.0 + TWO_PI)     # 0.28 rad, then a turn


def test_at_goal_compares_continuous_joints_modulo_a_turn():
    s = sampler()
    s.accept(goal([0.2, -3.0]), 0.0)
    zero = np.zeros(2)
    for q2 in (-3.0, -3.0 + TWO_PI, -3.0 - 2 * TWO_PI, 3.2831853):
        assert s.at_goal([0.2, q2], zero, 2.0, 0.01, 0.01), q2
    assert not s.at_goal([0.2, 3.0], zero, 2.0, 0.01, 0.01)
    # per-joint tolerances (the array path) too
    assert s.at_goal([0.2, -3.0 + TWO_PI], zero, 2.0, np.array([0.01, 0.01]), 0.01)
    assert not s.at_goal([0.2, 3.0], zero, 2.0, np.array([0.01, 0.01]), 0.01)
    plain = sampler(continuous=(False, False))
    plain.accept(goal([0.2, -3.0]), 0.0)
    assert not plain.at_goal([0.2, -3.0 + TWO_PI], zero, 2.0, 0.01, 0.01)


def test_near_puts_the_reference_within_half_a_turn_of_the_measured_position():
    s = sampler()
    q = np.array([5.0, 3.1])
    moved = s.near(np.array([-1.0, -3.1]), q)
    assert moved[0] == -1.0                         # not continuous: as it was
    assert moved[1] - q[1] == pytest.approx(TWO_PI - 6.2)
    np.testing.assert_allclose(s.position_error([-1.0, -3.1], q), [-6.0, TWO_PI - 6.2])
    with pytest.raises(ValueError, match='continuous'):
        JointTrajectorySampler(JOINTS, continuous=[True])


def test_the_goal_monitor_wraps_the_goal_error_of_continuous_joints():
    tolerances = StateTolerances(np.full(2, 0.01), np.full(2, 0.01), np.zeros(2))
    zero = np.zeros(2)
    monitor = TrajectoryGoalMonitor(JOINTS, [0.2, -3.0], 0.0, 1.0, StateTolerances.uniform(2),
                                    tolerances, 0.5, continuous=[False, True])
    reference = type('R', (), {'positions': zero, 'velocities': zero,
                               'accelerations': zero})()
    assert monitor.check(1.1, np.array([0.2, -3.0 + TWO_PI]), zero,
                         reference).code == SUCCESSFUL
    plain = TrajectoryGoalMonitor(JOINTS, [0.2, -3.0], 0.0, 1.0, StateTolerances.uniform(2),
                                  tolerances, 0.5)
    assert plain.check(1.1, np.array([0.2, -3.0 + TWO_PI]), zero, reference) is None
    assert plain.check(2.0, np.array([0.2, -3.0 + TWO_PI]), zero,
                       reference).code == GOAL_TOLERANCE_VIOLATED


# ---------------------------------------------------------------------- the models

def dh_block(**extra):
    block = {'dh_convention': 'standard', 'joint_types': ['revolute', 'prismatic', 'revolute'],
             'a': [0.3, 0.0, 0.2], 'alpha': [0.0, 0.5, 0.0], 'd': [0.1, 0.0, 0.0],
             'theta': [0.0, 0.0, 0.0], 'mass': [1.0, 1.0, 1.0], 'com': [0.1, 0.0, 0.0] * 3,
             'inertia': [0.01, 0.0, 0.0, 0.01, 0.0, 0.01] * 3}
    block.update(extra)
    return block


def test_dh_models_take_robot_continuous_and_give_it_back():
    model = RobotModel.from_params(dh_block(continuous=[False, False, True]))
    assert model.continuous.tolist() == [False, False, True]
    assert model.to_params()['continuous'] == [False, False, True]
    assert RobotModel.from_params(model.to_params()).continuous.tolist() == [False, False, True]
    assert not RobotModel.from_params(dh_block()).continuous.any()
    assert 'continuous' not in RobotModel.from_params(dh_block()).to_params()
    assert model.with_payload(1.0).continuous.tolist() == [False, False, True]


@pytest.mark.parametrize('extra, field', [
    ({'continuous': [False, True, False]}, r'robot\.continuous\[1\].*prismatic'),
    ({'continuous': [True, False, False], 'position_min': [-1.0, -1.0, -1.0]},
     r'robot\.continuous\[0\].*position limits'),
    ({'continuous': [True, False]}, r'robot\.continuous: expected 3'),
    ({'continuous': [1, 0, 0]}, r'robot\.continuous\[0\]: expected true or false'),
    ({'continuous': 'true'}, r'robot\.continuous: expected 3'),
])
def test_a_bad_robot_continuous_is_refused_naming_the_field(extra, field):
    with pytest.raises(ValueError, match=field):
        RobotModel.from_params(dh_block(**extra))


URDF = '''<robot name="r">
  <link name="base"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="l1"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="2"/></joint>
  <link name="l1"><inertial><origin xyz="0.1 0 0"/><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <joint name="wrist" type="continuous"><parent link="l1"/><child link="l2"/>
    <origin xyz="0.3 0 0"/><axis xyz="0 0 1"/><limit effort="5" velocity="3"/></joint>
  <link name="l2"><inertial><origin xyz="0.05 0 0"/><mass value="0.5"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
</robot>'''


def test_the_urdf_loader_marks_continuous_joints():
    model = model_from_urdf(URDF)
    assert model.joint_names == ('shoulder', 'wrist')
    assert model.continuous.tolist() == [False, True]
    # position limits given for it on top of the URDF: no longer turns without end
    limited = model_from_urdf(URDF, position_min=[-1.0, -3.0], position_max=[1.0, 3.0])
    assert limited.continuous.tolist() == [False, False]
    # a DH model's continuous joint is exported as a URDF continuous joint and read back
    # (as is any revolute joint without position limits: a URDF has no other way to say it)
    dh = RobotModel.from_params(dh_block(continuous=[False, False, True],
                                         position_min=[-1.0, -0.5, -math.inf],
                                         position_max=[1.0, 0.5, math.inf]))
    assert model_from_urdf(model_to_urdf(dh)).continuous.tolist() == [False, False, True]
    unlimited = RobotModel.from_params(dh_block())
    assert model_from_urdf(model_to_urdf(unlimited)).continuous.tolist() == [True, False, True]
