"""The controller's state watchdog over real DDS (doc/safety.md): /joint_states older than
state_timeout ⇒ a zero effort vector every cycle and status `state_timeout`; when states
return it holds the measured position (the old trajectory is abandoned, the reference never
jumps back to it). The test plays the robot; the plant's command timeout is tested in
test_nodes_plant.py."""

import math
import time

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.nodes.controller import ComputedTorqueController
from ros_testing import move_to, PUMA, resting_state, RosHarness

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'
Q = np.array([0.3, -0.4, 0.5, 0.2, -0.6, 0.7])
MOVED = Q + np.array([0.2, -0.1, 0.15, 0.0, 0.1, -0.2])   # where the arm is on return
GOAL = Q - 0.2            # inside the PUMA position limits


class Robot(Node):
    """Publishes /joint_states on demand; records efforts, ~/reference and ~/status."""

    def __init__(self, context):
        super().__init__('fake_robot', context=context)
        self.states = self.create_publisher(JointState, 'joint_states', 10)
        self.trajectory = self.create_publisher(JointTrajectory,
                                                f'{CONTROLLER}/joint_trajectory', 10)
        self.log = []       # ('effort' | 'reference' | 'status', data) in arrival order
        self.status = None
        self.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                 lambda m: self.log.append(('effort', list(m.data))), 1000)
        self.create_subscription(JointState, f'{CONTROLLER}/reference',
                                 lambda m: self.log.append(('reference', list(m.position))),
                                 1000)
        latched = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, f'{CONTROLLER}/status', self._on_status, latched)

    def _on_status(self, msg):
        self.status = msg.data
        self.log.append(('status', msg.data))

    def send(self, q, stamp=None):
        msg = resting_state(JOINTS, q, self)
        if stamp is not None:
            msg.header.stamp = stamp
        self.states.publish(msg)

    def move_to(self, goal, duration):
        self.trajectory.publish(move_to(JOINTS, goal, duration))


def start(*overrides):
    harness = RosHarness(PUMA, overrides=overrides)
    controller = harness.add(ComputedTorqueController(context=harness.context))
    robot = harness.add(Robot(harness.context))
    harness.spin_until(lambda: robot.states.get_subscription_count() > 0
                       and robot.trajectory.get_subscription_count() > 0
                       and robot.count_publishers('/effort_controller/commands') > 0,
                       'discovery')
    return harness, controller, robot


def stream(harness, robot, q, predicate, what):
    """Publish q about every 10 ms (the robot) until predicate() holds."""
    harness.spin_until(lambda: robot.send(q) or predicate(), what)


def silence(harness, seconds):
    """Publish nothing for at least `seconds` of wall time (the robot is gone)."""
    end = time.monotonic() + seconds
    harness.spin_until(lambda: time.monotonic() > end, 'the silence')


def after(log, index, kind):
    return [data for k, data in log[index:] if k == kind]


def assert_holds_where_it_returned(harness, robot, q, cycles, what):
    """Stream q until `cycles` references came: each is q (the measured position held)."""
    back = len(robot.log)
    stream(harness, robot, q, lambda: len(after(robot.log, back, 'reference')) >= cycles, what)
    references = np.array(after(robot.log, back, 'reference'))
    np.testing.assert_allclose(references, np.tile(q, (len(references), 1)), atol=1e-12)


def test_timer_mode_stale_states_give_zero_effort_then_hold_the_measured_position():
    harness, controller, robot = start('state_timeout:=0.1', 'control_rate:=100.0')
    try:
        stream(harness, robot, Q, lambda: robot.status == 'holding', 'holding')
        robot.move_to(GOAL, 10)
        stream(harness, robot, Q, lambda: robot.status == 'running', 'the move running')
        mark = len(robot.log)
        harness.spin_until(lambda: robot.status == 'state_timeout', 'the state timeout')
        timeout_at = len(robot.log)
        harness.spin_until(lambda: len(after(robot.log, timeout_at, 'effort')) >= 10,
                           'efforts during the timeout')
        during = after(robot.log, timeout_at, 'effort')
        assert all(e == [0.0] * 6 for e in during)
        assert after(robot.log, timeout_at, 'reference') == []   # state topics paused
        assert any(e != [0.0] * 6 for e in after(robot.log, mark, 'effort')[:1])
        assert_holds_where_it_returned(harness, robot, MOVED, 5, 'cycles after the return')
        assert robot.status == 'holding'
        assert controller.sampler.status(controller._now()) == 'holding'
    finally:
        harness.close()


def test_on_state_mode_gap_longer_than_timeout_holds_the_measured_position():
    """on_state runs a cycle per message: during the gap nothing is published (the plant's
    command_timeout is the guard); the first message after it re-synchronises."""
    harness, controller, robot = start('control_mode:=on_state', 'state_timeout:=0.1')
    try:
        stream(harness, robot, Q, lambda: robot.status == 'holding', 'holding')
        robot.move_to(GOAL, 10)
        stream(harness, robot, Q, lambda: robot.status == 'running', 'the move running')
        silence(harness, 0.2)                 # the answers to states in flight arrive
        mark = len(robot.log)
        silence(harness, 0.2)
        assert after(robot.log, mark, 'effort') == []
        stream(harness, robot, MOVED, lambda: len(after(robot.log, mark, 'reference')) >= 3,
               'cycles after the gap')
        references = np.array(after(robot.log, mark, 'reference'))
        np.testing.assert_allclose(references, np.tile(MOVED, (len(references), 1)),
                                   atol=1e-12)
        assert robot.status == 'holding'
    finally:
        harness.close()


def test_short_jitter_below_the_timeout_keeps_the_trajectory():
    """The re-sync is not triggered by ordinary gaps: the move keeps running."""
    harness, controller, robot = start('control_mode:=on_state', 'state_timeout:=5.0')
    try:
        stream(harness, robot, Q, lambda: robot.status == 'holding', 'holding')
        robot.move_to(GOAL, 10)
        stream(harness, robot, Q, lambda: robot.status == 'running', 'the move running')
        silence(harness, 0.2)
        mark = len(robot.log)
        stream(harness, robot, Q, lambda: len(after(robot.log, mark, 'reference')) >= 3,
               'cycles after the jitter')
        assert robot.status == 'running'
        reference = np.array(after(robot.log, mark, 'reference')[-1])
        assert np.all(np.abs(reference - Q) > 0.0)
        assert math.isfinite(float(np.sum(reference)))
    finally:
        harness.close()


def frozen_stream(harness, robot, q, qd, predicate, what):
    """Publish the same (q, q̇) about every 10 ms under a new stamp each time, as
    joint_state_broadcaster does when the hardware behind it stopped updating."""
    def send():
        msg = resting_state(JOINTS, q, robot)
        msg.velocity = [float(v) for v in qd]
        robot.states.publish(msg)
    harness.spin_until(lambda: send() or predicate(), what)


MOVING = np.array([0.0, 0.0, 0.5, 0.0, 0.0, 0.0])     # rad/s: joint_3 moving


@pytest.mark.parametrize('mode', ['on_state', 'timer'])
def test_a_moving_state_that_stays_the_same_trips_the_watchdog_until_it_changes(mode):
    """Hardware frozen behind a publisher that goes on sending its last values: joint_3
    reported at 0.5 rad/s with the very same position for longer than state_timeout is
    frozen; zero effort and status state_timeout, as if it were silent, until the state
    changes; then the measured position is held (the move is abandoned)."""
    # state_timeout 0.5 s: far above the gaps of this stream on a busy machine (at 0.1 s
    # one stall of the test process tripped the watchdog before the state froze)
    harness, controller, robot = start(f'control_mode:={mode}', 'state_timeout:=0.5',
                                       'control_rate:=100.0')
    try:
        stream(harness, robot, Q, lambda: robot.status == 'holding', 'holding')
        robot.move_to(GOAL, 10)
        stream(harness, robot, Q, lambda: robot.status == 'running', 'the move running')
        frozen_stream(harness, robot, Q, MOVING, lambda: robot.status == 'state_timeout',
                      'the watchdog on the frozen state')
        assert list(controller._frozen) == [False, False, True, False, False, False]
        tripped = len(robot.log)
        frozen_stream(harness, robot, Q, MOVING,
                      lambda: len(after(robot.log, tripped, 'effort')) >= 5,
                      'efforts while frozen')
        assert all(e == [0.0] * 6 for e in after(robot.log, tripped, 'effort'))
        assert_holds_where_it_returned(harness, robot, MOVED, 3,
                                       'cycles after the state changed')
        assert robot.status == 'holding' and not controller._frozen.any()
    finally:
        harness.close()


def test_a_joint_at_rest_or_creeping_below_the_stopped_velocity_may_repeat_its_state():
    """Values repeated at rest (q̇ = 0) or with a velocity within
    constraints.stopped_velocity_tolerance (a filter's offset) are not frozen: 2.5 s of
    the same values (0.009 rad/s implies FROZEN_MOTION after 1.1 s; a frozen joint would
    trip state_timeout 0.5 s later), and the move keeps running."""
    harness, controller, robot = start('control_mode:=on_state', 'state_timeout:=0.5')
    try:
        stream(harness, robot, Q, lambda: robot.status == 'holding', 'holding')
        robot.move_to(GOAL, 10)
        stream(harness, robot, Q, lambda: robot.status == 'running', 'the move running')
        creeping = np.array([0.0, 0.009, 0.0, 0.0, -0.009, 0.0])   # below 0.01 rad/s
        mark = len(robot.log)
        end = time.monotonic() + 2.5
        frozen_stream(harness, robot, Q, creeping, lambda: time.monotonic() > end,
                      'the repeated states')
        assert 'state_timeout' not in after(robot.log, mark, 'status')
        assert robot.status == 'running' and not controller._frozen.any()
        efforts = after(robot.log, mark, 'effort')
        assert len(efforts) > 10 and all(e != [0.0] * 6 for e in efforts)
    finally:
        harness.close()
