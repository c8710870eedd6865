"""What a new user met on the `sim` path, each through the `sim` executable in a child
process where that is what a user runs: a misspelt key is warned with the closest name;
a user's parameter file (and -p) wins over config/sim.yaml and a bad value in it is
refused naming the file and the key; two simulations started at the same moment are not
both run; a link whose motion moves no mass is named before the run; --robot offers
robots only; Ctrl-C prints the summary, counted over the CSV's cycles."""

import csv
import glob
import os
import re
import signal
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from ros_testing import PUMA, REPO, RosHarness   # noqa: I100 - sets ROS_DOMAIN_ID first
from robot_dynamics import dynamics
from robot_dynamics.dynamics import checks as model_checks
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes import sim
from robot_dynamics.model.urdf import model_from_urdf

TIMEOUT = 180    # s: a safety net against hangs, not a timing assertion
CONFIG = os.path.join(REPO, 'config')
UR5 = os.path.join(REPO, 'test', 'data', 'ur5.urdf')


def environment():
    return dict(os.environ, PYTHONUNBUFFERED='1', PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))


def sim_command(*args):
    return [sys.executable, '-m', 'robot_dynamics.nodes.sim', *args]


def run_sim(*args):
    """(exit status, stdout, stderr) of `sim <args>`."""
    result = subprocess.run(sim_command(*args), cwd=REPO, env=environment(),
                            capture_output=True, text=True, timeout=TIMEOUT)
    return result.returncode, result.stdout, result.stderr


def lines_with(text, marker):
    return [line for line in text.splitlines() if marker in line]


def error_line(stderr):
    assert 'Traceback' not in stderr, stderr
    errors = lines_with(stderr, '[ERROR]')
    assert len(errors) == 1, stderr
    return errors[0]


def write(path, text):
    path.write_text(text)
    return str(path)


def shared(text):
    """A parameter file with `text` (indented parameter lines) under /**."""
    return '/**:\n  ros__parameters:\n' + ''.join(f'    {line}\n' for line in text)


# ------------------------------------------------------------ 1. misspelt keys


def test_a_misspelt_key_in_a_users_file_and_in_p_is_warned_with_the_closest_name(tmp_path):
    mine = write(tmp_path / 'mine.yaml', shared(['gains:', '  kpp: [1.0, 1.0, 1.0, 1.0, '
                                                 '1.0, 1.0]']) +
                 'computed_torque_controller:\n  ros__parameters:\n    state_timout: 0.3\n')
    code, stdout, stderr = run_sim('--duration', '0.3', '--ros-args', '--params-file', mine,
                                   '-p', 'command_topik:=x')
    assert code == 0, stderr
    warned = lines_with(stderr, '[WARN]')
    in_file = [line for line in warned if 'gains.kpp' in line]
    assert len(in_file) == 1 and 'closest: gains.kp' in in_file[0] and mine in in_file[0]
    section = [line for line in warned if 'state_timout' in line]
    assert len(section) == 1 and 'closest: state_timeout' in section[0], stderr
    given = [line for line in warned if 'command_topik' in line]
    assert len(given) == 1 and 'closest: command_topic' in given[0], stderr


# ------------------------------------------------------------ 2. a user's file wins


def puma_copy_with(tmp_path, lines):
    """The PUMA 560 preset with `lines` added to its /** parameters (a user's robot file)."""
    text = open(PUMA, encoding='utf-8').read()
    head = '/**:\n  ros__parameters:\n'
    assert head in text
    return write(tmp_path / 'my_puma.yaml', text.replace(
        head, head + ''.join(f'    {line}\n' for line in lines), 1))


def users_file(tmp_path, how, lines):
    """sim's options that give `lines` in a user's file: --ros-args --params-file, or the
    robot file itself."""
    if how == 'ros-args':
        return ['--ros-args', '--params-file', write(tmp_path / 'mine.yaml', shared(lines))]
    return ['--params-file', puma_copy_with(tmp_path, lines)]


@pytest.mark.parametrize('how', ['ros-args', 'robot file'])
def test_a_users_command_topic_wins_over_the_sim_file(tmp_path, how):
    """config/sim.yaml sets command_topic effort_controller/commands on both nodes; the
    user's /** value reaches both (the loop closes on it) and the controller names it."""
    options = users_file(tmp_path, how, ['command_topic: my_arm/efforts'])
    code, stdout, stderr = run_sim('--duration', '0.3', *options)
    assert code == 0, stderr
    assert 'zero effort sent on /my_arm/efforts' in stderr, stderr
    assert 'effort_controller/commands' not in stderr
    assert 'tracking error over' in stdout


@pytest.mark.parametrize('how', ['ros-args', 'robot file'])
@pytest.mark.parametrize('line, fragment', [
    ('state_timeout: 0.2s', "state_timeout: expected a finite number, got '0.2s'"),
    ('state_timeout: -1.0', 'state_timeout: -1.0 is out of range'),
    ('control_mode: timer', 'control_mode: timer cannot run in lock-step'),
])
def test_a_users_value_the_sim_file_also_sets_is_used_and_a_bad_one_refused(
        tmp_path, how, line, fragment):
    """A bad state_timeout, or control_mode timer (sim refuses it in lock-step), in the
    user's file: used (config/sim.yaml's 0.5 s and on_state no longer win), so refused in
    one line naming the key and the user's file."""
    options = users_file(tmp_path, how, [line])
    code, _, stderr = run_sim('--duration', '0.3', *options)
    assert code == 1, stderr
    error = error_line(stderr)
    assert fragment in error
    if not line.startswith('control_mode'):
        path = options[-1]
        assert f'from {path}' in error, error


def test_sim_file_comes_first_and_the_users_files_after_it(tmp_path):
    args = sim.parse_args(['--robot', 'panda'])
    mine = write(tmp_path / 'mine.yaml', shared(['state_timeout: 0.2']))
    robot, files, derived = sim.parameter_files(args, [mine])
    try:
        assert files[0] == sim.config_path('sim.yaml') and files[1] == robot
        assert files[-1] == mine
    finally:
        if derived:
            os.remove(derived)


# ------------------------------------------------------------ 3. two at the same moment


def test_two_simulations_started_together_are_not_both_run():
    """Both start at once on this module's ROS domain, before either publishes: one runs,
    the other is refused at once in one line naming ROS_DOMAIN_ID and the fix."""
    processes = [subprocess.Popen(sim_command('--duration', '1.0'), cwd=REPO,
                                  env=environment(), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=TIMEOUT)
            results.append((process.returncode, stdout, stderr))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    _, _, refused = next(result for result in results if result[0] == 1)
    error = error_line(refused)
    domain = os.environ['ROS_DOMAIN_ID']
    assert f'ROS_DOMAIN_ID {domain} already has a simulation' in error
    assert 'ROS_DOMAIN_ID=' in error.split('run this one', 1)[1]


# ------------------------------------------------------------ 4. a link moving no mass


def ur5_without_inertial(link):
    text = open(UR5, encoding='utf-8').read()
    stripped = re.sub(rf'(<link name="{link}"\s*>).*?(</link>)', r'\1\2', text, flags=re.S)
    assert stripped != text
    return stripped


def test_a_urdf_whose_last_link_has_no_inertial_is_named_before_the_run(tmp_path):
    urdf = write(tmp_path / 'ur5_light.urdf', ur5_without_inertial('wrist_3_link'))
    robot = write(tmp_path / 'ur5_light.yaml', shared([
        'robot:', '  source: urdf', f'  urdf_file: {urdf}', '  tip_link: tool0']))
    code, stdout, stderr = run_sim('--duration', '1.0', '--params-file', robot)
    assert code == 1, stderr
    error = error_line(stderr)
    assert "link 'wrist_3_link'" in error and 'wrist_3_joint' in error
    assert 'singular' in error
    assert 'diverged' not in stderr and 'tracking error over' not in stdout


def mass_matrices_positive_definite(model, samples=6):
    """Cholesky (not the eigenvalues the check uses) of M at q = 0 and random q."""
    rng = np.random.default_rng(42)
    for q in [np.zeros(model.n)] + [rng.uniform(-np.pi, np.pi, model.n)
                                    for _ in range(samples - 1)]:
        try:
            np.linalg.cholesky(dynamics.mass_matrix(model, q))
        except np.linalg.LinAlgError:
            return False
    return True


def test_the_puma_with_its_massless_link_1_passes_and_a_massless_last_link_does_not():
    """Corke's PUMA 560 link 1 (m = 0, I = diag(0, 0.35, 0)) keeps M positive definite:
    no finding. A planar arm whose last link has no mass (its COM on the joint axis makes
    no difference then) is found, at its last joint; with armature it is fine again."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        puma = RobotModel.from_yaml(PUMA)
    assert mass_matrices_positive_definite(puma)
    assert model_checks.singular_joint(puma) is None
    block = {'dh_convention': 'standard', 'joint_types': ['revolute'] * 3,
             'a': [0.5, 0.4, 0.3], 'alpha': [0.0] * 3, 'd': [0.0] * 3, 'theta': [0.0] * 3,
             'mass': [2.0, 1.5, 0.0], 'com': [-0.25, 0, 0, -0.2, 0, 0, 0, 0, 0],
             'inertia': [0.0, 0, 0, 0.05, 0, 0.05, 0.0, 0, 0, 0.03, 0, 0.03, 0, 0, 0, 0, 0, 0]}
    light = RobotModel.from_params(block)
    assert not mass_matrices_positive_definite(light)
    found = model_checks.singular_joint(light)
    assert found is not None and found[0] == 2
    assert 'link 3' in model_checks.singular_mass_matrix_message(light)
    geared = RobotModel.from_params({**block, 'armature': [0.0, 0.0, 0.01]})
    assert mass_matrices_positive_definite(geared)
    assert model_checks.singular_joint(geared) is None


def test_the_urdf_link_is_named_by_its_urdf_name():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = model_from_urdf(ur5_without_inertial('wrist_3_link'), tip_link='tool0')
        whole = model_from_urdf(open(UR5, encoding='utf-8').read(), tip_link='tool0')
    assert not mass_matrices_positive_definite(model)
    assert "link 'wrist_3_link' (moved by joint wrist_3_joint)" in \
        model_checks.singular_mass_matrix_message(model)
    assert mass_matrices_positive_definite(whole)
    assert model_checks.singular_mass_matrix_message(whole) is None


# ------------------------------------------------------------ 5. --robot: robots only


def test_robot_offers_exactly_the_config_files_that_build_a_robot_model():
    """The presets are the files of config/ from which RobotModel builds an arm (a
    robot's own demo file sim_<name>.yaml is not a preset either)."""
    builds = set()
    for path in glob.glob(os.path.join(CONFIG, '*.yaml')):
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                RobotModel.from_yaml(path)
        except ValueError:
            continue
        builds.add(name)
    assert set(sim.robot_presets()) == builds
    assert 'puma560' in builds and not any(name.startswith('ros2_control') for name in builds)


def test_robot_refuses_a_file_that_is_not_a_robot():
    code, _, stderr = run_sim('--robot', 'ros2_control_effort', '--duration', '0.1')
    assert code == 2 and 'invalid choice' in stderr, stderr


# ------------------------------------------------------------ 6. Ctrl-C and the summary


def test_ctrl_c_without_duration_prints_the_summary_over_the_csvs_cycles(tmp_path):
    """Real time until Ctrl-C: once the demo move is sent, SIGINT; the summary is printed,
    its cycle count is the number of rows of the CSV, and the exit status is 130."""
    table = tmp_path / 'run.csv'
    process = subprocess.Popen(sim_command('--csv', str(table)), cwd=REPO, env=environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sent = threading.Event()
    errors = []

    def read_stderr():
        for line in process.stderr:
            errors.append(line)
            if 'sent the demo move' in line:
                sent.set()
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert sent.wait(TIMEOUT), ''.join(errors)
        process.send_signal(signal.SIGINT)
        stdout = process.stdout.read()
        process.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    stderr = ''.join(errors)
    assert process.returncode == 130, stderr
    assert 'sim: stopped by SIGINT' in stderr
    counts = re.findall(r'tracking error over (\d+) control cycles', stdout)
    assert len(counts) == 1, stdout
    with open(table, encoding='utf-8', newline='') as stream:
        rows = list(csv.reader(stream))[1:]
    assert rows and int(counts[0]) == len(rows)
    assert f'wrote {len(rows)} control cycles' in stdout


def test_the_summary_counts_the_cycles_the_table_has():
    """A run stopped between a cycle's ~/error and its other topics: that cycle is in
    neither the table (the CSV) nor the summary's count, max and RMS."""
    harness = RosHarness()
    try:
        summary = harness.add(sim.TrackingSummary(context=harness.context, record=True))
        errors = {1: [0.1, -0.2], 2: [0.3, 0.0], 3: [-5.0, 7.0]}   # cycle 3 is incomplete
        for sec, values in errors.items():
            for topic in sim.RECORDED_TOPICS if sec < 3 else ('error',):
                msg = JointState(name=['a', 'b'])
                msg.header.stamp.sec = sec
                if topic == 'output':
                    msg.effort = [0.0, 0.0]
                else:
                    msg.position = values if topic == 'error' else [0.0, 0.0]
                if topic == 'error':
                    summary._on_error(msg)
                else:
                    summary._record(topic, msg)
        t = summary.table()[0]
        assert len(t) == 2
        report = summary.report()
        assert 'over 2 control cycles' in report
        np.testing.assert_allclose(summary.statistics()[1], [0.3, 0.2])
        np.testing.assert_allclose(summary.statistics()[2],
                                   np.sqrt([(0.01 + 0.09) / 2, 0.04 / 2]))
    finally:
        harness.close()
