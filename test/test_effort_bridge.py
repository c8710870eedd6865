"""The effort path into ros2_control over DDS, with a stand-in effort controller of the
test's own: an rclpy node named `effort_controller` that declares `joints` (so it serves
`/effort_controller/get_parameters`, as every ros2_control controller does) and records the
Float64MultiArray commands on its `~/commands`, as effort_controllers/JointGroupEffortController
takes them.

Before its first effort the controller asks the effort controller for `joints`: the same
list in the same order -> efforts flow; another order -> one error line naming both lists
and no effort at all; no effort controller (only another subscriber of the topic, or
nobody) -> one info line and efforts flow. At exit (node destroyed; the `controller`
executable on SIGINT and SIGTERM) the last effort sent is a zero vector."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from ros_testing import PUMA, REPO, RosHarness   # noqa: I100 - sets ROS_DOMAIN_ID first
from rcl_interfaces.msg import Log
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics.nodes.common.command_controller import controller_of
from robot_dynamics.nodes.controller import ComputedTorqueController

JOINTS = [f'joint_{i}' for i in range(1, 7)]
Q = [0.3, -0.4, 0.5, 0.2, -0.6, 0.7]
COMMANDS = '/effort_controller/commands'
RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class EffortControllerStandIn(Node):
    """A node named like the effort controller: `joints` declared, commands recorded."""

    def __init__(self, context, joints, name='effort_controller', topic='~/commands'):
        # an override: the test's parameter file gives every node ("/**") the PUMA's joints
        overrides = ([Parameter('joints', Parameter.Type.STRING_ARRAY, list(joints))]
                     if joints is not None else [])
        super().__init__(name, context=context, parameter_overrides=overrides)
        if joints is not None:
            self.declare_parameter('joints', list(joints))
        self.commands = []
        self.create_subscription(Float64MultiArray, topic,
                                 lambda msg: self.commands.append(list(msg.data)), 10)


class Robot(Node):
    """/joint_states of an arm at rest at Q, and the log lines on /rosout."""

    def __init__(self, context):
        super().__init__('robot', context=context)
        self.pub = self.create_publisher(JointState, '/joint_states', 10)
        self.log = []
        self.create_subscription(Log, '/rosout', lambda msg: self.log.append(msg.msg),
                                 QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        self.outputs = 0
        self.create_subscription(JointState, '/computed_torque_controller/output',
                                 self._output, 10)
        self.create_timer(0.01, self.send)

    def _output(self, msg):
        self.outputs += 1

    def send(self):
        msg = JointState(name=JOINTS, position=Q, velocity=[0.0] * 6)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub.publish(msg)

    def said(self, part):
        return any(part in line for line in self.log)


@pytest.fixture
def harness():
    harness = RosHarness(PUMA)
    yield harness
    harness.close()


def controller_node(harness):
    return harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[
            Parameter('control_rate', value=100.0)]))


def test_the_controller_is_derived_from_the_topic():
    assert controller_of('/effort_controller/commands') == '/effort_controller'
    assert controller_of('/arm/effort_controller/commands') == '/arm/effort_controller'
    assert controller_of('/effort_commands') is None
    assert controller_of('/commands') is None


def test_the_same_order_lets_the_efforts_flow(harness):
    robot = harness.add(Robot(harness.context))
    effort = harness.add(EffortControllerStandIn(harness.context, JOINTS))
    controller = controller_node(harness)
    harness.spin_until(lambda: len(effort.commands) >= 10, 'efforts at the effort controller')
    assert controller._command_check.state == 'matched'
    assert all(len(c) == 6 and np.all(np.isfinite(c)) for c in effort.commands)
    assert np.any(np.array(effort.commands[-1]) != 0.0)      # gravity held
    harness.spin_until(lambda: robot.said('takes the same joints in the same order'),
                       'the info line')


def test_another_order_is_refused_and_nothing_is_published(harness):
    robot = harness.add(Robot(harness.context))
    swapped = [JOINTS[1], JOINTS[0]] + JOINTS[2:]
    effort = harness.add(EffortControllerStandIn(harness.context, swapped))
    recorder = harness.add(EffortControllerStandIn(harness.context, None, name='recorder',
                                                   topic=COMMANDS))
    controller = controller_node(harness)
    harness.spin_until(lambda: robot.said('no efforts published'), 'the refusal line')
    line = next(line for line in robot.log if 'no efforts published' in line)
    assert str(swapped) in line and str(JOINTS) in line and 'another order' in line
    start = robot.outputs
    harness.spin_until(lambda: robot.outputs >= start + 30, '30 more control cycles')
    assert controller._command_check.state == 'mismatch'
    assert effort.commands == [] and recorder.commands == []
    controller.destroy_node()                   # and no zero at exit either
    harness.nodes.remove(controller)
    harness.spin_for(20)
    assert effort.commands == [] and recorder.commands == []


def test_other_joints_are_refused(harness):
    robot = harness.add(Robot(harness.context))
    effort = harness.add(EffortControllerStandIn(harness.context, JOINTS[:5]))
    controller_node(harness)
    harness.spin_until(lambda: robot.said('no efforts published'), 'the refusal line')
    assert any('other joints' in line for line in robot.log)
    start = robot.outputs
    harness.spin_until(lambda: robot.outputs >= start + 20, '20 more control cycles')
    assert effort.commands == []


def test_without_an_effort_controller_the_efforts_flow_unchecked(harness):
    robot = harness.add(Robot(harness.context))
    recorder = harness.add(EffortControllerStandIn(harness.context, None, name='recorder',
                                                   topic=COMMANDS))
    controller = controller_node(harness)
    harness.spin_until(lambda: len(recorder.commands) >= 10, 'efforts at the recorder')
    assert controller._command_check.state == 'unchecked'
    harness.spin_until(lambda: robot.said('joint order of the effort controller not '
                                          'checked'), 'the info line')
    lines = [line for line in robot.log if 'not checked' in line]
    assert len(lines) == 1 and '/recorder' in lines[0]


def test_an_effort_controller_appearing_later_is_asked_then(harness):
    robot = harness.add(Robot(harness.context))
    recorder = harness.add(EffortControllerStandIn(harness.context, None, name='recorder',
                                                   topic=COMMANDS))
    controller = controller_node(harness)
    harness.spin_until(lambda: len(recorder.commands) >= 5, 'unchecked efforts')
    assert controller._command_check.state == 'unchecked'
    swapped = [JOINTS[1], JOINTS[0]] + JOINTS[2:]
    effort = harness.add(EffortControllerStandIn(harness.context, swapped))
    harness.spin_until(lambda: robot.said('no efforts published'), 'the refusal line')
    count = len(recorder.commands)
    start = robot.outputs
    harness.spin_until(lambda: robot.outputs >= start + 20, '20 more control cycles')
    assert len(recorder.commands) == count and effort.commands == []


def test_with_the_check_off_the_efforts_flow_whatever_the_order(harness):
    harness.add(Robot(harness.context))
    swapped = [JOINTS[1], JOINTS[0]] + JOINTS[2:]
    effort = harness.add(EffortControllerStandIn(harness.context, swapped))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[
            Parameter('check_command_controller', value=False)]))
    harness.spin_until(lambda: len(effort.commands) >= 5, 'efforts, unchecked')
    assert controller._command_check.state == 'off'


def test_destroying_the_node_sends_a_last_zero(harness):
    harness.add(Robot(harness.context))
    effort = harness.add(EffortControllerStandIn(harness.context, JOINTS))
    controller = controller_node(harness)
    harness.spin_until(lambda: len(effort.commands) >= 5, 'efforts')
    assert np.any(np.array(effort.commands[-1]) != 0.0)
    harness.nodes.remove(controller)
    harness.executor.remove_node(controller)
    controller.destroy_node()
    count = len(effort.commands)
    harness.spin_until(lambda: len(effort.commands) > count and effort.commands[-1]
                       == [0.0] * 6, 'the last zero')


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_the_executable_sends_a_last_zero_on_a_stop_signal(harness, signum):
    effort = harness.add(EffortControllerStandIn(harness.context, JOINTS))
    harness.add(Robot(harness.context))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    process = subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.controller', '--ros-args',
         '--params-file', PUMA], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        harness.spin_until(lambda: len(effort.commands) >= 10, 'efforts from the executable',
                           wall_limit=60.0)
        assert np.any(np.array(effort.commands[-1]) != 0.0)
        process.send_signal(signum)
        harness.spin_until(lambda: process.poll() is not None, 'the exit')
        harness.spin_for(20)
        out = process.stdout.read()
        assert process.returncode == 0, out
        assert effort.commands[-1] == [0.0] * 6, out
        assert 'zero effort sent' in out
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


CRASHING_LOOP = '''
import sys
from robot_dynamics.nodes.common import runner
from robot_dynamics.nodes.controller import ComputedTorqueController, NODE_NAME


def spin(node, executor, running):
    """The controller's loop, failing with an unexpected exception once efforts flow."""
    while not node._commanding:
        executor.spin_once(timeout_sec=0.1)
    for _ in range(20):
        executor.spin_once(timeout_sec=0.01)
    raise RuntimeError('a bug in the loop')


sys.exit(runner.run(ComputedTorqueController, NODE_NAME, None, spin))
'''


def test_an_exception_out_of_the_loop_still_sends_a_last_zero(harness):
    effort = harness.add(EffortControllerStandIn(harness.context, JOINTS))
    harness.add(Robot(harness.context))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    process = subprocess.Popen(
        [sys.executable, '-c', CRASHING_LOOP, '--ros-args', '--params-file', PUMA], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        harness.spin_until(lambda: process.poll() is not None, 'the crash', wall_limit=60.0)
        harness.spin_for(20)
        out = process.stdout.read()
        assert process.returncode != 0 and 'a bug in the loop' in out, out
        assert len(effort.commands) > 1 and np.any(np.array(effort.commands[-2]) != 0.0)
        assert effort.commands[-1] == [0.0] * 6, out
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_managed_controller_asks_again_on_each_activation(harness):
    from robot_dynamics.nodes.managed_controller import ManagedComputedTorqueController
    robot = harness.add(Robot(harness.context))
    swapped = [JOINTS[1], JOINTS[0]] + JOINTS[2:]
    effort = harness.add(EffortControllerStandIn(harness.context, swapped))
    managed = harness.add(ManagedComputedTorqueController(context=harness.context))
    managed.trigger_configure()
    managed.trigger_activate()
    harness.spin_until(lambda: robot.said('no efforts published'), 'the refusal line')
    start = robot.outputs
    harness.spin_until(lambda: robot.outputs >= start + 20, '20 control cycles')
    assert effort.commands == []
    # the effort controller is fixed; this one is deactivated (no zero: it was refusing)
    # and activated again, which asks again
    effort.set_parameters([Parameter('joints', Parameter.Type.STRING_ARRAY, JOINTS)])
    managed.trigger_deactivate()
    assert effort.commands == []
    managed.trigger_activate()
    harness.spin_until(lambda: len(effort.commands) >= 10, 'efforts after the activation')
    assert managed._command_check.state == 'matched'
    managed.trigger_deactivate()
    harness.spin_until(lambda: effort.commands[-1] == [0.0] * 6, 'the deactivation zero')


def test_an_unexpected_error_in_the_control_cycle_commands_zero_effort(harness):
    """A bug in the cycle before its effort went out (here: the law raising) is logged,
    and the effort controller gets zero effort instead of keeping the last one, as a
    forward_command_controller would; the efforts resume when the cycle works again."""
    robot = harness.add(Robot(harness.context))
    effort = harness.add(EffortControllerStandIn(harness.context, JOINTS))
    controller = controller_node(harness)
    harness.spin_until(lambda: len(effort.commands) >= 5, 'efforts at the effort controller')
    assert np.any(np.array(effort.commands[-1]) != 0.0)          # gravity held
    law = controller.law

    class Broken:
        def effort(self, *args):
            raise RuntimeError('a bug in the law')
    controller.law = Broken()
    mark = len(effort.commands)
    harness.spin_until(lambda: robot.said('zero effort commanded')
                       and len(effort.commands) >= mark + 3, 'the zero efforts')
    assert all(c == [0.0] * 6 for c in effort.commands[mark + 1:mark + 3])
    assert controller.unexpected_errors >= 3
    controller.law = law
    mark = len(effort.commands)
    harness.spin_until(lambda: len(effort.commands) >= mark + 3, 'efforts again')
    assert np.any(np.array(effort.commands[-1]) != 0.0)
