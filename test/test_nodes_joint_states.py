"""The controller's /joint_states handling over real DDS: mapping by name (shuffled order,
extra joints), no command before every controlled joint has been seen, best-effort and
reliable publishers both heard, malformed or non-finite messages ignored (never NaN on the
wire). The controller runs alone; the test plays the robot."""

import math

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.controller import ComputedTorqueController
from ros_testing import PUMA, RosHarness

JOINTS = [f'joint_{i}' for i in range(1, 7)]
Q = np.array([0.3, -0.4, 0.5, 0.2, -0.6, 0.7])   # in `joints` order


class FakeRobot(Node):
    """Publishes /joint_states, records the effort commands."""

    def __init__(self, context, reliability):
        super().__init__('fake_robot', context=context)
        qos = QoSProfile(depth=10, reliability=reliability)
        self.publisher = self.create_publisher(JointState, 'joint_states', qos)
        self.commands = []
        self.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                 lambda msg: self.commands.append(list(msg.data)), 10)

    def send(self, names, positions, velocities):
        msg = JointState(name=list(names), position=[float(v) for v in positions],
                         velocity=[float(v) for v in velocities])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.publisher.publish(msg)


@pytest.fixture
def loop(request):
    reliability = getattr(request, 'param', ReliabilityPolicy.RELIABLE)
    harness = RosHarness(PUMA, ros_args=['-p', 'control_mode:=on_state',
                                         '-p', 'state_timeout:=0.0'])
    controller = harness.add(ComputedTorqueController(context=harness.context))
    robot = harness.add(FakeRobot(harness.context, reliability))
    harness.spin_until(lambda: robot.publisher.get_subscription_count() > 0
                       and robot.count_publishers('/effort_controller/commands') > 0,
                       'discovery')
    yield harness, controller, robot
    harness.close()


def gravity(q):
    return dynamics.gravity_torques(RobotModel.from_yaml(PUMA), q)


def shuffled_with_extras():
    order = [4, 1, 5, 0, 3, 2]
    names = ['gripper_left'] + [JOINTS[i] for i in order] + ['conveyor']
    positions = [0.9] + [Q[i] for i in order] + [-2.0]
    return names, positions, [0.0] * len(names)


@pytest.mark.filterwarnings('ignore::UserWarning')
@pytest.mark.parametrize('loop', [ReliabilityPolicy.RELIABLE, ReliabilityPolicy.BEST_EFFORT],
                         indirect=True, ids=['reliable', 'best_effort'])
def test_shuffled_joint_states_with_extra_joints_are_mapped_by_name(loop):
    """Holding the measured position at rest, τ = g(q) — of q in `joints` order."""
    harness, _, robot = loop
    names, positions, velocities = shuffled_with_extras()
    robot.send(names, positions, velocities)
    harness.spin_until(lambda: robot.commands, 'an effort command')
    np.testing.assert_allclose(robot.commands[0], gravity(Q), rtol=1e-9, atol=1e-9)
    assert not np.allclose(robot.commands[0], gravity(np.array(positions[1:7])), atol=1e-3)


@pytest.mark.filterwarnings('ignore::UserWarning')
def test_no_command_until_every_controlled_joint_has_been_seen(loop):
    harness, controller, robot = loop
    robot.send(JOINTS[:4], Q[:4], [0.0] * 4)
    robot.send(['joint_6', 'gripper'], [Q[5], 0.1], [0.0, 0.0])
    harness.spin_until(lambda: np.isfinite(controller._received).sum() == 5,
                       'both partial messages')
    harness.spin_for(20)
    assert robot.commands == []
    robot.send(['joint_5'], [Q[4]], [0.0])            # the last one, in a message of its own
    harness.spin_until(lambda: robot.commands, 'an effort command')
    np.testing.assert_allclose(robot.commands[0], gravity(Q), rtol=1e-9, atol=1e-9)


@pytest.mark.filterwarnings('ignore::UserWarning')
def test_non_finite_or_malformed_joint_states_are_ignored_never_nan_on_the_wire(loop):
    harness, _, robot = loop
    bad = Q.copy()
    bad[2] = math.nan
    robot.send(JOINTS, bad, [0.0] * 6)                 # NaN position
    robot.send(JOINTS, Q, [0.0] * 5)                   # velocity array too short
    robot.send(JOINTS, Q, [0.0, 0.0, math.inf, 0.0, 0.0, 0.0])
    harness.spin_for(60)
    assert robot.commands == []
    robot.send(JOINTS, Q, [0.0] * 6)
    harness.spin_until(lambda: robot.commands, 'an effort command')
    assert all(math.isfinite(v) for command in robot.commands for v in command)
    np.testing.assert_allclose(robot.commands[-1], gravity(Q), rtol=1e-9, atol=1e-9)


@pytest.mark.filterwarnings('ignore::UserWarning')
def test_a_republished_state_is_answered_once_and_a_split_state_each_part():
    """on_state answers each state once: the same message again (a lock-step simulator
    re-sends the state it waits on) gets no second command, or a lock-step plant would take
    that command as the answer to its next state. Two publishers' messages with one stamp
    (different joints or values) are each answered."""
    harness = RosHarness(PUMA, ros_args=['-p', 'control_mode:=on_state',
                                         '-p', 'state_timeout:=0.0'])
    try:
        harness.add(ComputedTorqueController(context=harness.context))
        robot = harness.add(FakeRobot(harness.context, ReliabilityPolicy.RELIABLE))
        harness.spin_until(lambda: robot.publisher.get_subscription_count() > 0
                           and robot.count_publishers('/effort_controller/commands') > 0,
                           'discovery')
        stamp = robot.get_clock().now().to_msg()

        def state(names, positions):
            msg = JointState(name=list(names), position=[float(v) for v in positions],
                             velocity=[0.0] * len(names))
            msg.header.stamp = stamp
            return msg
        first = state(JOINTS, Q)
        robot.publisher.publish(first)
        harness.spin_until(lambda: len(robot.commands) == 1, 'the answer to the state')
        robot.publisher.publish(first)                         # the same state again
        moved = Q.copy()
        moved[[1, 2]] += 0.1
        robot.publisher.publish(state(JOINTS[1:3], moved[1:3]))  # same stamp, other values
        harness.spin_until(lambda: len(robot.commands) >= 2, 'the answer to the split part')
        harness.spin_for(30)
        assert len(robot.commands) == 2, robot.commands
        assert not np.allclose(robot.commands[1], robot.commands[0], atol=1e-6)  # its state
    finally:
        harness.close()
