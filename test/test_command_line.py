"""What a ROS user types, through the executables: `sim` takes `--ros-args` after its own
options and its `-p` values win over config/sim.yaml (a bad one is refused); a parameter a
node does not have is named in a warning; errors before a remapped node exists are logged
under its new name and say which section of the file did not apply; Ctrl-C while an
executable is still starting exits 130 without a traceback; one simulation's /diagnostics
are stamped on one clock."""

import argparse
import os
import signal
import subprocess
import sys
import time

import pytest

from ros_testing import PUMA, REPO, RosHarness, SIM   # noqa: I100 - sets ROS_DOMAIN_ID

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node

from robot_dynamics import _startup
from robot_dynamics.nodes import sim
from robot_dynamics.parameters.params_file import (command_line_parameters, node_name_of,
                                                   node_sections, section_applies)
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.nodes.common.ros_params import ConfigurationError
from robot_dynamics.nodes.common.runner import logger_name, sections_hint, unknown_parameters

TIMEOUT = 120    # s: a safety net against hangs, not a timing assertion
KP = [400.0, 410.0, 420.0, 430.0, 440.0, 450.0]     # not config/sim.yaml's 100


def environment():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')


def run(args, cwd=REPO):
    result = subprocess.run([sys.executable, *args], cwd=cwd, env=environment(),
                            capture_output=True, text=True, timeout=TIMEOUT)
    return result.returncode, result.stdout, result.stderr


# ---------------------------------------------------------------------- sim --ros-args


@pytest.mark.parametrize('argv', [
    ['--duration', '2', '--ros-args', '--log-level', 'warn'],
    ['--duration', '2', '--', '--ros-args', '--log-level', 'warn'],
])
def test_sim_takes_ros_args_after_its_own_options(argv):
    args = sim.parse_args(argv)
    assert args.duration == 2.0
    assert [a for a in args.ros_args if a != '--'] == ['--ros-args', '--log-level', 'warn']


def test_parameter_items_read_values_as_rcl_does_and_name_the_node():
    items = sim.parameter_items(['--ros-args', '-p', 'gains.kp:=[400, 410.0]', '--param',
                                 'computed_torque_controller:state_timeout:=0.2', '-p',
                                 'integration_method:=rk4', '-r', '__ns:=/x', '--',
                                 '-p', 'outside:=1'])
    assert items == [(None, 'gains.kp', [400.0, 410.0]),
                     ('computed_torque_controller', 'state_timeout', 0.2),
                     (None, 'integration_method', 'rk4')]


def sim_nodes(*ros_args):
    """sim's nodes built as `sim --ros-args <ros_args>` builds them, files first."""
    harness = RosHarness(PUMA, SIM, ros_args=list(ros_args), layer_overrides=False)
    args = argparse.Namespace(control_rate=None, integration_step=None, real_time_factor=0.0,
                              duration=1.0, move_duration=2.0, csv=None, plot=None,
                              ros_args=list(ros_args))
    return harness, args


def test_sim_p_values_win_over_the_sim_file():
    """rcl alone applies config/sim.yaml's /**/computed_torque_controller section after
    the command line's /** values here (it goes by the order the nodes are named in):
    gains.kp from -p would be silently 100."""
    harness, args = sim_nodes('-p', f'gains.kp:={KP}', '-p',
                              'computed_torque_controller:state_timeout:=0.25',
                              '-p', 'plant_simulator:publish_rate:=50.0')
    try:
        nodes = sim.build_nodes(args, harness.context)
        plant, controller = nodes[0], nodes[1]
        try:
            assert list(controller.law.kp) == KP
            assert controller.state_timeout == 0.25
            assert plant.get_parameter('publish_rate').value == 50.0
        finally:
            for node in nodes:
                node.destroy_node()
    finally:
        harness.close()


def test_sim_refuses_a_bad_p_value_naming_it():
    harness, args = sim_nodes('-p', 'state_timeout:=-3.0')
    try:
        with pytest.raises(ConfigurationError, match=r'state_timeout: -3\.0 is out of range'):
            sim.build_nodes(args, harness.context)
    finally:
        harness.close()


def test_sim_executable_with_ros_args_runs_quietly_and_refuses_a_bad_value():
    code, stdout, stderr = run(['-m', 'robot_dynamics.nodes.sim', '--duration', '0.5',
                                '--ros-args', '--log-level', 'warn'])
    assert code == 0, stderr
    assert 'simulated 0.5' in stdout and '[INFO]' not in stderr, stderr
    code, _, stderr = run(['-m', 'robot_dynamics.nodes.sim', '--duration', '0.5',
                           '--ros-args', '-p', 'state_timeout:=-3.0'])
    assert code == 1 and 'Traceback' not in stderr
    assert 'bad parameter: state_timeout: -3.0 is out of range' in stderr, stderr


def test_sim_executable_warns_about_a_p_that_no_node_has():
    code, _, stderr = run(['-m', 'robot_dynamics.nodes.sim', '--duration', '0.2',
                           '--ros-args', '-p', 'control_ratez:=5.0'])
    assert code == 0, stderr
    lines = [line for line in stderr.splitlines() if 'control_ratez' in line]
    assert len(lines) == 1 and '[WARN]' in lines[0] and 'ignored' in lines[0], stderr


# ---------------------------------------------------------------------- unknown parameters


def test_unknown_parameters_are_those_given_to_the_node_that_it_lacks(tmp_path):
    own = tmp_path / 'plant.yaml'
    own.write_text('/**/plant_simulator:\n  ros__parameters:\n    publish_rate: 50.0\n'
                   '    publish_ratte: 20.0\n/**/computed_torque_controller:\n'
                   '  ros__parameters:\n    gains:\n      kp: [1.0]\n')
    argv = ['plant', '--ros-args', '--params-file', PUMA, '--params-file', str(own), '-p',
            'control_rate:=-5.0', '-p', 'integration_step:=0.002', '-p',
            'computed_torque_controller:state_timeout:=1.0']
    harness = RosHarness(PUMA, str(own), ros_args=argv[6:])
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        # the controller's section and its node-specific -p are not the plant's business;
        # the robot block under /** is shared by every node
        assert unknown_parameters(plant, argv) == ['control_rate', 'publish_ratte']
    finally:
        harness.close()


def test_the_plant_executable_warns_once_naming_each_unknown_parameter():
    process = subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.plant', '--ros-args', '--params-file',
         PUMA, '-p', 'control_rate:=-5.0', '-p', 'gains.kp:=[1.0]'],
        env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.monotonic() + TIMEOUT
        for line in process.stdout:
            lines.append(line)
            if 'unknown parameter' in line or time.monotonic() > deadline:
                break
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=30)
    out = ''.join(lines) + rest
    warnings = [line for line in out.splitlines() if 'unknown parameter' in line]
    assert len(warnings) == 1, out
    assert '[WARN]' in warnings[0] and '[plant_simulator]' in warnings[0]
    assert 'control_rate, gains.kp' in warnings[0] and '/plant_simulator' in warnings[0]


# ---------------------------------------------------------------------- names under a remap


@pytest.mark.parametrize('args, expected', [
    ([], ('', 'computed_torque_controller')),
    (['--ros-args', '-r', '__node:=ctrl2'], ('', 'ctrl2')),
    (['--ros-args', '--remap', 'computed_torque_controller:__node:=ctrl2', '-r',
      '__ns:=/arm/left'], ('/arm/left', 'ctrl2')),
    (['--ros-args', '-r', 'other_node:__node:=ctrl2'], ('', 'computed_torque_controller')),
    (['-r', '__node:=ctrl2'], ('', 'computed_torque_controller')),    # not a ROS argument
])
def test_node_name_under_remap_rules(args, expected):
    assert node_name_of('computed_torque_controller', ['x', *args]) == expected


def test_logger_name_is_rcls():
    assert logger_name('plant_simulator', ['x', '--ros-args', '-r', '__ns:=/arm', '-r',
                                           '__node:=p2']) == 'arm.p2'


@pytest.mark.parametrize('key, fqn, applies', [
    ('/**', '/ctrl2', True), ('/**/ctrl2', '/arm/ctrl2', True), ('/ctrl2', '/ctrl2', True),
    ('/computed_torque_controller', '/ctrl2', False), ('/*/ctrl2', '/arm/ctrl2', True),
    ('/*/ctrl2', '/ctrl2', False), ('/arm/ctrl2', '/ctrl2', False),
])
def test_sections_apply_as_rcl_matches_them(key, fqn, applies):
    assert section_applies(key, fqn) is applies


def test_sections_are_read_with_dotted_names():
    assert node_sections(SIM)['/**/demo_move'] == ['move_duration']
    assert 'gains.kp' in node_sections(SIM)['/**']
    assert 'robot.position_min' in node_sections(SIM)['/**/computed_torque_controller']


def test_command_line_parameters_for_one_node():
    argv = ['x', '--ros-args', '-p', 'a:=1', '-p', 'n1:b:=2', '-p', 'n2:c:=3']
    assert command_line_parameters(argv, 'n1') == ['a', 'b']


def test_a_remapped_controller_without_its_parameters_says_which_section_did_not_apply(
        tmp_path):
    """A `ros2 param dump` is keyed by the node's name then: started as ctrl2 a file's
    section for another node (not the usual computed_torque_controller, whose sections
    still apply after a rename) does not apply; the error is logged under ctrl2 and names
    both keys."""
    dump = tmp_path / 'dump.yaml'
    dump.write_text('/ctrl3:\n  ros__parameters:\n    state_timeout: 0.2\n')
    code, _, stderr = run(['-m', 'robot_dynamics.nodes.controller', '--ros-args', '-r',
                           '__node:=ctrl2', '--params-file', str(dump)])
    assert code == 1 and 'Traceback' not in stderr
    (line,) = [line for line in stderr.splitlines() if '[ERROR]' in line]
    assert '[ctrl2]' in line and 'no robot parameters given to /ctrl2' in line, line
    assert '"/ctrl2:"' in line and "'/ctrl3:'" in line, line
    assert 'config/puma560.yaml' in line
    usual = tmp_path / 'usual.yaml'
    usual.write_text('/computed_torque_controller:\n  ros__parameters:\n'
                     '    state_timeout: 0.2\n')
    assert sections_hint('computed_torque_controller', [
        'x', '--ros-args', '--params-file', str(usual)]) == ''
    assert sections_hint('computed_torque_controller', [
        'x', '--ros-args', '-r', '__node:=ctrl2', '--params-file', str(usual)]) == ''


# ---------------------------------------------------------------------- Ctrl-C at start-up


def test_the_start_up_handler_is_for_the_executables_only():
    assert _startup.starting_an_executable(['-m'])
    assert _startup.starting_an_executable(['/usr/lib/robot_dynamics/sim', '--duration'])
    assert not _startup.starting_an_executable([os.path.join('bin', 'pytest')])
    assert not _startup.starting_an_executable([])
    # this process (pytest) is not an executable of the package: Python's own handler
    assert signal.getsignal(signal.SIGINT) is not _startup._interrupted


@pytest.mark.parametrize('delay', [0.0, 0.1, 0.25, 0.5])
def test_ctrl_c_while_sim_starts_exits_without_a_traceback(delay):
    """SIGINT at `delay` s after the process began importing numpy (the package's own
    start-up, after the interpreter's): exit status 130 with one line, while it is still
    starting or once it runs (the orderly stop), or 0 if the run ended first."""
    process = subprocess.Popen([sys.executable, '-m', 'robot_dynamics.nodes.sim',
                                '--duration', '5'], env=environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + TIMEOUT
    while process.poll() is None and time.monotonic() < deadline:
        with open(f'/proc/{process.pid}/maps', encoding='utf-8') as maps:
            if 'numpy' in maps.read():
                break
        time.sleep(0.002)
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=TIMEOUT)
    assert 'Traceback' not in out and 'KeyboardInterrupt' not in out, out
    assert process.returncode in (0, 130), out
    if process.returncode == 130:
        last = out.strip().splitlines()[-1]
        assert last == 'interrupted while starting' or last.startswith(
            'sim: stopped by SIGINT'), out


# ---------------------------------------------------------------------- /diagnostics clock


def test_plant_and_controller_stamp_diagnostics_on_the_simulated_clock():
    """In lock-step on simulated time (sim, sim.launch.py): the plant publishes /clock and
    the controller runs on it; both stamp /diagnostics with the simulated time."""
    from rclpy.parameter import Parameter
    from robot_dynamics.nodes.controller import ComputedTorqueController
    harness = RosHarness(PUMA, SIM, ros_args=['-p', 'real_time_factor:=1.0', '-p',
                                              'diagnostics.period:=0.2'])
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        harness.add(ComputedTorqueController(
            context=harness.context, parameter_overrides=[Parameter('use_sim_time',
                                                                    value=True)]))
        listener = harness.add(Node('stamps', context=harness.context))
        stamps = {}
        listener.create_subscription(
            DiagnosticArray, '/diagnostics', lambda msg: [stamps.setdefault(
                status.name.split(':')[0], []).append(
                    msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
                for status in msg.status], 100)
        harness.spin_until(lambda: plant.sim_time > 0.5 and all(
            len(stamps.get(name, [])) >= 3
            for name in ('plant_simulator', 'computed_torque_controller')), 'reports')
        wall = time.time()
        for name in ('plant_simulator', 'computed_torque_controller'):
            later = stamps[name][1:]       # the first may come before the first /clock
            assert all(0.0 < stamp <= plant.sim_time + 1e-9 for stamp in later), (
                name, later, plant.sim_time, wall)
    finally:
        harness.close()


def test_dev_py_sim_passes_ros_args_on(tmp_path):
    """`dev.py sim --duration D -- --ros-args ...` as the README shows it."""
    kp = '[400.0, 400.0, 400.0, 400.0, 400.0, 400.0]'
    code, stdout, stderr = run([os.path.join(REPO, 'tools', 'dev.py'), '--python',
                                sys.executable, 'sim', '--duration', '0.3', '--',
                                '--ros-args', '-p', f'gains.kp:={kp}', '--log-level', 'warn'],
                               cwd=tmp_path)
    assert code == 0, stderr
    assert 'simulated 0.3' in stdout and '[INFO]' not in stderr, stderr


def test_sim_names_another_process_publishing_on_its_topics():
    """A simulation on a ROS domain another process uses draws that process's messages
    (its /joint_states reached a sim's controller): the publishers outside the simulation
    are found by topic, for the one warning `sim` prints per topic."""
    harness, args = sim_nodes()
    try:
        nodes = sim.build_nodes(args, harness.context)
        try:
            for node in nodes:
                harness.add(node)
            harness.spin_for(20)
            assert sim.foreign_publishers(nodes) == {}
            from sensor_msgs.msg import JointState
            intruder = harness.add(Node('another_robot', context=harness.context))
            intruder.create_publisher(JointState, '/joint_states', 10)
            harness.spin_until(lambda: '/joint_states' in sim.foreign_publishers(nodes),
                               'the other publisher seen')
            assert sim.foreign_publishers(nodes) == {'/joint_states': 1}
            lines, warned = [], set()

            class Stub:
                def get_logger(self):
                    return argparse.Namespace(warning=lines.append)
            for _ in range(2):
                sim._warn_foreign(Stub(), nodes, warned)
            assert len(lines) == 1 and lines[0].startswith('/joint_states: 1 publisher outside')
            assert f"ROS_DOMAIN_ID {os.environ['ROS_DOMAIN_ID']}" in lines[0]
        finally:
            harness.nodes = [n for n in harness.nodes if n not in nodes]
            for node in nodes:
                harness.executor.remove_node(node)
                node.destroy_node()
    finally:
        harness.close()
