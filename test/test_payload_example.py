"""examples/payload_identification.py at its CI setting (--short): its printed results
have the properties doc/payload-identification.md states."""

import numpy as np
import pytest

from test_examples import run_quietly


@pytest.fixture(scope='module')
def short_run(tmp_path_factory):
    figures = tmp_path_factory.mktemp('figures')
    return run_quietly('payload_identification', ['--short', '--figure-dir', str(figures)])


def test_example_identifies_the_payload_and_improves_the_move(short_run):
    results, text = short_run
    payload, estimate = results['payload'], results['estimate']
    assert estimate.usable
    assert abs(estimate.mass - payload['mass']) <= 0.02 * payload['mass']
    assert np.linalg.norm(estimate.com - np.asarray(payload['com'])) <= 5e-3
    assert results['move_error_after'] * 10.0 <= results['move_error_before']
    assert 'x less' in text and 'condition number' in text


def test_example_history_becomes_excited_and_writes_its_figure(short_run):
    results, _ = short_run
    flags = [estimate.excited for _, estimate in results['history']]
    assert not flags[0] and flags[-1]          # too few samples at first, then enough
    pytest.importorskip('matplotlib')
    assert results['figure'] and results['figure'].endswith('payload_identification.png')
