"""examples/arm_identification.py at its CI setting (--short): it runs `identify estimate` on
the simulated bags, prints the executable's report, and the file it wrote predicts the
plant's noise-free efforts on the validation motion better than the robot file; the figure
is written where asked."""

import pytest

pytest.importorskip('rosbags')
pytest.importorskip('cvxpy')
pytest.importorskip('matplotlib')

from test_examples import run_quietly  # noqa: E402


@pytest.fixture(scope='module')
def example(tmp_path_factory):
    figures = tmp_path_factory.mktemp('figures')
    return run_quietly('arm_identification', ['--short', '--figure-dir', str(figures)])


def test_the_example_runs_the_executable_and_prints_its_report(example):
    results, text = example
    assert results['code'] == 0, text
    for line in ('condition number', 'relative error, identified', 'wrote '):
        assert line in text


def test_the_identified_file_predicts_every_joint_better_than_the_robot_file(example):
    results, _ = example
    errors = results['errors']
    assert (errors['identified'] < errors['prior']).all(), errors
    assert not results['consistency']


def test_the_figure_is_written(example):
    results, _ = example
    with open(results['figure'], 'rb') as stream:
        assert stream.read(8) == b'\x89PNG\r\n\x1a\n'
