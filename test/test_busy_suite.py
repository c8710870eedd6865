"""`tools/dev.py test --busy --repeat N`: the suite (here a small stand-in file) run N times
in a row with one busy loop pinned to each CPU meanwhile, each run's wall time reported,
the loops gone afterwards."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The stand-in suite: passes only while a busy loop runs pinned to every CPU.
PROBE = '''
import os


def busy_loops():
    """pid -> its CPUs, for the busy loops of the dev.py that runs this suite (pytest's
    parent; a dev.py --busy running the outer suite has its own loops, not counted)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as stream:
                command = stream.read().split(b'\\0')
            with open(f'/proc/{pid}/stat', encoding='utf-8') as stream:
                parent = int(stream.read().rsplit(')', 1)[1].split()[1])
            cpus = os.sched_getaffinity(int(pid))
        except OSError:
            continue
        if any(b'while True' in part for part in command) and b'-c' in command \\
                and parent == os.getppid():
            found[int(pid)] = cpus
    return found


def test_every_cpu_has_its_busy_loop():
    loops = busy_loops()
    pinned = sorted(next(iter(cpus)) for cpus in loops.values() if len(cpus) == 1)
    assert pinned == sorted(os.sched_getaffinity(0)), loops
    with open(os.path.join(os.path.dirname(__file__), 'pids.txt'), 'a') as stream:
        stream.write(' '.join(map(str, loops)) + '\\n')
'''


@pytest.mark.skipif(not hasattr(os, 'sched_getaffinity'), reason='Linux CPU affinity')
def test_dev_py_runs_the_suite_repeatedly_under_a_busy_loop_per_cpu(tmp_path):
    probe = tmp_path / 'test_probe.py'
    probe.write_text(PROBE)
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, 'tools', 'dev.py'), '--python', sys.executable,
         'test', '--busy', '--repeat', '2', '--', str(probe), '-q', '-p', 'no:cacheprovider',
         '--rootdir', str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    cpus = sorted(os.sched_getaffinity(0))
    assert f'{len(cpus)} busy loops pinned to CPUs {cpus}' in out
    runs = [line for line in out.splitlines() if line.startswith('dev.py test run ')]
    assert len(runs) == 2, out
    for k, line in enumerate(runs, 1):
        assert line.startswith(f'dev.py test run {k}/2 (busy loops on every CPU): exit 0, '
                               'wall time '), line
    pids = (tmp_path / 'pids.txt').read_text().split()
    assert len(pids) == 2 * len(cpus)            # the same loops seen by both runs
    for pid in pids:                             # and gone afterwards
        assert not os.path.exists(f'/proc/{pid}'), pid


def test_a_failing_run_stops_the_repetition(tmp_path):
    probe = tmp_path / 'test_fails.py'
    probe.write_text('def test_fails():\n    assert False\n')
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, 'tools', 'dev.py'), '--python', sys.executable,
         'test', '--repeat', '3', '--', str(probe), '-q', '-p', 'no:cacheprovider',
         '--rootdir', str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    runs = [line for line in result.stdout.splitlines() if line.startswith('dev.py test run ')]
    assert result.returncode != 0
    assert len(runs) == 1 and runs[0].startswith('dev.py test run 1/3: exit 1'), result.stdout


def load_dev_py():
    """tools/dev.py as a module (it imports tools/interfaces.py from beside it)."""
    import importlib.util
    sys.path.insert(0, os.path.join(REPO, 'tools'))
    try:
        spec = importlib.util.spec_from_file_location('dev_py_under_test',
                                                      os.path.join(REPO, 'tools', 'dev.py'))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.join(REPO, 'tools'))
    return module


@pytest.mark.parametrize('given_python', [False, True])
def test_control_msgs_is_built_into_dev_pys_own_venv_only(monkeypatch, given_python):
    """`dev.py test` builds control_msgs into .venv-<distro>, for that distribution; an
    interpreter given with --python (e.g. a jazzy venv, while --distro defaults to kilted)
    is never built into: a kilted build there broke its rclpy."""
    dev = load_dev_py()
    built = []
    monkeypatch.setattr(dev, 'ensure_venv',
                        lambda distro, latest=False: f'/venv-{distro}/bin/python')
    monkeypatch.setattr(dev.interfaces, 'ensure_control_msgs',
                        lambda python, distro: built.append((python, distro)))
    monkeypatch.setattr(dev, 'run_tests', lambda python, options: 0)
    argv = ['test', '--distro', 'jazzy'] + (['--python', '/elsewhere/python'] if given_python
                                            else [])
    assert dev.main(argv) == 0
    assert built == ([] if given_python else [('/venv-jazzy/bin/python', 'jazzy')])
