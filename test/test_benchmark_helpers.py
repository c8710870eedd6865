"""Helpers of the benchmarks that decide what a row means: the busy processes of the loaded
runs (one per CPU, pinned, normal priority, ending by themselves) and the per-link growth
of the dynamics cost (1 for a cost linear in n, whatever the fixed part), and how a row
that misses its target reads (FAIL, or 'aspiration: not met')."""

import os
import sys

import pytest

from ros_testing import REPO   # noqa: I100 - sets ROS_DOMAIN_ID before closed_loop is imported

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
under_load = pytest.importorskip('under_load')
run = pytest.importorskip('run')


def test_busy_processes_spin_one_per_cpu_at_normal_priority_and_end_by_themselves():
    cpus = sorted(os.sched_getaffinity(0))
    with under_load.busy_processes(True, limit=1.0) as processes:
        assert len(processes) == len(cpus)
        for process, cpu in zip(processes, cpus):
            assert process.poll() is None
            assert os.sched_getaffinity(process.pid) == {cpu}
            assert os.sched_getscheduler(process.pid) == os.SCHED_OTHER
        for process in processes:
            process.wait(timeout=60.0)      # a safety net, not a timing assertion
            assert process.returncode == 0  # ended by itself, not terminated


def test_quiet_runs_start_no_busy_process():
    with under_load.busy_processes(False, limit=1.0) as processes:
        assert processes == []


def test_per_link_growth_is_one_for_a_linear_cost_with_a_fixed_part():
    linear = {n: 3.0e-6 + 2.0e-6 * n for n in (6, 12, 50, 100)}
    assert run.per_link_growth(linear, (6, 50), (50, 100)) == pytest.approx(1.0)
    assert run.per_link_growth(linear, (6, 12), (50, 100)) == pytest.approx(1.0)
    quadratic = {n: 1.0e-6 * n * n for n in (6, 50, 100)}
    assert run.per_link_growth(quadratic, (6, 50), (50, 100)) == pytest.approx(150 / 56)


def test_a_missed_aspiration_is_marked_as_such_and_a_missed_promise_fails():
    table = run.Table()
    table.add('promise', 3.0, 1.0, 2.0)
    table.add('aspiration missed', 3.0, 1.0, 2.0, aspiration=True)
    table.add('aspiration met', 1.0, 1.0, 2.0, aspiration=True)
    table.add('numba missed', 1.0, 1.0, 2.0, accelerated=0.9, target_accelerated=0.5,
              aspiration=True)
    assert [row[-1] for row in table.rows] == [
        'FAIL', 'aspiration: not met', 'aspiration: met', 'aspiration: not met']
    assert table.markdown().count('FAIL') == 1


def test_the_ros2_control_tracking_summary_is_the_ratio_of_the_medians_against_3x():
    from benchmark_modules import benchmark_module
    tracking = benchmark_module('ros2_control_tracking')
    direct = [2e-5, 1e-5, 5e-5]                         # median 0.02 mrad
    met = tracking.summary({'direct': direct, 'ours': [6e-5, 2e-4, 3e-5]})
    assert 'median 0.0200 mrad' in met and 'median 0.0600 mrad' in met
    assert met.endswith('medians of 3 interleaved runs: 3.00, target <= 3: met')
    missed = tracking.summary({'direct': direct, 'ours': [6.2e-5, 7e-5, 6.1e-5]})
    assert missed.endswith('3.10, target <= 3: not met')
    alone = tracking.summary({'ours': [6e-5]})
    assert 'ratio' not in alone and 'target' not in alone
