"""`identify` as a ROS user meets it against ros2_control's joint_trajectory_controller
and its mock hardware: efforts that are 0 or NaN (no effort interface), velocities that
stay 0 while the arm moves, an estimate that is not physically consistent, and the nodes
loading such a model."""

import math
import warnings

import numpy as np
import pytest

pytest.importorskip('rosbags')
from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.identification.recordings import (BagError, JointStateBagWriter,
                                                      read_joint_states)
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.nodes import identify  # noqa: E402
from test_identify_cli import JOINTS, PUMA, run_estimate  # noqa: E402, I100


def puma():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return RobotModel.from_yaml(PUMA)


def motion(seconds=3.0, rate=200.0):
    """A PUMA 560 motion (one sinusoid per joint) and its efforts (the robot file's
    inverse dynamics): t, q, qd, tau."""
    t = 10.0 + np.arange(int(seconds * rate)) / rate
    omega = 2.0 * math.pi * np.array([0.4, 0.55, 0.7, 0.85, 1.0, 1.15])
    s = t[:, None] - 10.0
    q = 0.4 * np.sin(omega * s) + np.array([0.0, -0.5, 0.5, 0.0, 0.3, 0.0])
    qd = 0.4 * omega * np.cos(omega * s)
    qdd = -0.4 * omega ** 2 * np.sin(omega * s)
    return t, q, qd, dynamics.inverse_dynamics(puma(), q, qd, qdd)


def write(folder, t, q, qd, tau, custom_data=None):
    with JointStateBagWriter(folder, custom_data=custom_data) as writer:
        for k in range(len(t)):
            writer.write(t[k], JOINTS, q[k], qd[k], tau[k])


# ---------------------------------------------------------------------- efforts


@pytest.mark.parametrize('efforts, said', [
    (lambda tau: 0.0 * tau, '0 in every sample for joint_1, joint_2'),
    (lambda tau: np.full_like(tau, 2.5), 'constant for joint_1 (2.5)'),
    (lambda tau: np.where(np.arange(6) == 3, 0.0, tau), '0 in every sample for joint_4'),
    (lambda tau: 1e-3 * tau, "far below the model's gravity torques"),
])
def test_efforts_without_information_are_refused_in_one_line(tmp_path, capsys, efforts, said):
    """A mock effort interface (0), a constant, or efforts in units a thousand times off
    are not identified into a file: one line, status 2, nothing written."""
    t, q, qd, tau = motion()
    write(tmp_path / 'bag', t, q, qd, efforts(tau))
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                  '--output', str(tmp_path / 'out.yaml'))
    assert code == identify.BAD_INPUT, out + err
    assert err.count('\n') == 1 and said in err, err
    assert not (tmp_path / 'out.yaml').exists() and 'wrote' not in out


def test_nan_efforts_are_said_to_be_missing(tmp_path):
    """joint_state_broadcaster without an effort interface publishes NaN efforts."""
    t, q, qd, tau = motion(1.0)
    write(tmp_path / 'bag', t, q, qd, np.full_like(tau, np.nan))
    with pytest.raises(BagError) as caught:
        read_joint_states(tmp_path / 'bag', JOINTS)
    text = str(caught.value)
    assert 'efforts missing (NaN in every sample: the robot publishes no effort' in text
    assert 'non-finite' not in text and '\n' not in text


@pytest.fixture
def inconsistent(monkeypatch):
    """The estimator replaced by one whose estimate is not physically consistent."""
    from robot_dynamics.nodes.identify import estimate as estimation
    from test_identify_cli import arm_result

    def estimate(prior, pieces, effort_timing='instant', **options):
        return arm_result(prior, ['link 2: pseudo-inertia not positive definite'],
                          accelerations='velocity')

    def errors(model, pieces, effort_timing='instant', drive_gain=None, accelerations=None):
        return estimation.Errors(np.full(model.n, 0.1), np.full(model.n, 0.01))
    monkeypatch.setattr(estimation, 'identify', estimate)
    monkeypatch.setattr(estimation, 'errors', errors)


def test_an_estimate_that_is_not_consistent_is_not_written(tmp_path, capsys, inconsistent):
    t, q, qd, tau = motion()
    write(tmp_path / 'bag', t, q, qd, tau)
    output = tmp_path / 'out.yaml'
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                  '--output', str(output))
    assert code == identify.NOT_CONSISTENT != 0 and not output.exists()
    assert 'not physically consistent: nothing written' in out and 'load it after' not in out
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                  '--output', str(output), '--write-inconsistent')
    assert code == identify.NOT_CONSISTENT and output.exists()
    text = output.read_text()
    assert 'NOT physically consistent' in text and 'load after' not in text
    assert 'pseudo-inertia not positive definite' in text
    assert 'load it after' not in out and 'for inspection only' in out


# ---------------------------------------------------------------------- velocities


def test_velocities_that_stay_zero_while_the_arm_moves_are_taken_from_the_positions(tmp_path):
    """Mock hardware publishes velocity 0 while the positions follow the command: the
    recording is read as one without velocities, with a note (not 'not excited')."""
    t, q, qd, tau = motion()
    write(tmp_path / 'bag', t, q, 0.0 * qd, tau)
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert not recording.velocities
    note = next(n for n in recording.notes if n.startswith('velocities not measured'))
    assert 'joint_1 (0 while its position moves by 0.8' in note
    # a joint that does not move may well have velocity 0: nothing said
    q[:, 2] = 0.5
    qd[:, 2] = 0.0
    write(tmp_path / 'still', t, q, qd, tau)
    recording = read_joint_states(tmp_path / 'still', JOINTS)
    assert recording.velocities and not any('not measured' in n for n in recording.notes)
    assert np.array_equal(recording.qd[:, 2], np.zeros(len(t)))


# ---------------------------------------------------------------------- what wrote the bag


@pytest.mark.parametrize('recorded_by, said', [
    ({'robot_dynamics.recorded_by': 'identify plan'}, 'written by `identify plan`'),
    ({'robot_dynamics.recorded_by': 'identify excite'}, 'written by `identify excite`'),
    ({}, 'written by the command that recorded them'),
])
def test_the_effort_timing_line_says_what_wrote_it(tmp_path, capsys, inconsistent,
                                                   recorded_by, said):
    t, q, qd, tau = motion(1.0)
    write(tmp_path / 'bag', t, q, qd, tau,
          {'robot_dynamics.effort_timing': 'instant', **recorded_by})
    _, out, _ = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                             '--output', str(tmp_path / 'out.yaml'))
    line = next(row for row in out.splitlines() if row.startswith('effort timing'))
    assert said in line, line
    assert ('excite' in line) == ('excite' in said)


# ---------------------------------------------------------------------- the nodes


class _Logger:
    def __init__(self):
        self.lines = []

    def warning(self, text):
        self.lines.append(('warning', text))

    def info(self, text):
        self.lines.append(('info', text))


class _Node:
    def __init__(self):
        self.logger = _Logger()

    def get_logger(self):
        return self.logger


def test_the_nodes_refuse_a_negative_moment_of_inertia_unless_accepted():
    """What an identification that failed writes (a body with a negative principal moment)
    is refused by the nodes' model loading unless robot.accept_nonphysical_inertia;
    Corke's PUMA 560 (link 1 massless with I = diag(0, 0.35, 0), link 3 off the triangle
    inequality) still loads with a warning, as it did."""
    from robot_dynamics.nodes.common.ros_params import ConfigurationError, robot_model
    block = puma().to_params()
    block.pop('accept_nonphysical_inertia', None)
    node = _Node()
    model, _ = robot_model(node, dict(block), list(JOINTS))
    assert any(kind == 'warning' and 'triangle' in text for kind, text in node.logger.lines)
    bad = dict(block)
    inertia = list(bad['inertia'])
    inertia[6 * 1 + 0] = -0.05                       # link 2: I_xx < 0
    bad['inertia'] = inertia
    with pytest.raises(ConfigurationError) as caught:
        robot_model(_Node(), dict(bad), list(JOINTS))
    assert 'not positive semi-definite' in str(caught.value)
    assert 'robot.accept_nonphysical_inertia: true' in str(caught.value)
    accepted, _ = robot_model(_Node(), dict(bad, accept_nonphysical_inertia=True),
                              list(JOINTS))
    assert accepted.nonphysical_inertia_accepted


# ---------------------------------------------------------------------- libraries missing


def identify_in_a_child(blocked, arguments, tmp_path):
    """`identify ARGUMENTS` in a fresh interpreter in which the top-level packages
    `blocked` cannot be imported (as if not installed); no DDS peer (own domain)."""
    import os
    import subprocess
    import sys
    from test_identify_cli import GUARD, REPO
    code = ('import sys\n'
            'class Block:\n'
            '    def find_spec(self, name, path=None, target=None):\n'
            f'        if name.split(".")[0] in {tuple(blocked)!r}:\n'
            '            raise ModuleNotFoundError("No module named " + repr(name), '
            'name=name)\n'
            'sys.meta_path.insert(0, Block())\n'
            'from robot_dynamics.nodes.identify import main\n'
            "sys.exit(main(['identify'] + sys.argv[1:]))\n")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
               ROS_DOMAIN_ID=os.environ.get('ROS_DOMAIN_ID', '0'))
    return subprocess.run([sys.executable, '-W', 'ignore', '-c', code, *arguments], env=env,
                          capture_output=True, text=True, timeout=GUARD, cwd=tmp_path)


@pytest.mark.parametrize('blocked, arguments, status, named', [
    (('scipy',), ['excite', '--timeout', '1', '--record', 'bag'], 1,
     'needs scipy: pip install scipy'),
    (('rosbags',), ['excite', '--timeout', '1', '--record', 'bag'], 1,
     'needs rosbags: pip install rosbags'),
    (('scipy',), ['plan', '--params-file', PUMA, '--iterations', '0', '--output', 'p.yaml'], 1,
     'needs scipy: pip install scipy'),
    (('scipy',), ['plan', '--params-file', PUMA, '--send', '/arm/follow_joint_trajectory',
                  '--timeout', '1'], 1, 'needs scipy: pip install scipy'),
    (('rosbags',), ['plan', '--params-file', PUMA, '--send', '/arm/follow_joint_trajectory',
                    '--record', 'bag', '--timeout', '1'], 1,
     'needs rosbags: pip install rosbags'),
    (('rosbags',), ['estimate', '--params-file', PUMA, '--bag', 'bag', '--output', 'o.yaml'],
     2, 'needs the rosbags library: pip install rosbags'),
    (('scipy', 'cvxpy'), ['estimate', '--params-file', PUMA, '--bag', 'bag', '--output',
                          'o.yaml'], 1, 'needs scipy and cvxpy: pip install scipy cvxpy'),
])
def test_every_subcommand_without_a_library_ends_in_one_line(tmp_path, blocked, arguments,
                                                             status, named):
    """Before anything moves or is waited for: no traceback, one line naming the pip
    command, nothing written."""
    if 'estimate' in arguments:
        t, q, qd, tau = motion(1.0)
        write(tmp_path / 'bag', t, q, qd, tau)
    done = identify_in_a_child(blocked, arguments, tmp_path)
    assert done.returncode == status, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and named in errors[0], done.stderr
    assert 'Traceback' not in done.stderr
    assert not (tmp_path / 'p.yaml').exists() and not (tmp_path / 'o.yaml').exists()
    if 'estimate' not in arguments:
        assert not (tmp_path / 'bag').exists()
