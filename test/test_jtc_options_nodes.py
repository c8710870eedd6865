"""joint_trajectory_controller (JTC) options through the nodes, over real DDS on simulated
time (doc/trajectories.md, "Comparison with joint_trajectory_controller"):
constraints.decelerate_on_cancel with constraints.<joint>.max_deceleration_on_cancel (after
a cancel, an empty trajectory, a path tolerance violation and cmd_timeout), the
acceleration entries of path and goal tolerances, effort feed-forward from the points,
allow_integration_in_goal_trajectories, allow_nonzero_velocity_at_trajectory_end,
cmd_timeout and interpolation_method 'none'.

Each class runs the shipped lock-step loop (config/sim.yaml: plant and controller on
simulated time, as fast as the CPU allows) with its own read-only parameters; the loop of a
class is closed before the next one starts. Every wait is for an event or for simulated
time; every goal is built from the measured position. The module skips only when
control_msgs cannot be imported.
"""

import time

import numpy as np
import pytest

pytest.importorskip('control_msgs', reason='control_msgs is not built in this environment '
                                           '(tools/dev.py builds it; needs cmake and a C '
                                           'compiler)')
from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import JointTolerance, JointTrajectoryControllerState  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from robot_dynamics.dynamics import mass_matrix  # noqa: E402
from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.plant import PlantSimulator  # noqa: E402
from robot_dynamics.nodes.common.ros_params import ConfigurationError  # noqa: E402
from robot_dynamics.nodes.send_trajectory import trajectory_message  # noqa: E402
from robot_dynamics.trajectories.profiles import sample_profile  # noqa: E402
from ros_testing import PUMA, RosHarness, SIM  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'
Result = FollowJointTrajectory.Result
KP = 100.0                              # config/sim.yaml gains.kp
MOVE = [0.3, -0.2, 0.25, 0.4, -0.5, 0.6]    # rad; 1.5 s quintic: peak |q̈| 1.54 rad/s²
DECELERATION = [2.0, 2.5, 3.0, 2.0, 2.5, 3.0]   # rad/s², above every move's peak
# the arm's measured deceleration during a stop, at most this times the limit that the
# reference keeps (doc/trajectories.md, *Stop*)
ARM_OVERSHOOT = 1.2


def duration(seconds):
    nanoseconds = int(round(seconds * 1e9))
    return Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def stamp_seconds(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


class Client(Node):
    """An action client (as MoveIt drives JTC), the topic, ~/controller_state and ~/status."""

    def __init__(self, context):
        super().__init__('jtc_options_client', context=context)
        self.action = ActionClient(self, FollowJointTrajectory,
                                   f'{CONTROLLER}/follow_joint_trajectory')
        self.states = []
        self.status = []
        self.create_subscription(JointTrajectoryControllerState,
                                 f'{CONTROLLER}/controller_state', self.states.append, 1000)
        self.create_subscription(String, f'{CONTROLLER}/status',
                                 lambda m: self.status.append(m.data), 100)
        self.topic = self.create_publisher(JointTrajectory, f'{CONTROLLER}/joint_trajectory',
                                           10)

    def handshake(self, harness):
        """Send an empty goal (refused at once) every second until one is answered: then
        requests and responses are matched both ways."""
        harness.spin_until(self.action.server_is_ready, 'the action server')
        while True:
            future = self.action.send_goal_async(FollowJointTrajectory.Goal())
            sent = time.monotonic()
            harness.spin_until(lambda: future.done() or time.monotonic() - sent > 1.0,
                               'a goal response')
            if future.done():
                return


class Loop:
    """The lock-step loop with extra controller parameters (`-p name:=value` items)."""

    def __init__(self, *overrides):
        self.harness = RosHarness(PUMA, SIM, ros_args=[
            '-p', 'real_time_factor:=0.0', '-p', 'integration_step:=0.002'],
            overrides=overrides)
        h = self.harness
        self.plant = h.add(PlantSimulator(context=h.context))
        self.controller = h.add(ComputedTorqueController(
            context=h.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
        self.client = h.add(Client(h.context))
        h.spin_until(lambda: self.client.action.server_is_ready()
                     and self.client.topic.get_subscription_count() > 0
                     and self.controller._ready, 'the action server and the loop')
        self.client.handshake(h)
        self.settle(0.5)

    def settle(self, seconds):
        end = self.plant.sim_time + seconds
        self.harness.spin_until(lambda: self.plant.sim_time >= end,
                                f'{seconds} s of simulated time')

    def send(self, goal):
        future = self.client.action.send_goal_async(goal)
        self.harness.spin_until(future.done, 'the goal response')
        handle = future.result()
        assert handle.accepted
        return handle

    def outcome(self, handle):
        future = handle.get_result_async()
        self.harness.spin_until(future.done, 'the result')
        return future.result().status, future.result().result

    def move(self, offsets, seconds=1.5, points=20):
        q0 = np.asarray(self.plant.q).copy()
        command = sample_profile('quintic', q0, q0 + np.asarray(offsets), seconds, points,
                                 JOINTS)
        return FollowJointTrajectory.Goal(trajectory=trajectory_message(command))

    def wait_moving(self, speed=0.3):
        def moving():
            states = self.client.states
            return states and np.max(np.abs(states[-1].reference.velocities)) > speed
        self.harness.spin_until(moving, 'the goal under way')

    def close(self):
        self.harness.close()


def states_between(states, t0, t1=np.inf):
    return [s for s in states if t0 <= stamp_seconds(s) <= t1]


def measured_accelerations(states):
    """(k, 6) finite differences of the measured velocities of consecutive states."""
    t = np.array([stamp_seconds(s) for s in states])
    qd = np.array([s.feedback.velocities for s in states])
    keep = np.diff(t) > 0.0
    return (np.diff(qd, axis=0)[keep] / np.diff(t)[keep, None])


# ========================================================================== decelerate_on_cancel

@pytest.fixture(scope='class')
def decelerating():
    loop = Loop('constraints.decelerate_on_cancel:=true', *(
        f'constraints.{j}.max_deceleration_on_cancel:={a}'
        for j, a in zip(JOINTS, DECELERATION)))
    yield loop
    loop.close()


class TestDecelerateOnCancel:

    def test_parameters_are_read_only_and_the_stop_uses_them(self, decelerating):
        controller = decelerating.controller
        np.testing.assert_array_equal(controller.sampler.max_deceleration_on_cancel,
                                      DECELERATION)
        refused = controller.set_parameters([
            Parameter('constraints.decelerate_on_cancel', value=False),
            Parameter('constraints.joint_1.max_deceleration_on_cancel', value=9.0)])
        assert not any(r.successful for r in refused)

    def test_cancel_decelerates_within_the_limit_and_comes_to_rest(self, decelerating):
        loop = decelerating
        handle = loop.send(loop.move(MOVE))
        loop.wait_moving()
        sent = loop.plant.sim_time
        before = len(loop.client.states)
        cancel = handle.cancel_goal_async()
        loop.harness.spin_until(cancel.done, 'the cancel response')
        status, _ = loop.outcome(handle)
        assert status == GoalStatus.STATUS_CANCELED
        loop.settle(1.0)
        states = loop.client.states[before - 1:]
        self.assert_decelerates_to_rest(loop, states, sent)

    @staticmethod
    def assert_decelerates_to_rest(loop, states, since):
        decel = np.array(DECELERATION)
        reference_qdd = np.array([s.reference.accelerations for s in states])
        reference_qd = np.array([s.reference.velocities for s in states])
        t = np.array([stamp_seconds(s) for s in states])
        # the reference: never beyond the limit, its velocity never steps (a hold would
        # drop it to zero at once), and it reaches rest
        assert np.all(np.abs(reference_qdd) <= decel + 1e-9)
        dt = np.diff(t)[:, None]
        assert np.all(np.abs(np.diff(reference_qd, axis=0)) <= decel * dt + 1e-9)
        moving_at_cancel = np.abs(reference_qd[0])
        assert np.max(moving_at_cancel) > 0.3
        stop = t[np.flatnonzero(np.all(reference_qd == 0.0, axis=1))[0]] - since
        assert stop >= np.max(moving_at_cancel / decel) - 0.05      # it took its time
        # the arm: its measured deceleration follows the reference's ramps to the limit
        # with the loop's tracking transient on top (one cycle of latency: 1.14-1.15 a
        # measured here; a step to −a, as JTC's, 1.31 a), and it comes to rest where the
        # reference stopped
        measured = measured_accelerations(states)
        assert np.all(np.abs(measured) <= ARM_OVERSHOOT * decel), \
            np.max(np.abs(measured) / decel, axis=0)
        final = states[-1]
        assert np.all(np.abs(final.feedback.velocities) < 0.01)
        np.testing.assert_allclose(final.feedback.positions, final.reference.positions,
                                   atol=5e-3)

    def test_an_empty_trajectory_on_the_topic_decelerates_too(self, decelerating):
        loop = decelerating
        loop.client.topic.publish(loop.move([-v for v in MOVE]).trajectory)
        loop.wait_moving()
        sent = loop.plant.sim_time
        before = len(loop.client.states)
        loop.client.topic.publish(JointTrajectory())
        loop.settle(1.5)
        self.assert_decelerates_to_rest(loop, loop.client.states[before - 1:], sent)

    def test_cmd_timeout_decelerates_from_the_measured_state(self, decelerating):
        """cmd_timeout with decelerate_on_cancel: a trajectory ending at speed (allowed
        here) leaves the arm moving; cmd_timeout after its last point stops it from the
        measured state within the deceleration limit, not at once."""
        loop = decelerating
        controller = loop.controller
        assert controller.set_parameters([
            Parameter('cmd_timeout', value=0.02),
            Parameter('allow_nonzero_velocity_at_trajectory_end', value=True)])[0].successful
        try:
            q0 = np.asarray(loop.plant.q).copy()
            speed = np.array([0.6, -0.5, 0.6, 0.8, -0.8, 0.8])
            loop.client.status.clear()
            loop.client.topic.publish(JointTrajectory(joint_names=JOINTS, points=[
                JointTrajectoryPoint(positions=(q0 + 0.25 * speed).tolist(),
                                     velocities=speed.tolist(), accelerations=[0.0] * 6,
                                     time_from_start=duration(0.5))]))
            loop.harness.spin_until(lambda: 'finished' in loop.client.status, 'the end')
            before = len(loop.client.states)
            loop.client.status.clear()
            # the stop is a trajectory of its own: running, then finished at rest
            loop.harness.spin_until(lambda: 'running' in loop.client.status, 'the stop')
            loop.settle(1.5)
        finally:
            controller.set_parameters([
                Parameter('cmd_timeout', value=0.0),
                Parameter('allow_nonzero_velocity_at_trajectory_end', value=False)])
        states = loop.client.states[before:]
        at_rest = [not np.any(s.reference.velocities) for s in states]
        first = at_rest.index(False)            # the first cycle of the stop
        assert first > 0                        # held at rest after the last point, then
        stop = states[first]
        # from the measured state (JTC): the reference starts at the arm's velocity, which
        # had not yet come down from the end point's 0.5-0.8 rad/s
        np.testing.assert_allclose(stop.reference.velocities, stop.feedback.velocities,
                                   atol=0.05)
        self.assert_decelerates_to_rest(loop, states[first:], stamp_seconds(stop) - 0.011)
        # against JTC's time and distance from the stop's first state (sampled when it
        # began: the measured velocity, zero acceleration): at most 1.2 (|v|/a + one
        # cycle) and 1.2 v²/(2a)
        assert_within_jtc_bounds(states[first:], DECELERATION)

    def test_a_path_tolerance_violation_decelerates_from_the_measured_state(self, decelerating):
        loop = decelerating
        goal = loop.move(MOVE)
        goal.path_tolerance = [JointTolerance(name='joint_5', position=1e-5)]
        status, result = loop.outcome(loop.send(goal))
        assert result.error_code == Result.PATH_TOLERANCE_VIOLATED
        loop.settle(1.0)
        final = loop.client.states[-1]
        assert np.all(np.abs(final.feedback.velocities) < 0.01)
        assert np.all(np.abs(np.array(final.reference.accelerations)) == 0.0)


def assert_within_jtc_bounds(states, decel, cycle=0.01):
    """The stop in `states` (from states[0], whose reference moves at the velocity v the
    stop starts from with zero acceleration: the stop's first state, or the last one
    before it, to rest) reaches rest within 1.2 (|v|/a + one cycle) of that state's stamp
    and within 1.2 v²/(2a) of its position, per joint; and not sooner or shorter than JTC's
    constant deceleration allows. From the state before the stop the time and the distance
    also count the part of a cycle before the stop began (conservative)."""
    decel = np.asarray(decel, dtype=float)
    v = np.array(states[0].reference.velocities)
    assert not np.any(states[0].reference.accelerations)
    p0 = np.array(states[0].reference.positions)
    t0 = stamp_seconds(states[0])
    qd = np.array([s.reference.velocities for s in states])
    for i in range(len(decel)):
        rest = np.flatnonzero(qd[:, i] == 0.0)
        assert rest.size, f'joint {i} never at rest'
        k = int(rest[0])
        time_taken = stamp_seconds(states[k]) - t0
        distance = states[k].reference.positions[i] - p0[i]
        jtc_time, jtc_distance = abs(v[i]) / decel[i], v[i] ** 2 / (2.0 * decel[i])
        assert jtc_time - cycle <= time_taken <= 1.2 * (jtc_time + cycle), (i, time_taken, v)
        assert np.sign(distance) == np.sign(v[i])
        assert jtc_distance - abs(v[i]) * cycle <= abs(distance) <= 1.2 * jtc_distance, (
            i, distance, v)
        assert np.all(qd[k:, i] == 0.0)             # and stays at rest


SLOW_DECELERATION = [0.3, 0.2, 0.25, 0.3, 0.3, 0.3]   # rad/s²: |v|/a 0.67-1 s below


@pytest.fixture(scope='class')
def slow_stop():
    loop = Loop('constraints.decelerate_on_cancel:=true', *(
        f'constraints.{j}.max_deceleration_on_cancel:={a}'
        for j, a in zip(JOINTS, SLOW_DECELERATION)))
    yield loop
    loop.close()


class TestStopAgainstJtc:
    """A cancel at constant speed (the middle third of a trapezoidal-velocity move, where
    the reference's acceleration is exactly 0): the reference stops within 1.2 times JTC's
    time |v|/a + one cycle and 1.2 times its distance v²/(2a), never beyond a."""

    def cruise(self, loop, offsets):
        q0 = np.asarray(loop.plant.q).copy()
        command = sample_profile('trapezoid', q0, q0 + np.asarray(offsets), 6.0, 60, JOINTS)
        return FollowJointTrajectory.Goal(trajectory=trajectory_message(command))

    def wait_cruising(self, loop):
        def cruising():
            states = loop.client.states
            return (states and np.all(np.abs(states[-1].reference.velocities) > 0.1)
                    and not np.any(states[-1].reference.accelerations))
        loop.harness.spin_until(cruising, 'the cruise')

    def test_a_cancel_at_speed_stops_within_both_bounds(self, slow_stop):
        loop = slow_stop
        offsets = [0.8, -0.6, 0.7, 1.0, -1.0, 1.2]          # 0.2-0.3 rad/s cruising
        handle = loop.send(self.cruise(loop, offsets))
        self.wait_cruising(loop)
        before = len(loop.client.states)
        cancel = handle.cancel_goal_async()
        loop.harness.spin_until(cancel.done, 'the cancel response')
        assert loop.outcome(handle)[0] == GoalStatus.STATUS_CANCELED
        loop.settle(2.0)
        states = loop.client.states[before - 1:]
        cruising = [not np.any(s.reference.accelerations) for s in states]
        last = cruising.index(False) - 1        # the last state at cruise speed
        assert last >= 0
        np.testing.assert_allclose(np.abs(states[last].reference.velocities),
                                   1.5 * np.abs(offsets) / 6.0, rtol=1e-9)
        assert_within_jtc_bounds(states[last:], SLOW_DECELERATION)
        reference_qdd = np.array([s.reference.accelerations for s in states])
        assert np.all(np.abs(reference_qdd) <= np.array(SLOW_DECELERATION) + 1e-9)
        # it reaches the limit (a trapezoid in q̈, not a gentler curve)
        assert np.all(np.max(np.abs(reference_qdd), axis=0)
                      >= 0.999 * np.array(SLOW_DECELERATION))

    def test_an_empty_trajectory_at_speed_stops_within_both_bounds(self, slow_stop):
        loop = slow_stop
        offsets = [-0.8, 0.6, -0.7, -1.0, 1.0, -1.2]
        loop.client.topic.publish(self.cruise(loop, offsets).trajectory)
        self.wait_cruising(loop)
        before = len(loop.client.states)
        loop.client.topic.publish(JointTrajectory())
        loop.settle(2.5)
        states = loop.client.states[before - 1:]
        cruising = [not np.any(s.reference.accelerations) for s in states]
        last = cruising.index(False) - 1
        assert last >= 0
        assert_within_jtc_bounds(states[last:], SLOW_DECELERATION)


# ========================================================================== continuous joints

TWO_PI = 2.0 * np.pi
LIMIT = 6.283185307179586           # config/sim.yaml's +-2 pi, kept on joints 1-5


@pytest.fixture(scope='class')
def continuous_wrist():
    """joint_6 continuous (robot.continuous of the DH model, without position limits)."""
    loop = Loop('robot.continuous:=[false, false, false, false, false, true]',
                f'robot.position_min:=[{", ".join([str(-LIMIT)] * 5)}, -.inf]',
                f'robot.position_max:=[{", ".join([str(LIMIT)] * 5)}, .inf]')
    yield loop
    loop.close()


class TestContinuousJoint:
    """As JTC since Jazzy: a goal across +-pi on a continuous joint takes the short way
    (0.28 rad from 3.0 to -3.0, not 6.0), and succeeds on the wrapped goal error."""

    def goal_to(self, loop, q6, seconds):
        """One point: joint_6 at q6, the others where they are (the first segment is the
        one JTC wraps; later points are followed as given)."""
        target = np.asarray(loop.plant.q).copy()
        target[5] = q6
        return FollowJointTrajectory.Goal(trajectory=JointTrajectory(
            joint_names=JOINTS, points=[JointTrajectoryPoint(
                positions=target.tolist(), time_from_start=duration(seconds))]))

    def test_a_goal_across_pi_takes_the_short_way(self, continuous_wrist):
        loop = continuous_wrist
        assert loop.controller.model.continuous.tolist() == [False] * 5 + [True]
        status, result = loop.outcome(loop.send(self.goal_to(loop, 3.0, 2.0)))
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        loop.settle(0.3)
        start = float(loop.plant.q[5])
        assert start == pytest.approx(3.0, abs=0.01)
        before = len(loop.client.states)
        goal = loop.send(self.goal_to(loop, -3.0, 1.0))
        status, result = loop.outcome(goal)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        loop.settle(0.3)
        states = loop.client.states[before:]
        q6 = np.array([s.feedback.positions[5] for s in states])
        # the plant's angle runs on: 3.0 -> 3.28 (= -3.0 + 2 pi), never back through 0
        assert float(loop.plant.q[5]) == pytest.approx(TWO_PI - 3.0, abs=0.01)
        assert np.all(q6 >= start - 0.02) and np.all(q6 <= TWO_PI - 3.0 + 0.02)
        # the reported error is the wrapped one: small all along, not 6 rad
        errors = np.array([s.error.positions[5] for s in states])
        assert np.max(np.abs(errors)) < 0.05
        assert abs(result.error_code) == 0      # SUCCESSFUL


# ========================================================================== live options

@pytest.fixture(scope='class')
def loop():
    loop = Loop()
    yield loop
    loop.close()


def velocity_only_goal(velocities, times):
    trajectory = JointTrajectory(joint_names=JOINTS)
    for v, t in zip(velocities, times):
        trajectory.points.append(JointTrajectoryPoint(velocities=[float(x) for x in v],
                                                      time_from_start=duration(t)))
    return FollowJointTrajectory.Goal(trajectory=trajectory)


class TestLiveOptions:

    def test_acceleration_path_tolerance_aborts_a_goal_that_accelerates_beyond_it(self, loop):
        goal = loop.move(MOVE)
        goal.path_tolerance = [JointTolerance(name='joint_6', acceleration=0.05)]
        status, result = loop.outcome(loop.send(goal))
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error_code == Result.PATH_TOLERANCE_VIOLATED
        assert "joint 'joint_6' acceleration error" in result.error_string
        loop.settle(1.0)
        goal = loop.move([-v for v in MOVE])    # generous: about the quintic's own peak
        goal.path_tolerance = [JointTolerance(name=j, acceleration=5.0) for j in JOINTS]
        status, result = loop.outcome(loop.send(goal))
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string

    def test_goal_acceleration_tolerance_waits_for_the_arm_to_settle(self, loop):
        """A goal acceleration tolerance is met once the measured q̈ (the difference of
        measured velocities) is within it after the last point: the same move succeeds
        later with one than without; one the arm cannot meet aborts after
        goal_time_tolerance, naming the joint and the acceleration."""
        def settle_time(offsets, tolerances):
            goal = loop.move(offsets, seconds=1.0)
            goal.goal_tolerance = tolerances
            goal.goal_time_tolerance = duration(1.0)
            sent = loop.plant.sim_time
            status, result = loop.outcome(loop.send(goal))
            assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
            return loop.plant.sim_time - sent
        plain = settle_time(MOVE, [])
        loop.settle(0.5)
        strict = settle_time([-v for v in MOVE],
                             [JointTolerance(name=j, acceleration=2e-3) for j in JOINTS])
        assert strict > plain + 0.1, (strict, plain)
        loop.settle(0.3)
        goal = loop.move(MOVE, seconds=1.0)
        goal.goal_tolerance = [JointTolerance(name='joint_2', acceleration=1e-12)]
        goal.goal_time_tolerance = duration(0.2)
        status, result = loop.outcome(loop.send(goal))
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error_code == Result.GOAL_TOLERANCE_VIOLATED
        assert "joint 'joint_2' acceleration error" in result.error_string, result.error_string
        assert 'goal_time_tolerance 0.2 s' in result.error_string

    def test_effort_feed_forward_deflects_the_arm_by_the_inverse_inertia(self, loop):
        """A constant feed-forward f at rest: q̈ = Kp e + M⁻¹ f = 0 with e = q_d − q, so
        the arm settles at q = q_d + M(q)⁻¹ f / Kp (the effort is added to the computed
        torque, not counted into it); a stop drops it and the arm returns."""
        q0 = np.asarray(loop.plant.q).copy()
        f = np.array([2.0, 1.5, 0.0, 0.0, 0.0, 0.0])          # N m on the big joints
        trajectory = JointTrajectory(joint_names=JOINTS, points=[
            JointTrajectoryPoint(positions=q0.tolist(), effort=(0.5 * f).tolist(),
                                 time_from_start=duration(0.5)),
            JointTrajectoryPoint(positions=q0.tolist(), effort=f.tolist(),
                                 time_from_start=duration(1.0))])
        goal = FollowJointTrajectory.Goal(trajectory=trajectory, goal_tolerance=[
            JointTolerance(name=j, position=-1.0) for j in JOINTS])   # deflected on purpose
        status, result = loop.outcome(loop.send(goal))
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        loop.settle(1.5)
        q = np.asarray(loop.plant.q).copy()
        expected = np.linalg.solve(mass_matrix(loop.controller.model, q), f) / KP
        assert abs(expected[0]) > 5e-3 and abs(expected[1]) > 5e-3     # worth measuring
        np.testing.assert_allclose(q - q0, expected, rtol=0.03, atol=1e-4)
        bad = FollowJointTrajectory.Goal(trajectory=trajectory)
        bad.trajectory.points[1].effort = [0.0] * 5
        status, result = loop.outcome(loop.send(bad))
        assert result.error_code == Result.INVALID_GOAL
        assert 'trajectory.points[1].effort: 5 values for 6 joints' in result.error_string
        loop.client.topic.publish(JointTrajectory())            # stop: the ff goes
        loop.settle(1.5)
        np.testing.assert_allclose(loop.plant.q, q0, atol=1e-4)

    def test_nonzero_final_velocity_is_refused_by_default_and_accepted_when_allowed(self, loop):
        controller = loop.controller
        assert controller.get_parameter('allow_nonzero_velocity_at_trajectory_end').value is False
        q0 = np.asarray(loop.plant.q).copy()
        trajectory = JointTrajectory(joint_names=JOINTS, points=[JointTrajectoryPoint(
            positions=(q0 + 0.05).tolist(), velocities=[0.0] * 5 + [0.1],
            time_from_start=duration(0.5))])
        status, result = loop.outcome(loop.send(FollowJointTrajectory.Goal(
            trajectory=trajectory)))
        assert result.error_code == Result.INVALID_GOAL
        assert ("trajectory.points[0].velocities[5] (joint 'joint_6'): 0.1 is non-zero at the "
                'trajectory end and allow_nonzero_velocity_at_trajectory_end is false'
                in result.error_string)
        assert controller.set_parameters([Parameter(
            'allow_nonzero_velocity_at_trajectory_end', value=True)])[0].successful
        try:
            status, result = loop.outcome(loop.send(FollowJointTrajectory.Goal(
                trajectory=trajectory)))
            assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        finally:
            controller.set_parameters([Parameter('allow_nonzero_velocity_at_trajectory_end',
                                                 value=False)])
        refused = controller.set_parameters([Parameter(
            'allow_nonzero_velocity_at_trajectory_end', value='yes')])
        assert not refused[0].successful
        assert 'allow_nonzero_velocity_at_trajectory_end' in refused[0].reason

    def test_allow_partial_joints_goal_is_live_as_in_jtc(self, loop):
        controller = loop.controller
        q0 = np.asarray(loop.plant.q).copy()
        held = np.delete(loop.client.states[-1].reference.positions, 1)
        partial = FollowJointTrajectory.Goal(trajectory=JointTrajectory(
            joint_names=['joint_2'], points=[JointTrajectoryPoint(
                positions=[float(q0[1]) + 0.05], time_from_start=duration(0.5))]))
        status, result = loop.outcome(loop.send(partial))
        assert result.error_code == Result.INVALID_JOINTS
        assert 'allow_partial_joints_goal is false' in result.error_string
        assert controller.set_parameters([Parameter('allow_partial_joints_goal',
                                                    value=True)])[0].successful
        try:
            status, result = loop.outcome(loop.send(partial))
            assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        finally:
            controller.set_parameters([Parameter('allow_partial_joints_goal', value=False)])
        reference = np.asarray(loop.client.states[-1].reference.positions)
        assert reference[1] == pytest.approx(q0[1] + 0.05)        # moved
        np.testing.assert_allclose(np.delete(reference, 1), held, atol=1e-12)  # held

    def test_velocity_only_goals_are_integrated_when_allowed(self, loop):
        controller = loop.controller
        q0 = np.asarray(loop.plant.q).copy()
        v = np.array([0.2, -0.1, 0.1, 0.2, -0.2, 0.3])
        goal = velocity_only_goal([v, v, np.zeros(6)], [0.5, 1.0, 1.5])
        status, result = loop.outcome(loop.send(goal))
        assert result.error_code == Result.INVALID_GOAL
        assert 'trajectory.points[0].positions: 0 values for 6 joints' in result.error_string
        assert controller.set_parameters([Parameter(
            'allow_integration_in_goal_trajectories', value=True)])[0].successful
        try:
            status, result = loop.outcome(loop.send(goal))
            assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        finally:
            controller.set_parameters([Parameter('allow_integration_in_goal_trajectories',
                                                 value=False)])
        # trapezoids from rest: v/2 * 0.5 + v * 0.5 + v/2 * 0.5 = 1.0 v
        np.testing.assert_allclose(loop.plant.q, q0 + 1.0 * v, atol=0.01)

    def test_cmd_timeout_holds_the_measured_position_after_the_last_point(self, loop):
        controller = loop.controller
        refused = controller.set_parameters([Parameter('cmd_timeout', value=-1.0)])
        assert not refused[0].successful and 'cmd_timeout' in refused[0].reason
        assert controller.set_parameters([Parameter('cmd_timeout', value=0.3)])[0].successful
        try:
            # a topic trajectory: 'finished' after its last point, 'holding' 0.3 s later
            q0 = np.asarray(loop.plant.q).copy()
            loop.client.status.clear()
            loop.client.topic.publish(JointTrajectory(joint_names=JOINTS, points=[
                JointTrajectoryPoint(positions=(q0 + 0.05).tolist(),
                                     time_from_start=duration(0.5))]))
            loop.harness.spin_until(lambda: 'finished' in loop.client.status, 'the end')
            finished = loop.plant.sim_time
            loop.harness.spin_until(lambda: loop.client.status[-1] == 'holding', 'the hold')
            held = loop.plant.sim_time
            assert 0.3 - 0.02 <= held - finished <= 0.3 + 0.05
            # a goal that cannot meet its goal tolerance (goal_time 0: JTC waits for ever)
            goal = loop.move([0.05] * 6, seconds=0.5)
            goal.goal_tolerance = [JointTolerance(name='joint_1', position=1e-12)]
            status, result = loop.outcome(loop.send(goal))
            assert result.error_code == Result.GOAL_TOLERANCE_VIOLATED
            assert 'cmd_timeout' in result.error_string
            # a goal that succeeds is settled: no timeout afterwards
            status, result = loop.outcome(loop.send(loop.move([-0.05] * 6, seconds=0.5)))
            assert status == GoalStatus.STATUS_SUCCEEDED
            loop.settle(0.6)
            assert loop.client.status[-1] == 'finished'
            # not above constraints.goal_time: ignored, as JTC
            controller.set_parameters([Parameter('constraints.goal_time', value=0.5)])
            loop.client.status.clear()
            loop.client.topic.publish(loop.move([0.05] * 6, seconds=0.5).trajectory)
            loop.harness.spin_until(lambda: 'finished' in loop.client.status, 'the end')
            loop.settle(0.6)
            assert loop.client.status[-1] == 'finished'
        finally:
            controller.set_parameters([Parameter('cmd_timeout', value=0.0),
                                       Parameter('constraints.goal_time', value=0.0)])


# ========================================================================== interpolation none

@pytest.fixture(scope='class')
def stepping():
    loop = Loop('interpolation_method:=none')
    yield loop
    loop.close()


class TestInterpolationNone:

    def test_the_reference_jumps_to_the_next_point_and_is_read_only(self, stepping):
        loop = stepping
        controller = loop.controller
        assert not controller.set_parameters([Parameter('interpolation_method',
                                                        value='splines')])[0].successful
        q0 = np.asarray(loop.plant.q).copy()
        p1, p2 = q0 + 0.02, q0 + 0.05
        v1 = [0.01] * 6
        goal = FollowJointTrajectory.Goal(trajectory=JointTrajectory(
            joint_names=JOINTS, points=[
                JointTrajectoryPoint(positions=p1.tolist(), velocities=v1,
                                     time_from_start=duration(0.3)),
                JointTrajectoryPoint(positions=p2.tolist(), velocities=[0.0] * 6,
                                     time_from_start=duration(0.6))]))
        before = len(loop.client.states)
        handle = loop.send(goal)
        start = controller.sampler._plan.start
        status, result = loop.outcome(handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        period = 0.011
        for s in loop.client.states[before:]:
            t = stamp_seconds(s) - start
            reference = np.array(s.reference.positions)
            if period < t < 0.3 - period:           # before point 0: the start state
                np.testing.assert_allclose(reference, q0, atol=1e-3)
            elif 0.3 + period < t < 0.6 - period:   # on [point 0, point 1): point 1
                np.testing.assert_array_equal(reference, p2)
                assert list(s.reference.velocities) == [0.0] * 6
            elif t > 0.6 + period:
                np.testing.assert_array_equal(reference, p2)
        ts = [stamp_seconds(s) - start for s in loop.client.states[before:]]
        assert min(ts) < 0.2 and max(ts) > 0.7          # every phase was seen


# ========================================================================== start-up values

@pytest.mark.parametrize('name, value, words', [
    ('interpolation_method', 'linear', r"interpolation_method: 'linear' is not one of"),
    ('cmd_timeout', -1.0, r'cmd_timeout'),
    ('constraints.joint_3.max_deceleration_on_cancel', -2.0,
     r'constraints\.joint_3\.max_deceleration_on_cancel'),
    ('allow_integration_in_goal_trajectories', 'yes',
     r'allow_integration_in_goal_trajectories'),
])
def test_a_bad_value_at_start_up_is_one_error_naming_the_parameter(name, value, words):
    harness = RosHarness(PUMA)
    try:
        with pytest.raises(ConfigurationError, match=words):
            ComputedTorqueController(context=harness.context,
                                     parameter_overrides=[Parameter(name, value=value)])
    finally:
        harness.close()


def test_decelerate_on_cancel_without_a_deceleration_for_every_joint_holds_at_once():
    """As JTC: a joint whose max_deceleration_on_cancel is 0 turns the feature off, with
    one error line naming its parameter."""
    harness = RosHarness(PUMA, overrides=['constraints.decelerate_on_cancel:=true', *(
        f'constraints.{j}.max_deceleration_on_cancel:=2.0' for j in JOINTS[:-1])])
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        assert controller.sampler.max_deceleration_on_cancel is None
        complete = RosHarness(PUMA, overrides=['constraints.decelerate_on_cancel:=true', *(
            f'constraints.{j}.max_deceleration_on_cancel:=2.0' for j in JOINTS)])
        try:
            other = ComputedTorqueController(context=complete.context)
            np.testing.assert_array_equal(other.sampler.max_deceleration_on_cancel, [2.0] * 6)
            other.destroy_node()
        finally:
            complete.close()
    finally:
        harness.close()
