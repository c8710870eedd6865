"""A new user's common mistakes, each through the executable a user runs: one line that
names the problem and where (file, key, index), no traceback, a non-zero exit, nothing
half-written. The same list, with the fixes, is in doc/troubleshooting.md."""

import os
import shutil
import subprocess
import sys

import pytest

from ros_testing import edited_puma_file, PUMA, REPO   # noqa: I100 - sets ROS_DOMAIN_ID

from robot_dynamics.nodes.common import bringup
from robot_dynamics.parameters.params_file import check_params_file, params_files, ParamsFileError

TIMEOUT = 120    # s: a safety net against hangs, not a timing assertion


def run(args, cwd=REPO):
    """`python -m robot_dynamics.nodes.<...>` or a script; (exit status, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    result = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=TIMEOUT)
    return result.returncode, result.stdout, result.stderr


def error_line(stderr):
    """The one [ERROR] line (or 'error:' line) of a failed run; fails on a traceback."""
    assert 'Traceback' not in stderr, stderr
    lines = [line for line in stderr.splitlines()
             if '[ERROR]' in line or line.startswith(('error:', 'dev.py: error:'))]
    assert len(lines) == 1, stderr
    return lines[0]


def write(path, text):
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------ plant parameters


PLANT_MISTAKES = {   # a sim.yaml-like file with the mistake, what the line must name
    'rk45': ('integration_method: rk45', "integration_method: 'rk45' is not one of"),
    'short': ('initial_positions: [0.0, 1.0]', 'initial_positions: expected 6 values'),
    'negative step': ('integration_step: -0.001', 'integration_step: -0.001 is out of range'),
    'zero rate': ('publish_rate: 0.0', 'publish_rate: 0.0 is out of range'),
}


@pytest.mark.parametrize('mistake', sorted(PLANT_MISTAKES))
def test_a_plant_parameter_error_is_one_line_from_the_plant_executable(tmp_path, mistake):
    line, fragment = PLANT_MISTAKES[mistake]
    params = write(tmp_path / 'plant.yaml', f'/**:\n  ros__parameters:\n    {line}\n')
    code, _, stderr = run(['-m', 'robot_dynamics.nodes.plant', '--ros-args', '--params-file',
                           PUMA, '--params-file', params])
    assert code == 1, stderr
    assert fragment in error_line(stderr)


@pytest.mark.parametrize('options, fragment', [
    (['--control-rate', '0'], 'error: --control-rate: must be a number > 0, got 0'),
    (['--integration-step', '-0.001'],
     'error: --integration-step: must be a number > 0, got -0.001'),
    *[(['--sim-params-file', mistake], fragment)
      for mistake, (_, fragment) in sorted(PLANT_MISTAKES.items())],
])
def test_a_plant_parameter_error_is_one_line_from_sim(tmp_path, options, fragment):
    if options[0] == '--sim-params-file':
        line, _ = PLANT_MISTAKES[options[1]]
        options = [options[0], write(tmp_path / 'sim.yaml', '/**:\n  ros__parameters:\n'
                                     f'    {line}\n')]
    csv = tmp_path / 'run.csv'
    code, _, stderr = run(['-m', 'robot_dynamics.nodes.sim', '--duration', '0.5',
                           '--csv', str(csv), *options])
    assert code == 1, stderr
    assert fragment in error_line(stderr)
    assert not csv.exists()


# ------------------------------------------------------------ parameter files


FILE_MISTAKES = {   # file text (None: no file), what the line must name
    'missing': (None, 'no such file'),
    'syntax': ('/**:\n  ros__parameters:\n    gains: {kp: [1.0, 2.0}\n',
               'line 3, column 26: YAML syntax error'),
    'no wrapper': ('robot:\n  mass: [1.0]\n', 'robot: no "ros__parameters:" below this key'),
    'no ros__parameters': ('/**:\n  robot:\n    mass: [1.0]\n',
                           '/**: no "ros__parameters:" below this key'),
    'beside the wrapper': ('/**:\n  ros__parameters:\n    a: 1.0\n  use_sim_time: true\n',
                           '/**/use_sim_time: True is not under a "ros__parameters:" key'),
    'integer in floats': ('/**:\n  ros__parameters:\n    robot:\n'
                          '      mass: [0.0, 17.4, 4, 0.82]\n',
                          'robot.mass[2]: 4 is an integer in a list of floats (rcl wants one '
                          'type per list); write 4.0'),
    'mixed types': ('/**:\n  ros__parameters:\n    joints: [a, 2]\n',
                    'joints[1]: 2 is an integer in a list of strings'),
}


def mistake_file(tmp_path, mistake):
    text, fragment = FILE_MISTAKES[mistake]
    path = tmp_path / 'mistake.yaml'
    if text is not None:
        path.write_text(text)
    return str(path), fragment


@pytest.mark.parametrize('mistake', sorted(FILE_MISTAKES))
def test_check_params_file_names_file_key_and_index(tmp_path, mistake):
    path, fragment = mistake_file(tmp_path, mistake)
    with pytest.raises(ParamsFileError) as error:
        check_params_file(path)
    message = str(error.value)
    assert '\n' not in message
    assert message.startswith(f'params file {path}: ') and fragment in message


@pytest.mark.parametrize('name', sorted(os.listdir(os.path.join(REPO, 'config'))))
def test_every_shipped_parameter_file_passes_the_check(name):
    if name.endswith('.yaml'):
        check_params_file(os.path.join(REPO, 'config', name))


def test_params_files_are_read_from_the_ros_args_only():
    assert params_files(['x', '--params-file', 'no', '--ros-args', '-p', 'a:=1',
                         '--params-file', 'a.yaml', '--', '--params-file', 'b.yaml',
                         '--ros-args', '--params-file', 'c.yaml']) == ['a.yaml', 'c.yaml']


EXECUTABLES = {   # command line before the parameter file
    'controller': ['-m', 'robot_dynamics.nodes.controller', '--ros-args', '--params-file'],
    'plant': ['-m', 'robot_dynamics.nodes.plant', '--ros-args', '--params-file'],
    'sim': ['-m', 'robot_dynamics.nodes.sim', '--duration', '0.5', '--params-file'],
    'send_trajectory': ['-m', 'robot_dynamics.nodes.send_trajectory', '--positions', '0',
                        '--start-from', '0', '--ros-args', '--params-file'],
}


@pytest.mark.parametrize('executable', sorted(EXECUTABLES))
@pytest.mark.parametrize('mistake', sorted(FILE_MISTAKES))
def test_a_bad_parameter_file_is_one_line_before_rcl_reads_it(tmp_path, executable, mistake):
    path, fragment = mistake_file(tmp_path, mistake)
    code, _, stderr = run(EXECUTABLES[executable] + [path])
    assert code == 1, stderr
    line = error_line(stderr)
    assert path in line and fragment in line
    assert "Couldn't parse" not in stderr             # not rcl's own parser error


def test_sim_params_file_is_checked_too(tmp_path):
    path, fragment = mistake_file(tmp_path, 'integer in floats')
    code, _, stderr = run(['-m', 'robot_dynamics.nodes.sim', '--duration', '0.5',
                           '--sim-params-file', path])
    assert code == 1 and fragment in error_line(stderr)


# ------------------------------------------------------------ outputs and dev.py


@pytest.mark.parametrize('option, path, fragment', [   # a missing folder is made instead
    ('--plot', '/dev/null/dir/run.png', '/dev/null is not a directory'),
    ('--csv', '/dev/null/run.csv', '/dev/null is not a directory'),
    ('--plot', 'run.xyz', "unknown image format 'xyz'"),
])
def test_sim_output_paths_are_checked_before_the_run(tmp_path, option, path, fragment):
    pytest.importorskip('matplotlib')
    code, stdout, stderr = run(['-m', 'robot_dynamics.nodes.sim', '--duration', '60',
                                option, path], cwd=tmp_path)
    assert code == 1
    assert fragment in error_line(stderr)
    assert 'simulated' not in stdout and '[INFO]' not in stderr     # nothing ran
    assert os.listdir(tmp_path) == []                               # nothing written


def test_dev_py_says_that_sim_options_go_after_the_double_dash(tmp_path):
    code, _, stderr = run([os.path.join(REPO, 'tools', 'dev.py'), '--python', sys.executable,
                           'sim', '--duration', '3', '--plot', 'x.png'], cwd=tmp_path)
    assert code == 2
    line = error_line(stderr)
    assert '--plot x.png: options for sim go after --' in line
    assert 'sim --duration 3 -- --plot x.png' in line
    assert os.listdir(tmp_path) == []


def test_dev_py_sim_takes_relative_paths_from_the_callers_directory(tmp_path):
    """The robot file and the CSV named relative to the caller's directory, not the
    repository's; and the PUMA preset's textbook inertias said once, as info."""
    shutil.copy(PUMA, tmp_path / 'my_robot.yaml')
    code, stdout, stderr = run([os.path.join(REPO, 'tools', 'dev.py'), '--python',
                                sys.executable, 'sim', '--duration', '0.3', '--',
                                '--params-file', 'my_robot.yaml', '--csv', 'out.csv'],
                               cwd=tmp_path)
    assert code == 0, stderr
    assert (tmp_path / 'out.csv').exists()
    assert '[WARN]' not in stderr, stderr
    assert stderr.count('accept_nonphysical_inertia') == 1, stderr


def test_without_the_mark_the_puma_warns_once_per_process(tmp_path):
    """sim builds the model twice (plant and controller): one WARN line for all of it."""
    robot = edited_puma_file(tmp_path, lambda p: p['robot'].pop('accept_nonphysical_inertia'))
    code, _, stderr = run(['-m', 'robot_dynamics.nodes.sim', '--duration', '0.3',
                           '--params-file', robot])
    assert code == 0, stderr
    warnings = [line for line in stderr.splitlines() if '[WARN]' in line]
    assert len(warnings) == 1, stderr
    assert 'link 1' in warnings[0] and 'link 3' in warnings[0]


def test_the_apt_hint_names_the_distro(monkeypatch):
    monkeypatch.setenv('ROS_DISTRO', 'kilted')
    _, skipped = bringup.visual_plan(True, lambda package: False)
    assert skipped and all('ros-kilted-' in line and '$' not in line for line in skipped)
    monkeypatch.delenv('ROS_DISTRO')
    _, skipped = bringup.visual_plan(False, lambda package: False)
    assert '$' not in skipped[0] and 'ros-<distro>-robot-state-publisher' in skipped[0]
