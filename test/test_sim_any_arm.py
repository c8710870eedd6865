"""`sim` on any arm: every preset of config/ and URDF arms of other sizes run the closed-loop
demo in simulated time (lock-step, as fast as the CPU allows) and track a move derived from
their limits (the PUMA 560 keeps [LEE] §5's); the simulation settings hold no per-joint
list; a wrong-sized value is named with the file it came from; control_mode timer in
lock-step is refused in one line; another simulation on the ROS domain is refused at
start; Ctrl-C on `tools/dev.py sim` exits 130 with one line and still writes the CSV and
the plot (into a folder it makes)."""

import csv
import math
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import yaml

from conftest import preset_paths
from ros_testing import REPO, RosHarness, WALL_LIMIT   # noqa: I100 - sets ROS_DOMAIN_ID

from rosgraph_msgs.msg import Clock

from robot_dynamics.model import RobotModel
from robot_dynamics.nodes import sim
from robot_dynamics.nodes.common import demo_plan

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
CONFIG = os.path.join(REPO, 'config')
SIM_FILES = ('sim.yaml', 'sim_1khz.yaml')            # node settings for any arm
DURATION = 3.0         # simulated s: the 2 s move and 1 s of settling (10 time constants)
MOVE = 2.0             # s, config/sim.yaml's move_duration
URDFS = {'ur5': 'tool0', 'skewed_arm': 'tool'}      # test/data/<name>.urdf: tip link
LEE_START, LEE_GOAL = (90, 0, 90, 0, 0, 0), (45, 30, 0, 45, 60, 90)     # deg, README


def control_period():
    """1 / config/sim.yaml's publish_rate (lock-step: one control cycle per state)."""
    with open(os.path.join(CONFIG, 'sim.yaml'), encoding='utf-8') as stream:
        settings = yaml.safe_load(stream)
    return 1.0 / settings['/**/plant_simulator']['ros__parameters']['publish_rate']


def urdf_robot_file(folder, name):
    path = os.path.join(folder, f'{name}.yaml')
    with open(path, 'w', encoding='utf-8') as stream:
        yaml.safe_dump({'/**': {'ros__parameters': {'robot': {
            'source': 'urdf', 'urdf_file': os.path.join(REPO, 'test', 'data', f'{name}.urdf'),
            'tip_link': URDFS[name]}}}}, stream)
    return path


def read_run(path):
    """(joint names, {quantity: (cycles, n) array}) of a `sim --csv` file."""
    with open(path, encoding='utf-8', newline='') as stream:
        rows = list(csv.reader(stream))
    header, values = rows[0], np.array(rows[1:], dtype=float)
    names = [column[len('q_'):] for column in header if column.startswith('q_')
             and not column.startswith('q_ref_')]
    table = {quantity: values[:, [header.index(f'{quantity}_{name}') for name in names]]
             for quantity in sim.CSV_QUANTITIES}
    return names, table


ARMS = [pytest.param(('preset', os.path.splitext(os.path.basename(path))[0]),
                     id=os.path.basename(path)) for path in preset_paths()] + \
    [pytest.param(('urdf', name), id=f'{name}.urdf') for name in URDFS]


@pytest.mark.parametrize('arm', ARMS)
def test_the_demo_runs_on_every_arm_and_tracks_within_one_control_period(
        arm, tmp_path, monkeypatch):
    """Closed loop in simulated time on each arm: the run starts and ends at rest inside
    the arm's limits, every joint moves, and the arm stays less than one control period
    behind its reference: |e| < h max|q̇_ref| (the zero-order hold alone delays by h/2; the
    peak of a quintic's velocity is 15/8 of its mean), with max|q̇_ref| over the joints of
    the same kind (the arm couples them); 1 s after the move it is at the goal."""
    monkeypatch.setattr(sim, 'DOMAIN_CHECK_WAIT', 0.0)    # tested on its own below
    kind, name = arm
    robot = (os.path.join(CONFIG, f'{name}.yaml') if kind == 'preset'
             else urdf_robot_file(tmp_path, name))
    table_file = tmp_path / 'run.csv'
    option = ['--robot', name] if kind == 'preset' else ['--params-file', robot]
    assert sim.main([*option, '--duration', str(DURATION), '--integration-step', '0.002',
                     '--csv', str(table_file)]) == 0
    model = RobotModel.from_yaml(robot)
    names, run = read_run(table_file)
    assert len(names) == model.n
    q, q_ref, error = run['q'], run['q_ref'], run['error']
    start, goal = q_ref[0], q_ref[-1]
    np.testing.assert_allclose(q[0], start, atol=1e-9)
    step = np.abs(goal - start)
    assert np.all(step > 0.0), step                           # every joint moved
    if name == 'puma560':       # [LEE] §5's move, the numbers the README gives
        np.testing.assert_allclose(start, np.radians(LEE_START), atol=1e-12)
        np.testing.assert_allclose(goal, np.radians(LEE_GOAL), atol=1e-12)
    else:                       # derived: inside the limits of the robot file
        for pose in (start, goal):
            assert np.all(pose > model.position_min) and np.all(pose < model.position_max)
    prismatic = np.array([t == 'prismatic' for t in model.joint_types])
    peak_speed = 15.0 / 8.0 * step / MOVE
    bound = control_period() * np.where(
        prismatic, np.max(peak_speed[prismatic], initial=0.0),
        np.max(peak_speed[~prismatic], initial=0.0))
    worst = np.max(np.abs(error), axis=0)
    assert np.all(worst < bound), (names, worst, bound)
    assert np.all(np.abs(q[-1] - goal) < 0.01 * bound), (q[-1] - goal, bound)


def presets_and_urdfs(folder):
    for path in preset_paths():
        yield os.path.basename(path), path
    for name in URDFS:
        yield f'{name}.urdf', urdf_robot_file(folder, name)


def test_the_derived_move_starts_and_ends_inside_the_limits_of_every_arm(tmp_path):
    for label, path in presets_and_urdfs(tmp_path):
        model = RobotModel.from_yaml(path)
        start, goal = (np.array(v) for v in demo_plan.demo_positions(model))
        assert len(start) == len(goal) == model.n, label
        for pose in (start, goal):
            assert np.all(pose > model.position_min), label
            assert np.all(pose < model.position_max), label
        step = np.abs(goal - start)
        revolute = np.array([t == 'revolute' for t in model.joint_types])
        assert np.all(step[revolute] <= demo_plan.REVOLUTE_STEP + 1e-12), label
        assert np.all(step[~revolute] <= demo_plan.PRISMATIC_STEP + 1e-12), label
        assert np.all(step > 0.0), label


def test_a_joint_limited_on_one_side_or_not_at_all_moves_away_from_its_limit():
    def arm(low, high, kind='revolute'):
        return RobotModel('standard', [kind, 'revolute'], a=[0.3, 0.2], alpha=[0.0, 0.0],
                          d=[0.0, 0.0], theta=[0.0, 0.0], mass=[1.0, 1.0],
                          com=[-0.1, 0.0, 0.0] * 2, inertia=[0.01, 0.0, 0.0, 0.01, 0.0, 0.01] * 2,
                          position_min=[low, -math.inf], position_max=[high, math.inf])
    start, goal = demo_plan.demo_positions(arm(0.2, math.inf))
    assert start[0] == pytest.approx(0.7) and goal[0] == pytest.approx(1.2)
    assert start[1] == 0.0 and goal[1] == -demo_plan.REVOLUTE_STEP
    start, goal = demo_plan.demo_positions(arm(-math.inf, -0.3))
    assert start[0] == pytest.approx(-0.8) and goal[0] == pytest.approx(-0.3)
    start, goal = demo_plan.demo_positions(arm(0.0, 0.2, 'prismatic'))   # a short slide
    assert start[0] == pytest.approx(0.1) and goal[0] == pytest.approx(0.15)


def test_the_simulation_settings_hold_no_per_joint_list():
    """config/sim.yaml and config/sim_1khz.yaml serve any arm: no list-valued parameter
    (a list would have one arm's joint count)."""
    def lists(mapping, prefix=''):
        for key, value in mapping.items():
            if isinstance(value, dict):
                yield from lists(value, f'{prefix}{key}.')
            elif isinstance(value, list):
                yield f'{prefix}{key}'
    for name in SIM_FILES:
        with open(os.path.join(CONFIG, name), encoding='utf-8') as stream:
            document = yaml.safe_load(stream)
        assert list(lists(document)) == [], name


def test_a_robot_file_with_a_demo_file_beside_it_gets_it(tmp_path):
    puma = os.path.join(CONFIG, 'puma560.yaml')
    assert demo_plan.robot_demo_file(puma) == os.path.join(CONFIG, 'sim_puma560.yaml')
    assert demo_plan.robot_demo_file(os.path.join(CONFIG, 'panda.yaml')) is None
    copy = tmp_path / 'puma560.yaml'
    copy.write_text(open(puma, encoding='utf-8').read())
    assert demo_plan.robot_demo_file(str(copy)) is None          # a copy alone: derived
    (tmp_path / 'sim_puma560.yaml').write_text('/**:\n  ros__parameters:\n    a: 1.0\n')
    assert demo_plan.robot_demo_file(str(copy)) == str(tmp_path / 'sim_puma560.yaml')
    assert demo_plan.robot_demo_file(os.path.join(CONFIG, 'sim.yaml')) is None


def test_the_launch_files_derived_move_is_one_file_per_arm(tmp_path):
    """sim.launch.py's nodes read the derived file after the launch file has returned:
    it stays, named by its content, one per arm however often it is launched."""
    panda = os.path.join(CONFIG, 'panda.yaml')
    first = demo_plan.write_derived_parameters(panda, tmp_path, shared=True)
    again = demo_plan.write_derived_parameters(panda, tmp_path, shared=True)
    other = demo_plan.write_derived_parameters(os.path.join(CONFIG, 'planar2.yaml'),
                                               tmp_path, shared=True)
    assert first == again != other and sorted(os.listdir(tmp_path)) == sorted(
        os.path.basename(path) for path in (first, other))


def test_the_puma_demo_file_holds_lees_move_and_gains():
    with open(os.path.join(CONFIG, 'sim_puma560.yaml'), encoding='utf-8') as stream:
        document = yaml.safe_load(stream)
    demo = document['/**']['ros__parameters']
    np.testing.assert_allclose(demo['start_positions'], np.radians(LEE_START), atol=1e-15)
    np.testing.assert_allclose(demo['goal_positions'], np.radians(LEE_GOAL), atol=1e-15)
    assert demo['initial_positions'] == demo['start_positions']
    assert demo['gains'] == {'kp': [100.0] * 6, 'kd': [20.0] * 6}      # [LEE] §5
    for node in ('plant_simulator', 'computed_torque_controller'):    # beyond q3 = 90 deg
        assert document[f'/**/{node}']['ros__parameters']['robot'] == {
            'position_min': [-2 * math.pi] * 6, 'position_max': [2 * math.pi] * 6}


def test_the_derived_file_is_a_parameter_file_rcl_reads_with_the_robot_file_after_it():
    from robot_dynamics.parameters.params_file import check_params_file, node_sections
    path = demo_plan.write_derived_parameters(os.path.join(CONFIG, 'panda.yaml'))
    try:
        check_params_file(path)
        assert node_sections(path) == {
            '/**': ['goal_positions', 'initial_positions', 'start_positions']}
    finally:
        os.remove(path)
    assert demo_plan.write_derived_parameters(os.path.join(CONFIG, 'sim.yaml')) is None


# ---------------------------------------------------------------- wrong-sized values


def old_six_joint_settings(folder):
    """A settings file with the PUMA's six-value lists (as config/sim.yaml once had)."""
    path = os.path.join(folder, 'six.yaml')
    with open(path, 'w', encoding='utf-8') as stream:
        stream.write('/**/plant_simulator:\n  ros__parameters:\n    robot:\n'
                     f'      position_min: {[-6.0] * 6}\n      position_max: {[6.0] * 6}\n'
                     '/**/computed_torque_controller:\n  ros__parameters:\n'
                     f'    gains:\n      kp: {[100.0] * 6}\n')
    return path


def environment():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')


def test_a_wrong_sized_value_is_named_with_its_file(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(sim, 'DOMAIN_CHECK_WAIT', 0.0)
    six = old_six_joint_settings(tmp_path)
    assert sim.main(['--robot', 'panda', '--duration', '1', '--sim-params-file', six]) == 1
    errors = [line for line in capfd.readouterr().err.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, errors
    assert 'robot.position_min: expected 7 values, got 6' in errors[0]
    assert f'from {six}' in errors[0] and 'plant_simulator' in errors[0]
    assert sim.main(['--robot', 'panda', '--duration', '1', '--ros-args', '-p',
                     f'computed_torque_controller:gains.kd:={[20.0] * 6}']) == 1
    errors = [line for line in capfd.readouterr().err.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1 and 'gains.kd: expected 7 values' in errors[0], errors
    assert 'given by -p' in errors[0]


def test_a_node_executable_names_the_file_of_a_wrong_sized_value(tmp_path):
    """The executables launch starts (ros2 launch sim.launch.py robot_params_file:=panda
    with a six-joint settings file): the controller's one error line names the file."""
    six = old_six_joint_settings(tmp_path)
    result = subprocess.run(
        [sys.executable, '-m', 'robot_dynamics.nodes.controller', '--ros-args',
         '--params-file', os.path.join(CONFIG, 'panda.yaml'), '--params-file', six,
         '-r', '__node:=computed_torque_controller'], env=environment(), cwd=tmp_path,
        capture_output=True, text=True, timeout=WALL_LIMIT)
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, result.stderr
    assert 'gains.kp: expected 7 values' in errors[0] and f'(from {six})' in errors[0]


# ---------------------------------------------------------------- timer mode, domain


def test_timer_mode_in_lock_step_is_refused_in_one_line(capfd, monkeypatch):
    monkeypatch.setattr(sim, 'DOMAIN_CHECK_WAIT', 0.0)
    assert sim.main(['--duration', '1', '--ros-args', '-p', 'control_mode:=timer']) == 1
    errors = [line for line in capfd.readouterr().err.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, errors
    assert 'control_mode: timer cannot run in lock-step' in errors[0]
    assert 'on_state' in errors[0] and 'lockstep:=false' in errors[0]


def test_timer_mode_runs_with_the_plant_clock_running_free(capfd, monkeypatch):
    """What the refusal proposes works: the plant's clock free at real time, the
    controller's timer on it."""
    monkeypatch.setattr(sim, 'DOMAIN_CHECK_WAIT', 0.0)
    assert sim.main(['--duration', '0.5', '--real-time-factor', '1', '--ros-args',
                     '-p', 'control_mode:=timer', '-p',
                     'plant_simulator:lockstep:=false']) == 0
    out = capfd.readouterr().out
    assert 'simulated 0.5' in out and 'no tracking error received' not in out, out


def test_another_simulation_on_the_domain_is_found_and_named():
    """A /clock publisher of another simulation is found (waiting on discovery, as long as
    it takes), and the refusal names the domain and the fix."""
    harness = RosHarness()
    try:
        other = harness.add(__import__('rclpy').create_node('other_sim',
                                                            context=harness.context))
        assert sim.other_simulations(harness.context, wait=0.05) == []
        other.create_publisher(Clock, '/clock', 10)
        assert sim.other_simulations(harness.context, wait=WALL_LIMIT) == ['/clock']
    finally:
        harness.close()
    line = sim.domain_in_use_message(['/clock'])
    domain = os.environ['ROS_DOMAIN_ID']
    assert f'ROS_DOMAIN_ID {domain} already has a simulation' in line and '\n' not in line
    assert 'ROS_DOMAIN_ID=' in line and 'ROS_AUTOMATIC_DISCOVERY_RANGE=OFF' in line


def test_sim_refuses_to_start_on_a_domain_in_use_in_one_line(capfd, monkeypatch):
    seen = []
    monkeypatch.setattr(sim, 'other_simulations', lambda context, **kw: seen.append(1) or
                        ['/clock', '/joint_states'])
    assert sim.main(['--duration', '1']) == 1
    err = capfd.readouterr().err
    assert seen and len(err.strip().splitlines()) == 1, err
    assert 'already has a simulation' in err and '/joint_states' in err


def test_a_private_process_does_not_look_at_the_domain(monkeypatch):
    monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE', 'OFF')
    assert sim.other_simulations(None, wait=WALL_LIMIT) == []


# ---------------------------------------------------------------- outputs, Ctrl-C


def test_plot_and_csv_into_a_missing_folder_are_made(tmp_path, monkeypatch):
    monkeypatch.setattr(sim, 'DOMAIN_CHECK_WAIT', 0.0)
    figure, table = tmp_path / 'out' / 'dir' / 'x.png', tmp_path / 'more' / 'run.csv'
    assert sim.output_problem(str(figure), plot=True) is None
    (tmp_path / 'file').write_text('')
    assert 'is not a directory' in sim.output_problem(str(tmp_path / 'file' / 'x.png'))
    argv = ['--duration', '0.3', '--csv', str(table)]
    if sim.matplotlib_figure() is not None:
        argv = ['--plot', str(figure)] + argv
    assert sim.main(argv) == 0
    assert table.exists()
    assert figure.exists() or sim.matplotlib_figure() is None


def test_ctrl_c_on_dev_py_sim_exits_130_with_one_line_and_writes_the_outputs(tmp_path):
    """SIGINT to `tools/dev.py sim` alone (it passes it on to the simulation) once the
    simulation runs: exit status 130, one line on stderr, no traceback; the CSV and the
    plot of the run so far are written, into folders that did not exist."""
    table, figure = tmp_path / 'a' / 'run.csv', tmp_path / 'b' / 'c' / 'run.png'
    plot = ['--plot', str(figure)] if sim.matplotlib_figure() is not None else []
    harness = RosHarness()
    process = None
    try:
        node = harness.add(__import__('rclpy').create_node('watcher', context=harness.context))
        clock = []
        node.create_subscription(Clock, '/clock', lambda msg: clock.append(
            msg.clock.sec + msg.clock.nanosec * 1e-9), 10)
        process = subprocess.Popen(
            [sys.executable, os.path.join(REPO, 'tools', 'dev.py'), '--python', sys.executable,
             'sim', '--', '--csv', str(table), *plot, '--ros-args', '--log-level', 'warn'],
            cwd=tmp_path, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        harness.spin_until(lambda: (clock and clock[-1] > 0.3) or process.poll() is not None,
                           'the simulation to run')
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=WALL_LIMIT)
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        harness.close()
    assert process.returncode == 130, (out, err)
    assert 'Traceback' not in err and 'KeyboardInterrupt' not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('sim: stopped by SIGINT at'), err
    assert table.exists() and f'wrote' in out
    names, run = read_run(table)
    assert len(names) == 6 and len(run['q']) > 10
    assert figure.exists() or not plot
