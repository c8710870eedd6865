"""send_trajectory over DDS: the published JointTrajectory equals the profile samples."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
rclpy = pytest.importorskip('rclpy')
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from robot_dynamics.nodes.send_trajectory import parse_arguments  # noqa: E402
from robot_dynamics.trajectories.profiles import sample_profile  # noqa: E402
from robot_dynamics.trajectories.sampler import TrajectoryCommand  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = f'/send_trajectory_test_{os.getpid()}'
GUARD = 60.0                                    # seconds; a hang guard, not an assertion


@pytest.fixture
def ros(monkeypatch):
    """A private rclpy context and node on this process's domain, destroyed afterwards."""
    monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    context = rclpy.Context()
    rclpy.init(context=context)   # the module's private ROS_DOMAIN_ID (conftest)
    node = rclpy.create_node('send_trajectory_test', context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        yield node, executor
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()


def launch(*arguments):
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
               PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.send_trajectory', *arguments],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def receive(node, executor, process, topic, tick=None):
    """Spin until the sender exits; returns (messages received on `topic`, its output)."""
    received = []
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(JointTrajectory, topic, received.append, reliable)
    deadline = time.monotonic() + GUARD
    while process.poll() is None and time.monotonic() < deadline:
        if tick is not None:
            tick()
        executor.spin_once(timeout_sec=0.05)
    for _ in range(20):                          # deliver anything still queued
        executor.spin_once(timeout_sec=0.01)
    if process.poll() is None:
        process.kill()
    return received, process.communicate()[0]


def assert_message_equals(msg, expected):
    got = TrajectoryCommand.from_message(msg)
    assert got.start_time == 0.0
    assert got.joint_names == expected.joint_names
    assert len(got.points) == len(expected.points)
    for p, e in zip(got.points, expected.points):
        assert p.time_from_start == pytest.approx(e.time_from_start, abs=1e-9)
        np.testing.assert_allclose(p.positions, e.positions, rtol=0, atol=0)
        np.testing.assert_allclose(p.velocities, e.velocities, rtol=0, atol=0)
        np.testing.assert_allclose(p.accelerations, e.accelerations, rtol=0, atol=0)


def test_published_trajectory_equals_the_trapezoid_samples(ros):
    node, executor = ros
    topic = PREFIX + '/trapezoid'
    process = launch('--positions', '0.5', '-0.25', '1.0', '--duration', '1.5',
                     '--profile', 'trapezoid', '--points', '9', '--joints', 'a', 'b', 'c',
                     '--start-from', '0.0', '0.1', '0.2', '--topic', topic)
    received, output = receive(node, executor, process, topic)
    assert process.returncode == 0, output
    assert len(received) == 1, output
    # no action server beside the topic: sent on the topic, and the sender says so
    assert f'no action server {PREFIX}/follow_joint_trajectory' in output
    assert 'the outcome is unknown' in output
    expected = sample_profile('trapezoid', [0.0, 0.1, 0.2], [0.5, -0.25, 1.0], 1.5, 9,
                              ('a', 'b', 'c'))
    assert_message_equals(received[0], expected)


def test_start_is_read_from_joint_states_by_name(ros):
    node, executor = ros
    topic, states = PREFIX + '/quintic', PREFIX + '/joint_states'
    publisher = node.create_publisher(JointState, states, 10)
    state = JointState(name=['elbow', 'shoulder'], position=[0.7, -0.3])

    def tick():
        publisher.publish(state)

    process = launch('--positions', '0.0', '0.0', '--duration', '2.0', '--points', '5',
                     '--joints', 'shoulder', 'elbow', '--topic', topic,
                     '--joint-states-topic', states)
    received, output = receive(node, executor, process, topic, tick)
    assert process.returncode == 0, output
    assert len(received) == 1, output
    expected = sample_profile('quintic', [-0.3, 0.7], [0.0, 0.0], 2.0, 5,
                              ('shoulder', 'elbow'))
    assert_message_equals(received[0], expected)


def test_exits_with_status_1_and_says_why_when_no_subscriber_matches():
    process = launch('--positions', '0.5', '--duration', '1.0', '--start-from', '0.0',
                     '--topic', PREFIX + '/nobody', '--timeout', '0.5')
    output = process.communicate(timeout=GUARD)[0]
    assert process.returncode == 1
    assert 'no subscriber on ' + PREFIX + '/nobody' in output


def test_exits_with_status_1_and_says_why_without_joint_states():
    process = launch('--positions', '0.5', '--duration', '1.0', '--timeout', '0.5',
                     '--joint-states-topic', PREFIX + '/silent', '--topic', PREFIX + '/x')
    output = process.communicate(timeout=GUARD)[0]
    assert process.returncode == 1
    assert PREFIX + '/silent' in output and '--start-from' in output


@pytest.mark.parametrize('waiting_for', ['joint_states', 'subscriber'])
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_while_waiting_exits_130_at_once_and_sends_nothing(ros, waiting_for, signum):
    node, executor = ros
    arguments = ['--positions', '0.5', '--duration', '1.0', '--timeout', '60',
                 '--joint-states-topic', PREFIX + '/silent', '--topic', PREFIX + '/sig']
    if waiting_for == 'subscriber':
        arguments += ['--start-from', '0.0']
    process = launch(*arguments)
    try:
        # it is waiting once its subscription (or publisher) is seen here
        topic = PREFIX + ('/silent' if waiting_for == 'joint_states' else '/sig')
        count = (node.count_subscribers if waiting_for == 'joint_states'
                 else node.count_publishers)
        deadline = time.monotonic() + GUARD
        while count(topic) == 0 and process.poll() is None and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        process.send_signal(signum)
        start = time.monotonic()
        output = process.communicate(timeout=GUARD)[0]
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output
    assert time.monotonic() - start < 10.0          # not after --timeout (60 s)
    assert 'Traceback' not in output and 'sent a' not in output, output


@pytest.mark.parametrize('arguments, message', [
    (['--positions', 'nan', '--duration', '1'], '--positions'),
    (['--positions', '1', '--duration', '0'], '--duration'),
    (['--positions', '1', '2', '--duration', '1', '--joints', 'a'], '--joints'),
    (['--positions', '1', '2', '--duration', '1', '--joints', 'a', 'a'], '--joints'),
    (['--positions', '1', '--duration', '1', '--start-from', '0', '0'], '--start-from'),
    (['--positions', '1', '--duration', '1', '--points', '0'], '--points'),
    (['--positions', '1', '--duration', '1', '--profile', 'cubic'], '--profile'),
])
def test_bad_arguments_exit_with_status_2_naming_the_option(arguments, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_arguments(arguments)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_default_joint_names_with_start_from_follow_the_config_convention():
    args = parse_arguments(['--positions', '1', '2', '--duration', '1',
                            '--start-from', '0', '0'])
    assert args.joints == ['joint_1', 'joint_2']
