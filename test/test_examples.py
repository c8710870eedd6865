"""The reproduction scripts in examples/ run at their CI setting (--short), print their
tables, and their numbers have the properties doc/reproductions.md states."""

import contextlib
import importlib.util
import io
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, 'examples')


def load_example(name):
    spec = importlib.util.spec_from_file_location(
        f'example_{name}', os.path.join(EXAMPLES, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_quietly(name, argv):
    """main(argv) of an example, its printed output captured: (results, text)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = load_example(name).main(argv)
    return results, out.getvalue()


@pytest.fixture(scope='module')
def lee(tmp_path_factory):
    figures = tmp_path_factory.mktemp('figures')
    return run_quietly('lee_computed_torque', ['--short', '--figure-dir', str(figures)])


@pytest.fixture(scope='module')
def sasaki():
    return run_quietly('sasaki_torques', ['--short', '--no-figure'])


@pytest.fixture(scope='module')
def counts():
    return run_quietly('operation_counts', ['--short'])


# ---------------------------------------------------------------------- [LEE]


def test_lee_prints_one_row_per_controller_for_each_case(lee):
    _, text = lee
    for label in ('computed torque', 'PD alone', 'PD + gravity comp.'):
        assert text.count(label) >= 2
    assert 'claim holds' in text


def test_lee_computed_torque_beats_pd_by_a_large_factor_with_a_perfect_model(lee):
    perfect = lee[0]['perfect']
    worst = {name: np.max(errors) for name, errors in perfect.items()}
    assert worst['ct'] * 10.0 < worst['pdg'] < worst['pd']


def test_lee_error_at_100_hz_is_the_order_of_the_independent_experiment_and_above_the_claim(lee):
    # doc/reproductions.md: an independent run of the same set-up: T = 1 s gives up to 3.8e-3 rad
    results = lee[0]
    assert results['duration'] == 1.0
    worst = np.max(results['perfect']['ct'])
    assert 1e-3 < worst < 1e-2
    assert worst > results['adc_quantum']


def test_lee_faster_sampling_reduces_the_computed_torque_error(lee):
    results = lee[0]
    (duration, rate), errors = next(iter(results['sweep'].items()))
    assert rate > 100.0 and duration == results['duration']
    assert np.max(errors) < 0.7 * np.max(results['perfect']['ct'])


def test_lee_unmodelled_payload_degrades_computed_torque(lee):
    results = lee[0]
    assert np.max(results['payload']['ct']) > 10.0 * np.max(results['perfect']['ct'])


def test_lee_writes_its_figure_when_matplotlib_is_present(lee):
    pytest.importorskip('matplotlib')
    path = lee[0]['figure']
    assert path is not None and os.path.getsize(path) > 1000


# ---------------------------------------------------------------------- [SAS]


def test_sasaki_forward_kinematics_reaches_the_papers_points_a_and_b(sasaki):
    kin = sasaki[0]['kinematics']
    for point in ('A', 'B'):
        # the paper prints its angles to 4 decimals of a degree: ~1e-5 m at 1 m reach
        assert kin[point]['position_error'] < 2e-5
        assert kin[point]['orientation_error'] < 1e-5


def test_sasaki_static_torques_agree_with_the_independent_reconstruction_values(sasaki):
    results = sasaki[0]
    independent = load_example('sasaki_torques').INDEPENDENT_STATIC
    for point in ('A', 'B'):
        assert np.allclose(results['static'][point], independent[point], atol=1e-3)


def test_sasaki_torque_jumps_at_the_profile_corners_are_mass_matrix_times_the_step(sasaki):
    # q and q̇ are continuous at T/3 and 2T/3, q̈ steps by −a: Δτ = M(q) (−a)
    from robot_dynamics import dynamics
    from robot_dynamics.model import RobotModel
    example = load_example('sasaki_torques')
    model = RobotModel.from_yaml(os.path.join(ROOT, 'config', 'sasaki6.yaml'))
    results = sasaki[0]
    labels, tau, times = results['labels'], results['tau'], results['times']
    a = 9.0 * (example.Q_B - example.Q_A) / (2.0 * example.DURATION ** 2)
    for before, after in (('T/3-', 'T/3+'), ('2T/3-', '2T/3+')):
        i, j = labels.index(before), labels.index(after)
        q_mid = example.profiles.trapezoid(times[i], example.Q_A, example.Q_B,
                                           example.DURATION)[0]
        expected = dynamics.mass_matrix(model, q_mid) @ (-a)
        assert np.allclose(tau[j] - tau[i], expected, atol=1e-6)


def test_sasaki_prints_the_torque_table_and_joint_one_carries_no_gravity(sasaki):
    results, text = sasaki
    assert 'Joint torques along the move' in text and 'g(A)' in text
    # joint 1's axis is vertical: gravity loads it at neither end point
    assert abs(results['static']['A'][0]) < 1e-9 and abs(results['static']['B'][0]) < 1e-9


def test_sasaki_max_torque_includes_the_high_side_of_every_jump(sasaki):
    # τ jumps where q̈ does; the printed max |τ| must not miss a one-sided corner value
    results, text = sasaki
    t, history = results['history']
    corner_peak = np.max(np.abs(results['tau']), axis=0)
    assert np.all(results['peak'] >= corner_peak)
    assert np.all(results['peak'] >= np.max(np.abs(history), axis=0))
    assert np.any(corner_peak > np.max(np.abs(history), axis=0) + 1e-3)   # the grid misses one
    printed = text.split('max |tau| [N m]')[1].split(':', 1)[1].split()[:6]
    assert np.allclose([float(v) for v in printed], results['peak'], atol=5e-4)


def test_sasaki_script_runs_as_a_command():
    completed = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, 'sasaki_torques.py'), '--short',
         '--no-figure'], capture_output=True, text=True, timeout=120,
        env={**os.environ, 'PYTHONPATH': ROOT})
    assert completed.returncode == 0, completed.stderr
    assert 'Forward kinematics' in completed.stdout


# ---------------------------------------------------------------------- counts, timing


def test_generic_chain_operation_counts_grow_linearly_in_n(counts):
    rows = counts[0]['generic']
    muls = np.diff([row[1] for row in rows[1:]])
    adds = np.diff([row[2] for row in rows[1:]])
    assert len(set(muls)) == 1 and len(set(adds)) == 1   # O(n), constant cost per link


def test_newton_euler_counts_are_below_lees_table_2_for_a_six_link_controller(counts):
    results, text = counts
    assert 'this package' in text
    for label, c in results['ours'].items():
        # [LEE] Table 2: 119n − 24 = 690 M and 107n − 21 = 621 A at n = 6, servo included
        assert c['mul'] + 12 < 690 and c['add'] + 24 < 621, label


def test_pdp_estimate_from_lees_counts_is_close_to_his_stated_3_ms(counts):
    timing = counts[0]['timing']
    assert abs(timing['pdp'] - 3e-3) < 0.1 * 3e-3
    assert timing['law'] > 0.0 and timing['kernel'] > 0.0
