"""JTC parity over real DDS (doc/action.md): the `~/query_state` service
(control_msgs/srv/QueryTrajectoryState) and the per-joint `constraints.<joint>.trajectory` /
`.goal` parameters, loaded from a joint_trajectory_controller-style parameter file and set
live as `ros2 param set` sets them (the node's SetParameters service).

The loop is the shipped lock-step one (config/sim.yaml: plant and controller on simulated
time, as fast as the CPU allows), so nothing depends on CPU load: every wait is for an event
or for simulated time. Each test builds its goals from the measured position and puts back
the parameters it changed. The module skips only when control_msgs cannot be imported.
"""

import math

import numpy as np
import pytest

pytest.importorskip('control_msgs.srv', reason='control_msgs is not built in this environment '
                                               '(tools/dev.py builds it; needs cmake and a C '
                                               'compiler)')
from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Duration, Time  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import JointTolerance  # noqa: E402
from control_msgs.srv import QueryTrajectoryState  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from ros_testing import (call_service, double, doubles, PUMA, RosHarness, SIM,  # noqa: E402,I100
                          string)
from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.managed_controller import ManagedComputedTorqueController  # noqa
from robot_dynamics.nodes.plant import PlantSimulator  # noqa: E402
from robot_dynamics.nodes.common.ros_params import ConfigurationError  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'
Result = FollowJointTrajectory.Result
# What a joint_trajectory_controller user's parameter file says (JTC's nested form).
JTC_PARAMETERS = """\
computed_torque_controller:
  ros__parameters:
    constraints:
      joint_2:
        trajectory: 0.001
        goal: 0.0
"""
PATH_TOLERANCE_2 = 0.001     # constraints.joint_2.trajectory above


def stamp(seconds):
    nanoseconds = int(round(seconds * 1e9))
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def duration(seconds):
    nanoseconds = int(round(seconds * 1e9))
    return Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def minimum_jerk(q0, q1, T, t):
    """(q, q̇, q̈) at t of the quintic rest-to-rest move q0 -> q1 in T s, written out:
    q0 + Δ (10 s³ − 15 s⁴ + 6 s⁵), s = t / T."""
    s = t / T
    delta = np.asarray(q1) - np.asarray(q0)
    return (np.asarray(q0) + delta * (10 * s**3 - 15 * s**4 + 6 * s**5),
            delta * (30 * s**2 - 60 * s**3 + 30 * s**4) / T,
            delta * (60 * s - 180 * s**2 + 120 * s**3) / T**2)


def minimum_jerk_goal(q0, q1, T, start=0.0, points=5):
    """A goal whose points (positions, velocities, accelerations) lie on `minimum_jerk`,
    the first at time_from_start 0 (it replaces the start state), stamped `start` [s]."""
    trajectory = JointTrajectory(joint_names=JOINTS)
    trajectory.header.stamp = stamp(start)
    for t in np.linspace(0.0, T, points):
        q, qd, qdd = minimum_jerk(q0, q1, T, t)
        trajectory.points.append(JointTrajectoryPoint(
            positions=q.tolist(), velocities=qd.tolist(), accelerations=qdd.tolist(),
            time_from_start=duration(t)))
    return FollowJointTrajectory.Goal(trajectory=trajectory)


class Operator(Node):
    """What MoveIt and a ROS user call: the action, ~/query_state, `ros2 param set`."""

    def __init__(self, context):
        super().__init__('jtc_parity_client', context=context)
        self.action = ActionClient(self, FollowJointTrajectory,
                                   f'{CONTROLLER}/follow_joint_trajectory')
        self.query = self.create_client(QueryTrajectoryState, f'{CONTROLLER}/query_state')
        self.parameters = self.create_client(SetParameters, f'{CONTROLLER}/set_parameters')

    def ready(self):
        return (self.action.server_is_ready() and self.query.service_is_ready()
                and self.parameters.service_is_ready())


RESEND_AFTER = 1.0   # s of wall time: a retry, not a limit


def call(harness, client, request, what):
    """The response; every request here is idempotent (a query, or setting a parameter to a
    value), so it is sent again every RESEND_AFTER s until answered."""
    return call_service(harness, client, request, what, RESEND_AFTER)


def query(harness, operator, t):
    return call(harness, operator.query, QueryTrajectoryState.Request(time=stamp(t)),
                'the query_state response')


def param_set(harness, operator, *parameters):
    """As `ros2 param set` (each parameter on its own): the SetParametersResult list."""
    return [call(harness, operator.parameters, SetParameters.Request(parameters=[p]),
                 f'the set_parameters response for {p.name}').results[0]
            for p in parameters]


def accepted(harness, operator, goal):
    future = operator.action.send_goal_async(goal)
    harness.spin_until(future.done, 'the goal response')
    handle = future.result()
    assert handle.accepted
    return handle


def outcome(harness, handle):
    future = handle.get_result_async()
    harness.spin_until(future.done, 'the result')
    return future.result().status, future.result().result


@pytest.fixture(scope='module')
def loop(tmp_path_factory):
    parameters = tmp_path_factory.mktemp('jtc') / 'jtc_constraints.yaml'
    parameters.write_text(JTC_PARAMETERS)
    harness = RosHarness(PUMA, SIM, str(parameters),
                         ros_args=['-p', 'real_time_factor:=0.0', '-p', 'integration_step:=0.002'])
    plant = harness.add(PlantSimulator(context=harness.context))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
    operator = harness.add(Operator(harness.context))
    harness.spin_until(lambda: operator.ready() and controller._ready,
                       'the action server, ~/query_state and the loop')
    yield harness, plant, controller, operator
    harness.close()


def settle(loop, seconds):
    harness, plant = loop[0], loop[1]
    end = plant.sim_time + seconds
    harness.spin_until(lambda: plant.sim_time >= end, f'{seconds} s of simulated time')


# ---------------------------------------------------------------------- ~/query_state

def test_query_state_answers_the_trajectory_sent_and_refuses_outside_it_while_a_goal_runs(loop):
    harness, plant, controller, operator = loop
    q0 = np.asarray(plant.q).copy()
    q1 = q0 + [0.2, -0.15, 0.1, 0.3, -0.2, 0.25]
    T = 1.0
    start = plant.sim_time + 0.3          # the controller's clock: simulated time
    goal = minimum_jerk_goal(q0, q1, T, start)
    # joint_2's path tolerance from the parameter file is not this test's subject
    goal.path_tolerance = [JointTolerance(name='joint_2', position=-1.0)]
    handle = accepted(harness, operator, goal)

    def assert_answers(times):
        for t in times:
            response = query(harness, operator, t)
            assert response.success, response.message
            assert list(response.name) == JOINTS
            expected = minimum_jerk(q0, q1, T, t - start)
            for field, values in zip(('position', 'velocity', 'acceleration'), expected):
                np.testing.assert_allclose(getattr(response, field), values, atol=1e-9,
                                           err_msg=f'{field} at {t - start:.3f} s')

    assert_answers(start + np.linspace(0.0, T, 9, endpoint=False))     # all of it, at once
    for t, words in ((start - 0.05, 'before the start'), (start + T, 'last point'),
                     (start + T + 1.0, 'last point'), (0.0, 'before the start')):
        response = query(harness, operator, t)
        assert not response.success
        assert words in response.message and 'controller clock' in response.message
        # As JTC's refusals: the measured state before the start (the arm rests at q0;
        # no acceleration state), the reference held at the last point after it.
        if words == 'before the start':
            np.testing.assert_allclose(response.position, q0, atol=1e-3)
            np.testing.assert_allclose(response.velocity, np.zeros(6), atol=1e-2)
            assert list(response.acceleration) == []
        else:
            np.testing.assert_allclose(response.position, q1, atol=1e-9)
            np.testing.assert_allclose(response.velocity, np.zeros(6), atol=1e-9)
            np.testing.assert_allclose(response.acceleration, np.zeros(6), atol=1e-9)
    harness.spin_until(lambda: plant.sim_time > start + 0.4, 'the goal under way')
    now = plant.sim_time
    assert_answers([start + 0.1, now, now + 0.05, start + 0.95])       # past, now, ahead
    status, result = outcome(harness, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert np.all(np.abs(np.asarray(plant.q) - q1) <= 0.01)
    assert_answers([start + 0.5])     # as JTC: the finished trajectory is still answered


def test_query_state_refuses_until_ready_inactive_and_while_holding():
    # state_timeout 0: the states stop after the first; the controller keeps holding
    harness = RosHarness(PUMA, overrides=['state_timeout:=0.0'])
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        operator = harness.add(Operator(harness.context))
        harness.spin_until(operator.query.service_is_ready, '~/query_state')
        response = query(harness, operator, 1.0)
        assert not response.success
        assert 'not all controlled joints seen on /joint_states' in response.message
        assert list(response.name) == JOINTS
        assert list(response.position) == []        # no state to give yet
        states = operator.create_publisher(JointState, 'joint_states', 10)
        harness.spin_until(lambda: states.get_subscription_count() > 0, 'the subscription')

        def held():
            msg = JointState(name=JOINTS, position=[0.1] * 6, velocity=[0.0] * 6)
            msg.header.stamp = operator.get_clock().now().to_msg()
            states.publish(msg)
            return controller._ready
        harness.spin_until(held, 'the controller holding')
        response = query(harness, operator, controller._now())
        assert not response.success and 'holding' in response.message
        # as JTC's refusal while holding: the held reference
        assert list(response.position) == [0.1] * 6
        assert list(response.velocity) == [0.0] * 6
        assert list(response.acceleration) == [0.0] * 6
    finally:
        harness.close()
    harness = RosHarness(PUMA)
    try:
        managed = harness.add(ManagedComputedTorqueController(context=harness.context))
        operator = harness.add(Operator(harness.context))
        managed.trigger_configure()
        harness.spin_until(operator.query.service_is_ready, '~/query_state')
        response = query(harness, operator, 1.0)
        assert not response.success and 'inactive' in response.message
        assert list(response.position) == []        # JTC inactive: nothing either
        assert any(s.srv_name.endswith('/query_state') for s in managed.services)
        managed.trigger_cleanup()
        assert not any(s.srv_name.endswith('/query_state') for s in managed.services)
    finally:
        harness.close()


# ---------------------------------------------------------------------- constraints.<joint>.*

def test_constraints_are_declared_per_joint_and_read_from_a_jtc_parameter_file(loop):
    controller = loop[2]
    for joint in JOINTS:
        for kind in ('trajectory', 'goal'):
            expected = PATH_TOLERANCE_2 if (joint, kind) == ('joint_2', 'trajectory') else 0.0
            assert controller.get_parameter(f'constraints.{joint}.{kind}').value == expected


def test_constraints_trajectory_aborts_a_goal_without_path_tolerance_when_the_joint_lags(loop):
    harness, plant, controller, operator = loop
    q0 = np.asarray(plant.q).copy()
    zero = np.zeros(6)
    gravity = controller.law.effort(q0, zero, q0, zero, zero)
    effort_max = [float(v) for v in controller.model.effort_max]
    limits = list(effort_max)
    limits[1] = min(abs(float(gravity[1])) + 20.0, effort_max[1])   # holds, cannot sprint
    # the feasibility check would refuse this goal at once (test_feasibility.py): off, so
    # that the goal runs and lags
    results = param_set(harness, operator, doubles('effort_limits', limits),
                        boolean('feasibility.check', False))
    assert all(result.successful for result in results), results
    try:
        # joint 2 alone, 0.4 rad in 0.3 s: ~26 rad/s² at its peak, far beyond 20 N m spare
        q1 = q0 + [0.0, 0.4, 0.0, 0.0, 0.0, 0.0]
        harness.spin_until(lambda: np.allclose(controller.effort_limits, limits),
                           'the new effort limits')
        handle = accepted(harness, operator, minimum_jerk_goal(q0, q1, 0.3))
        status, result = outcome(harness, handle)
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error_code == Result.PATH_TOLERANCE_VIOLATED, result.error_string
        assert "joint 'joint_2' position error" in result.error_string
        assert f'exceeds {PATH_TOLERANCE_2:g}' in result.error_string
    finally:
        param_set(harness, operator, doubles('effort_limits', effort_max),
                  boolean('feasibility.check', True))
        settle(loop, 1.0)


def boolean(name, value):
    from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
    return ParameterMsg(name=name, value=ParameterValue(type=ParameterType.PARAMETER_BOOL,
                                                        bool_value=value))


def test_constraints_goal_decides_the_outcome_and_a_live_change_applies_to_the_next_goal(loop):
    harness, plant, controller, operator = loop
    erase_path = [JointTolerance(name='joint_2', position=-1.0)]

    def small_move():
        q0 = np.asarray(plant.q).copy()
        target = q0 + [0.05, -0.05, 0.05, -0.05, 0.05, -0.05]
        goal = minimum_jerk_goal(q0, target, 0.5)
        goal.path_tolerance = erase_path
        return goal, target

    results = param_set(harness, operator, double('constraints.goal_time', 0.3),
                        double('constraints.joint_3.goal', 1e-12))
    assert all(r.successful for r in results), [r.reason for r in results]
    try:
        goal, _ = small_move()
        status, result = outcome(harness, accepted(harness, operator, goal))
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error_code == Result.GOAL_TOLERANCE_VIOLATED, result.error_string
        assert "joint 'joint_3' position error" in result.error_string
        assert 'exceeds 1e-12' in result.error_string
        # The scalar default now unreachable, the per-joint values where > 0 decide.
        results = param_set(harness, operator, double('constraints.goal_tolerance', 1e-12),
                            double('constraints.goal_time', 2.0),
                            *[double(f'constraints.{j}.goal', 0.02) for j in JOINTS])
        assert all(r.successful for r in results), [r.reason for r in results]
        goal, target = small_move()
        status, result = outcome(harness, accepted(harness, operator, goal))
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        assert np.all(np.abs(np.asarray(plant.q) - target) <= 0.02)
    finally:
        param_set(harness, operator, double('constraints.goal_tolerance', 0.01),
                  double('constraints.goal_time', 0.0),
                  *[double(f'constraints.{j}.goal', 0.0) for j in JOINTS])


@pytest.mark.parametrize('parameter', [double('constraints.joint_2.trajectory', -0.5),
                                       double('constraints.joint_5.goal', -1.0),
                                       double('constraints.joint_1.goal', math.nan),
                                       string('constraints.joint_4.trajectory', '0.1')])
def test_a_bad_constraint_is_refused_naming_it_and_changes_nothing(loop, parameter):
    harness, plant, controller, operator = loop
    before = (controller.joint_constraints.trajectory.copy(),
              controller.joint_constraints.goal.copy())
    (result,) = param_set(harness, operator, parameter)
    assert not result.successful
    assert parameter.name in result.reason
    np.testing.assert_array_equal(controller.joint_constraints.trajectory, before[0])
    np.testing.assert_array_equal(controller.joint_constraints.goal, before[1])


def test_a_negative_constraint_at_start_up_is_one_error_naming_it():
    harness = RosHarness(PUMA)
    try:
        with pytest.raises(ConfigurationError, match=r'constraints\.joint_4\.goal'):
            ComputedTorqueController(context=harness.context, parameter_overrides=[
                Parameter('constraints.joint_4.goal', value=-0.01)])
    finally:
        harness.close()


@pytest.mark.parametrize('module', ['follow_joint_trajectory', 'query_state'])
def test_without_the_service_type_query_state_is_off_and_the_controller_runs(monkeypatch,
                                                                            module):
    """No control_msgs at all (the action is off too), or one built without the service."""
    from robot_dynamics.nodes.trajectories import follow_joint_trajectory, query_state
    monkeypatch.setattr({'follow_joint_trajectory': follow_joint_trajectory,
                         'query_state': query_state}[module], 'UNAVAILABLE',
                        "No module named 'x'")
    harness = RosHarness(PUMA)
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        assert not any(s.srv_name.endswith('/query_state') for s in controller.services)
        action_on = module == 'query_state'
        assert isinstance(controller._action, follow_joint_trajectory.NoActionInterface) != (
            action_on)
    finally:
        harness.close()
