"""`sim --csv/--plot`: the recorded run (time, per joint q, q_ref, error, effort) and the
figure, from a real run of the entry point; --plot without matplotlib fails up front with
one message."""

import csv
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes import sim
from ros_testing import PUMA, REPO, RosHarness
from test_docs import FIGURE, png_size, readme_figure_command

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]    # config/puma560.yaml
CONTROL_PERIOD = 0.01                           # s, config/sim.yaml publish_rate 100 Hz
DURATION = 2.5                                  # s: the 2 s move and some settling
HAS_MATPLOTLIB = sim.matplotlib_figure() is not None


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    """One real run of the entry point: (stdout, CSV header, CSV values, plot path)."""
    folder = tmp_path_factory.mktemp('sim')
    table, figure = folder / 'run.csv', folder / 'run.png'
    plot = ['--plot', str(figure)] if HAS_MATPLOTLIB else []
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    result = subprocess.run(
        [sys.executable, '-m', 'robot_dynamics.nodes.sim', '--duration', str(DURATION),
         '--integration-step', '0.002', '--csv', str(table), *plot], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with open(table, encoding='utf-8', newline='') as stream:
        rows = list(csv.reader(stream))
    return result.stdout, rows[0], np.array(rows[1:], dtype=float), figure


def columns(header, values, quantity):
    return values[:, [header.index(f'{quantity}_{name}') for name in JOINTS]]


def test_csv_has_time_then_q_q_ref_error_effort_for_every_joint(run):
    _, header, values, _ = run
    assert header == ['time'] + [f'{quantity}_{name}' for quantity in
                                 ('q', 'q_ref', 'error', 'effort') for name in JOINTS]
    assert values.shape[1] == len(header)
    assert np.all(np.isfinite(values))


def test_csv_has_one_row_per_control_cycle_of_the_run(run):
    _, _, values, _ = run
    t = values[:, 0]
    assert t[0] == 0.0
    np.testing.assert_allclose(np.diff(t), CONTROL_PERIOD, atol=1e-9)   # none missing
    # the run stops when the plant reaches DURATION: the last cycle or two may be in flight
    assert round(DURATION / CONTROL_PERIOD) - 2 <= len(t) <= round(DURATION / CONTROL_PERIOD)


def test_csv_error_is_reference_minus_measured_position(run):
    _, header, values, _ = run
    np.testing.assert_allclose(columns(header, values, 'error'),
                               columns(header, values, 'q_ref') - columns(header, values, 'q'),
                               rtol=0.0, atol=1e-15)


def test_csv_starts_at_the_start_pose_and_ends_at_the_goal(run):
    _, header, values, _ = run
    q = columns(header, values, 'q')
    np.testing.assert_allclose(q[0], np.radians(sim.LEE_START_DEG), atol=1e-12)
    np.testing.assert_allclose(q[-1], np.radians(sim.LEE_GOAL_DEG), atol=2e-4)


def test_csv_effort_while_holding_at_rest_is_the_gravity_torque(run):
    """At rest on the reference (e = 0, q̇ = 0, q̈_d = 0) computed torque is g(q)."""
    _, header, values, _ = run
    q0 = columns(header, values, 'q')[0]
    expected = dynamics.gravity_torques(RobotModel.from_yaml(PUMA), q0)
    np.testing.assert_allclose(columns(header, values, 'effort')[0], expected, atol=1e-9)


def test_csv_peak_error_is_the_printed_summary(run):
    stdout, header, values, _ = run
    printed = [float(line.split()[1]) for line in stdout.splitlines()
               if line.strip().startswith('joint_')]
    peak = np.max(np.abs(columns(header, values, 'error')), axis=0)
    np.testing.assert_allclose(peak, printed, rtol=1e-3)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason='matplotlib is not installed')
def test_plot_is_a_png_image_with_a_row_of_axes_per_joint(run):
    _, _, _, figure = run
    data = figure.read_bytes()
    assert data[:8] == b'\x89PNG\r\n\x1a\n'
    width = int.from_bytes(data[16:20], 'big')
    height = int.from_bytes(data[20:24], 'big')
    assert height > width > 0          # six rows of plots: taller than wide


def test_plot_without_matplotlib_fails_before_running_with_one_message(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'matplotlib.figure', None)   # import raises ImportError
    figure = tmp_path / 'run.png'
    assert sim.main(['--duration', '0.1', '--plot', str(figure)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and 'matplotlib' in err and '--plot' in err
    assert not figure.exists()


def test_recorded_table_keeps_only_cycles_heard_on_all_four_topics():
    harness = RosHarness()
    try:
        summary = harness.add(sim.TrackingSummary(context=harness.context, record=True))
        for sec, topics in ((1, sim.RECORDED_TOPICS), (2, sim.RECORDED_TOPICS[:3]),
                            (0, sim.RECORDED_TOPICS)):
            for k, topic in enumerate(topics):
                msg = JointState(name=['a', 'b'])
                msg.header.stamp.sec = sec
                values = [10.0 * sec + k, -float(k)]
                if topic == 'output':
                    msg.effort = values
                else:
                    msg.position = values
                if topic == 'error':
                    summary._on_error(msg)
                else:
                    summary._record(topic, msg)
        t, q, q_ref, error, effort = summary.table()
        np.testing.assert_array_equal(t, [0.0, 1.0])          # second 2 lacks ~/output
        np.testing.assert_array_equal(q[:, 0], [0.0, 10.0])
        np.testing.assert_array_equal(effort[:, 0], [3.0, 13.0])
        assert q_ref.shape == error.shape == (2, 2)
    finally:
        harness.close()


def test_write_csv_round_trips_the_numbers_exactly(tmp_path):
    rng = np.random.default_rng(7)
    t = np.arange(4) * 0.01
    blocks = [rng.normal(size=(4, 2)) * 10.0 ** rng.integers(-8, 3) for _ in range(4)]
    path = tmp_path / 'table.csv'
    sim.write_csv(path, ['a', 'b'], t, *blocks)
    with open(path, encoding='utf-8', newline='') as stream:
        rows = list(csv.reader(stream))
    values = np.array(rows[1:], dtype=float)
    np.testing.assert_array_equal(values, np.column_stack([t, *blocks]))
    assert not any(math.isnan(v) for v in values.ravel())


def test_plot_title_names_the_robot_file_and_the_lee_move_in_degrees():
    move = (np.radians(sim.LEE_START_DEG), np.radians(sim.LEE_GOAL_DEG), 2.0)
    title, units = sim.plot_description('/x/config/puma560.yaml', ['revolute'] * 6, move)
    assert title.startswith('puma560.yaml: [LEE] §5 move (90°, 0°, 90°, 0°, 0°, 0°)')
    assert '→ (45°, 30°, 0°, 45°, 60°, 90°)' in title and 'over 2 s' in title
    assert units == ['rad'] * 6


def test_plot_units_are_metres_for_a_prismatic_joint_and_the_move_is_not_called_lee():
    move = (np.array([0.0, 0.5]), np.array([1.0, 0.25]), 3.0)
    title, units = sim.plot_description('arm.yaml', ['revolute', 'prismatic'], move)
    assert units == ['rad', 'm']
    assert '[LEE]' not in title and '(0°, 0.5 m) → (57.3°, 0.25 m)' in title
    assert sim.plot_description('arm.yaml', None, None) == ('arm.yaml', [])


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason='matplotlib is not installed')
def test_plot_carries_the_title_and_a_rad_label_on_every_axis_of_a_revolute_arm(tmp_path):
    t = np.linspace(0.0, 1.0, 11)
    q = np.zeros((11, 2))
    figure = sim.write_plot(tmp_path / 'p.png', ['j1', 'j2'], t, q, q, q,
                            title='planar2.yaml: move', units=['rad', 'rad'])
    assert figure.get_suptitle() == 'planar2.yaml: move'
    labels = [axis.get_ylabel() for axis in figure.axes]
    assert labels == ['j1\n[rad]', '[rad]', 'j2\n[rad]', '[rad]']
    assert [axis.get_title() for axis in figure.axes[:2]] == [
        'position: reference and measured [rad]', 'tracking error q_ref - q [rad]']
    assert (tmp_path / 'p.png').stat().st_size > 0


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason='matplotlib is not installed')
def test_overview_plot_has_two_panels_with_units_and_errors_in_thousandths(tmp_path):
    t = np.linspace(0.0, 1.0, 11)
    q = np.zeros((11, 3))
    error = np.full((11, 3), 2e-3)
    figure = sim.write_overview_plot(tmp_path / 'o.png', ['j1', 'j2', 'j3'], t, q, q, error,
                                     title='arm.yaml: move', units=['rad'] * 3)
    position, tracking = figure.axes
    assert figure.get_suptitle() == 'arm.yaml: move'
    assert position.get_ylabel() == 'joint position [rad]'
    assert tracking.get_ylabel() == 'tracking error q_ref − q [mrad]'
    assert [a.get_xlabel() for a in figure.axes] == ['time [s]'] * 2
    assert [line.get_label() for line in tracking.get_legend().get_lines()] == ['j1', 'j2', 'j3']
    drawn = [line.get_ydata() for line in tracking.get_lines() if line.get_label() == 'j2']
    np.testing.assert_allclose(drawn[0], 2.0)             # 2e-3 rad drawn as 2 mrad
    prismatic = sim.write_overview_plot(tmp_path / 'p.png', ['j1', 'j2'], t, q[:, :2],
                                        q[:, :2], error[:, :2], units=['m', 'm'])
    assert prismatic.axes[1].get_ylabel().endswith('[mm]')
    assert prismatic.axes[0].get_ylabel() == 'joint position [m]'


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason='matplotlib is not installed')
def test_the_readme_figure_command_draws_a_wide_png_of_the_run(tmp_path):
    """The README's figure command as written, through dev.py with this interpreter, from a
    directory of its own: it writes the figure where the command says."""
    words = readme_figure_command()
    (tmp_path / os.path.dirname(FIGURE)).mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, words[1]), '--python', sys.executable,
         *words[2:]], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert 'simulated 3.000 s' in result.stdout
    width, height = png_size((tmp_path / FIGURE).read_bytes())
    assert width > 2 * height > 0                          # the overview: one wide row


def test_sim_passes_the_robot_the_move_and_rad_units_to_its_plot(tmp_path, monkeypatch):
    seen = {}

    def record(path, names, t, q, q_ref, error, title=None, units=None):
        seen.update(path=path, names=names, title=title, units=units)
    monkeypatch.setattr(sim, 'write_plot', record)
    monkeypatch.setattr(sim, 'matplotlib_figure', lambda: object)    # no matplotlib needed
    monkeypatch.setattr(sim, 'output_problem', lambda path, plot=False: None)
    assert sim.main(['--duration', '0.3', '--plot', str(tmp_path / 'run.png')]) == 0
    assert seen['names'] == JOINTS and seen['units'] == ['rad'] * 6
    assert seen['title'].startswith('puma560.yaml: [LEE] §5 move (90°, 0°, 90°')
