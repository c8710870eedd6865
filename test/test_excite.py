"""The `excite` executable: the exciting trajectory it builds (from the measured start, at
rest at both ends, within the amplitude and the controller's limits), its options, and the
executable itself against a controller over DDS."""

import os
import subprocess
import sys
import time
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.excite import excitation_command, IdentificationSteps, parse_arguments
from robot_dynamics.trajectories.sampler import TrajectoryCommand
from ros_testing import PUMA, REPO, RosHarness

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
START = np.array([0.2, 0.5, -1.0, 0.1, 0.3, -0.2])      # inside the PUMA preset's limits
GUARD = 60.0                                           # s: a hang guard, not an assertion


@pytest.fixture(scope='module')
def puma():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return RobotModel.from_yaml(PUMA)


def columns(command):
    t = np.array([p.time_from_start for p in command.points])
    q, qd, qdd = (np.array([getattr(p, field) for p in command.points])
                  for field in ('positions', 'velocities', 'accelerations'))
    return t, q, qd, qdd


def test_starts_at_the_measured_position_at_rest_and_ends_there(puma):
    command, _ = excitation_command(puma, JOINTS, START, 6.0, amplitude=0.3)
    t, q, qd, qdd = columns(command)
    assert command.joint_names == JOINTS and command.start_time == 0.0
    assert t[0] == 0.0 and t[-1] == pytest.approx(6.0)
    np.testing.assert_allclose(q[0], START, atol=1e-12)
    np.testing.assert_allclose(q[-1], START, atol=1e-9)
    for ends in (qd[[0, -1]], qdd[[0, -1]]):
        np.testing.assert_allclose(ends, 0.0, atol=1e-9)
    assert np.all(np.diff(t) > 0.0)
    # it moves every joint, by at most the amplitude
    excursion = np.max(np.abs(q - START), axis=0)
    assert np.all(excursion <= 0.3 + 1e-9) and np.all(excursion > 0.05)


def test_stays_within_the_position_limits_near_one(puma):
    """Joint 2 starts 0.1 rad from its lower limit: scaled down, with a note, inside it."""
    start = START.copy()
    start[1] = puma.position_min[1] + 0.1
    command, notes = excitation_command(puma, JOINTS, start, 6.0, amplitude=0.5)
    _, q, _, _ = columns(command)
    assert np.all(q >= puma.position_min) and np.all(q <= puma.position_max)
    assert len(notes) == 1 and notes[0].startswith('joint_2: '), notes


def test_amplitude_per_joint(puma):
    amplitude = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
    command, _ = excitation_command(puma, JOINTS, START, 6.0, amplitude=amplitude)
    _, q, _, _ = columns(command)
    np.testing.assert_allclose(np.max(np.abs(q - START), axis=0), amplitude, rtol=1e-6)


def test_wrong_amplitude_count_and_start_outside_the_limits_are_refused(puma):
    with pytest.raises(ValueError, match='amplitude'):
        excitation_command(puma, JOINTS, START, 6.0, amplitude=[0.1, 0.2])
    outside = START.copy()
    outside[2] = puma.position_max[2] + 0.5
    with pytest.raises(ValueError, match=r'start\[2\]'):
        excitation_command(puma, JOINTS, outside, 6.0)


@pytest.mark.parametrize('arguments, message', [
    (['--duration', '0'], '--duration'),
    (['--duration', 'nan'], '--duration'),
    (['--amplitude', '-0.1'], '--amplitude'),
    (['--harmonics', '1'], '--harmonics'),
    (['--sample-period', '30'], '--sample-period'),
])
def test_bad_arguments_exit_with_status_2_naming_the_option(arguments, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_arguments(arguments)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_the_controller_is_the_namespace_of_the_topic_unless_given():
    assert parse_arguments([]).controller == '/computed_torque_controller'
    assert parse_arguments(['--topic', '/arm/ctc/joint_trajectory']).controller == '/arm/ctc'
    assert parse_arguments(['--controller', '/x']).controller == '/x'


def test_apply_implies_identify():
    assert not parse_arguments([]).identify
    assert parse_arguments(['--identify']).identify and not parse_arguments(
        ['--identify']).apply
    options = parse_arguments(['--apply'])
    assert options.identify and options.apply


def launch(*arguments):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.Popen([sys.executable, '-m', 'robot_dynamics.nodes.excite', *arguments],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def test_without_a_controller_exits_1_and_says_why():
    process = launch('--timeout', '1.0', '--controller', '/nobody_here')
    output = process.communicate(timeout=GUARD)[0]
    assert process.returncode == 1, output
    assert 'no robot model from /nobody_here' in output


def test_executable_sends_the_trajectory_for_the_controllers_model_from_joint_states():
    """`excite` against a running controller: the model and limits from the controller's
    parameters, the start from /joint_states; what arrives is excitation_command's."""
    harness = RosHarness(PUMA)
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        node = harness.add(rclpy_node(harness.context))
        received = []
        node.create_subscription(JointTrajectory,
                                 '/computed_torque_controller/joint_trajectory',
                                 received.append, 10)
        states = node.create_publisher(JointState, 'joint_states', 10)
        state = JointState(name=list(reversed(JOINTS)), position=START[::-1].tolist(),
                           velocity=[0.0] * 6)
        process = launch('--duration', '4', '--amplitude', '0.2', '--timeout', '20')
        deadline = time.monotonic() + GUARD
        while process.poll() is None and time.monotonic() < deadline:
            states.publish(state)
            harness.spin_for(5)
        harness.spin_until(lambda: received, 'the trajectory')
        output = process.communicate(timeout=GUARD)[0]
        assert process.returncode == 0, output
        expected, _ = excitation_command(controller.model, JOINTS, START, 4.0, 0.2)
        got = TrajectoryCommand.from_message(received[0])
        assert got.joint_names == JOINTS and len(got.points) == len(expected.points)
        for p, e in zip(got.points, expected.points):
            assert p.time_from_start == pytest.approx(e.time_from_start, abs=1e-9)
            np.testing.assert_allclose(p.positions, e.positions, rtol=0, atol=0)
            np.testing.assert_allclose(p.velocities, e.velocities, rtol=0, atol=0)
            np.testing.assert_allclose(p.accelerations, e.accelerations, rtol=0, atol=0)
    finally:
        harness.close()


def rclpy_node(context):
    from rclpy.node import Node
    return Node('excite_test', context=context)


@pytest.mark.parametrize('phase, message', [
    ('closing', 'no final estimate on payload_estimate/quality within 0.2 s'),
    ('applying', 'no answer from apply_payload_estimate within 0.2 s')])
def test_identify_gives_up_when_the_controller_stops_answering(phase, message):
    """--identify / --apply end with status 1 and the reason when the final estimate or the
    apply's answer does not come (a controller stopped meanwhile), instead of waiting for
    ever."""
    from rclpy.node import Node
    ros = RosHarness()
    try:
        node = ros.add(Node('excite_probe', context=ros.context))
        steps = IdentificationSteps(node, '/no_such_controller', apply=True)
        errors = []
        node.get_logger = lambda: SimpleNamespace(error=errors.append, info=errors.append)
        steps._enter(phase)
        steps.check(0.2)
        assert steps.exit_code is None            # not yet: the wait is bounded, not zero
        time.sleep(0.3)
        steps.check(0.2)
        assert steps.exit_code == 1 and steps.phase == 'done'
        assert errors and errors[-1].startswith(message)
    finally:
        ros.close()
