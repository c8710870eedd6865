"""The `controller` and `plant` executables' own loops (doc/performance.md), over DDS with
the 1 kHz settings of config/sim_1khz.yaml: the controller in on_state mode answers every
state and still takes trajectories and parameter changes; the free-running plant holds its
initial state until the first command, then integrates under it; both exit cleanly on
SIGINT or SIGTERM, also in the middle of traffic. This test process plays the other side."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from ros_testing import call_service, PUMA, REPO, RESEND, RosHarness   # noqa: I100 - sets ROS_DOMAIN_ID first
from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics.nodes import controller, plant

SIM_1KHZ = os.path.join(REPO, 'config', 'sim_1khz.yaml')
PUMA_DEMO = os.path.join(REPO, 'config', 'sim_puma560.yaml')   # [LEE]'s start pose Q0
JOINTS = [f'joint_{i}' for i in range(1, 7)]
Q0 = [1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0]
RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
NODE_NAMES = {'controller': controller.NODE_NAME, 'plant': plant.NODE_NAME}


def start(module):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    return subprocess.Popen(
        [sys.executable, '-m', f'robot_dynamics.nodes.{module}', '--ros-args',
         '--params-file', PUMA, '--params-file', PUMA_DEMO, '--params-file', SIM_1KHZ,
         '-p', 'use_sim_time:=false'],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def interrupt(process, signum=signal.SIGINT):
    """SIGINT (as launch does) unless sent already (`signum` None); (exit status, output)."""
    if signum is not None and process.poll() is None:
        process.send_signal(signum)
    try:
        out, _ = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return process.returncode, out


@pytest.fixture
def harness():
    harness = RosHarness()
    yield harness
    harness.close()


class Probe(Node):
    def __init__(self, context):
        super().__init__('executable_probe', context=context)
        self.states, self.commands, self.status = [], [], []
        self.state_pub = self.create_publisher(JointState, '/joint_states', RELIABLE)
        self.command_pub = self.create_publisher(Float64MultiArray,
                                                 '/effort_controller/commands', RELIABLE)
        self.trajectory_pub = self.create_publisher(
            JointTrajectory, '/computed_torque_controller/joint_trajectory', RELIABLE)
        self.create_subscription(JointState, '/joint_states', self.states.append, RELIABLE)
        self.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                 self.commands.append, RELIABLE)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, '/computed_torque_controller/status',
                                 lambda msg: self.status.append(msg.data), latched)

    def send_state(self, q):
        msg = JointState(name=JOINTS, position=list(q), velocity=[0.0] * 6)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.state_pub.publish(msg)


def test_controller_executable_answers_states_takes_trajectories_and_parameters(harness):
    process = start('controller')
    try:
        probe = harness.add(Probe(harness.context))
        harness.spin_until(lambda: probe.count_subscribers('/joint_states') > 1    # + ours
                           and probe.count_publishers('/effort_controller/commands') > 1
                           and probe.trajectory_pub.get_subscription_count() > 0,
                           'the controller', wall_limit=60.0)
        for _ in range(500):                             # until both sides have matched
            probe.send_state(Q0)
            harness.spin_for(2)
            if probe.commands:
                break
        for k in range(len(probe.commands) + 1, len(probe.commands) + 21):
            probe.send_state(Q0)                         # one command per state
            harness.spin_until(lambda: len(probe.commands) >= k, f'the answer to state {k}')
        hold = np.array(probe.commands[-1].data)
        assert np.all(np.isfinite(hold)) and np.any(hold != 0.0)    # gravity held
        # a trajectory is taken by the loop: the status leaves `holding`
        point = JointTrajectoryPoint(positions=[q + 0.1 for q in Q0], velocities=[0.0] * 6)
        point.time_from_start.sec = 5
        probe.trajectory_pub.publish(JointTrajectory(joint_names=JOINTS, points=[point]))
        for _ in range(50):
            probe.send_state(Q0)
            harness.spin_for(2)
            if probe.status and probe.status[-1] == 'running':
                break
        assert probe.status[-1] == 'running'
        # a parameter service is served by the executor between the states
        client = probe.create_client(SetParameters,
                                     '/computed_torque_controller/set_parameters')
        harness.spin_until(client.service_is_ready, 'the parameter service')
        value = ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY,
                               double_array_value=[50.0] * 6)
        response = call_service(harness, client, SetParameters.Request(
            parameters=[ParameterMsg(name='gains.kp', value=value)]), 'the set_parameters response',
            resend_after=RESEND, while_waiting=lambda: probe.send_state(Q0))
        assert response.results[0].successful
    finally:
        code, out = interrupt(process)
    assert code == 0, out
    assert 'Traceback' not in out


def test_plant_executable_holds_until_the_first_command_then_integrates(harness):
    process = start('plant')
    try:
        probe = harness.add(Probe(harness.context))
        harness.spin_until(lambda: len(probe.states) >= 50, 'states from the plant',
                           wall_limit=60.0)
        for state in probe.states:                       # no command yet: the arm stays put
            assert list(state.position) == Q0 and not any(state.velocity)
        harness.spin_until(lambda: probe.command_pub.get_subscription_count() > 0,
                           'the plant to subscribe')
        probe.command_pub.publish(Float64MultiArray(data=[0.0] * 6))   # zero effort: falls
        count = len(probe.states)
        harness.spin_until(lambda: any(abs(v) > 1e-6 for s in probe.states[count:]
                                       for v in s.velocity), 'the arm to move')
    finally:
        code, out = interrupt(process)
    assert code == 0, out
    assert 'free-running loop (closed_loop=True)' in out and 'Traceback' not in out
    # the node shuts its context down itself, after its last words: they reach /rosout too
    assert 'Failed to publish log message to rosout' not in out, out


def heard_from(module, probe, marks):
    """Since `marks`: a command with gravity in it (the probe's own are zero), or a state
    with efforts (the probe's own have none)."""
    if module == 'controller':
        return any(any(command.data) for command in probe.commands[marks[0]:])
    return any(len(state.effort) for state in probe.states[marks[1]:])


@pytest.mark.parametrize('module', ['controller', 'plant'])
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_executables_stop_cleanly_in_the_middle_of_traffic(harness, module, signum):
    """A stop signal lands while states, commands and parameter requests flow: exit 0
    with no traceback and no rcl error (rclpy's own handler shut the context down from
    its thread while the node was still using it: now and then an RCLError from the
    executor, and the plant's last log line never reached /rosout)."""
    probe = harness.add(Probe(harness.context))
    client = probe.create_client(SetParameters, f'/{NODE_NAMES[module]}/set_parameters')
    for _ in range(3):
        process, sent = start(module), False
        try:
            harness.spin_until(client.service_is_ready, f'the {module}', wall_limit=60.0)
            value = ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY,
                                   double_array_value=[50.0] * 6)
            request = SetParameters.Request(parameters=[ParameterMsg(
                name='gains.kp' if module == 'controller' else 'initial_positions',
                value=value)])                               # (the plant's is read-only)
            marks = len(probe.commands), len(probe.states)
            k = 0                     # ≈ 0.3 s of traffic once this process has spoken
            while k < 300 or not heard_from(module, probe, marks):
                probe.send_state(Q0)
                probe.command_pub.publish(Float64MultiArray(data=[0.0] * 6))
                if k % 20 == 0:
                    client.call_async(request)
                harness.spin_for(1)
                k += 1
                assert k < 30000, f'nothing from the {module}'
            process.send_signal(signum)
            sent = True
            for _ in range(100):                             # traffic goes on meanwhile
                probe.send_state(Q0)
                probe.command_pub.publish(Float64MultiArray(data=[0.0] * 6))
                harness.spin_for(1)
        finally:
            code, out = interrupt(process, None if sent else signum)
        assert code == 0, out
        assert 'Traceback' not in out and 'Failed to publish' not in out, out
