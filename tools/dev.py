#!/usr/bin/env python3
"""Fresh-machine quick start (CPython 3.10-3.12, standard library only).

    python3 tools/dev.py sim   [--duration 5] [--robot panda] [--distro kilted|jazzy]
                               [-- sim options]
    python3 tools/dev.py test  [--distro kilted|jazzy] [--busy] [--repeat N] [-- pytest options]
    python3 tools/dev.py bench [--distro kilted|jazzy] [-- benchmarks/run.py options]
    python3 tools/dev.py lock  [--distro kilted|jazzy]


Creates .venv-<distro> in the repository if it is missing (rclpy and the message packages
come from PyPI as ros-<distro>-* wheels for CPython 3.10-3.12; no ROS install, no
sourcing), puts the repository on PYTHONPATH, and runs the closed-loop demo (`sim`), the
test suite (`test`, which ends with pytest's summary line; no tests collected is a failure)
or the performance benchmark (`bench`, doc/performance.md: first installs its yardstick
Pinocchio, `pin`, into the venv if it is missing; a benchmark dependency, never one of the package).

Every package is installed at the version pinned in tools/constraints-<distro>.txt (the
versions the suite was last run with), so a new release on PyPI cannot turn a fresh clone
red. `--latest` tries the newest instead, in a venv of its own (.venv-<distro>-latest);
`lock` rewrites tools/constraints-<distro>.txt from what is installed in the venv (with
`--latest`: from the newest), to update the pins on purpose after the suite passed there.

`test --busy` runs the suite with one busy loop pinned to each CPU (a loaded CI machine:
on 2 cores the load is about 3 to 4 on top of the suite), `--repeat N` runs it N times in a
row, stopping at the first failure; each run ends with its wall time.

`test` and `bench` also build the control_msgs interfaces the controller's
FollowJointTrajectory action uses into the venv, once (PyPI has no control_msgs wheel;
cmake and a C/C++ compiler build it from tools/interfaces/control_msgs in about two
minutes; see tools/interfaces.py). `sim` uses them when they are there.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import interfaces   # noqa: I100 - tools/interfaces.py, beside this file

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTROS = ('kilted', 'jazzy')
SUPPORTED = ((3, 10), (3, 11), (3, 12))     # CPython versions with ros-<distro>-* wheels
MARKER = 'robot_dynamics-requirements.txt'
# pytest's last line, e.g. '==== 3 passed, 1 skipped in 2.1s ====' (without '=' under -q)
SUMMARY = re.compile(r'^((\d+ \w+,? ?)+|no tests ran) in [0-9.]+s( \([0-9:]+\))?$')


def requirements(distro):
    ros = [f'ros-{distro}-rclpy[fastrtps]'] + [
        f'ros-{distro}-{name}' for name in ('sensor-msgs', 'trajectory-msgs', 'std-msgs',
                                            'rosgraph-msgs', 'geometry-msgs',
                                            'diagnostic-msgs', 'lifecycle-msgs',
                                            'std-srvs')]
    # matplotlib: the optional 'plot' extra, so the figure tests run too; numba (the
    # optional accelerator) in the kilted venv only, so that CI tests the numba backend
    # there and its absence with jazzy
    extras = ['numba'] if distro == 'kilted' else []
    # scipy and cvxpy: the optional 'identification' extra (whole-arm identification);
    # rosbags: the 'bags' extra (identify reads and writes rosbag2 folders without ROS);
    # mujoco: the 'test' extra (identification on an arm simulated by MuJoCo)
    # pin: Pinocchio, the yardstick of the kinematics tests and of the benchmarks
    return ros + ['numpy', 'pyyaml', 'pytest', 'hypothesis', 'matplotlib', 'scipy',
                  'cvxpy', 'rosbags', 'mujoco', 'pin'] + extras


def constraints_file(distro):
    return os.path.join(REPO, 'tools', f'constraints-{distro}.txt')


def venv_dir(distro, latest=False):
    return os.path.join(REPO, f'.venv-{distro}' + ('-latest' if latest else ''))


def base_python():
    """A CPython 3.10-3.12 interpreter to create the venv with."""
    if sys.version_info[:2] in SUPPORTED:
        return sys.executable
    for version in reversed(SUPPORTED):
        found = shutil.which('python%d.%d' % version)
        if found:
            return found
    sys.exit('dev.py: ROS wheels on PyPI need CPython 3.10, 3.11 or 3.12; this is '
             f'{sys.version.split()[0]} and no python3.10-3.12 is on PATH')


def venv_python(venv):
    return os.path.join(venv, 'Scripts' if os.name == 'nt' else 'bin', 'python')


def ensure_venv(distro, latest=False):
    """.venv-<distro> with the requirements installed at the pinned versions (once; re-done
    if the requirements or the pins change); with `latest`, .venv-<distro>-latest with the
    newest versions."""
    venv = venv_dir(distro, latest)
    pins = [] if latest else ['-c', constraints_file(distro)]
    wanted = '\n'.join(requirements(distro)) + '\n'
    if not latest:
        with open(constraints_file(distro), encoding='utf-8') as stream:
            wanted += stream.read()
    marker = os.path.join(venv, MARKER)
    if os.path.exists(marker) and open(marker, encoding='utf-8').read() == wanted:
        return venv_python(venv)
    if not os.path.exists(venv_python(venv)):
        print(f'dev.py: creating {venv}', flush=True)
        subprocess.run([base_python(), '-m', 'venv', venv], check=True)
    print(f'dev.py: installing {" ".join(requirements(distro))}'
          + (' (newest versions)' if latest else
             f' (versions of {os.path.relpath(constraints_file(distro), REPO)})'), flush=True)
    subprocess.run([venv_python(venv), '-m', 'pip', 'install', '--upgrade', 'pip', *pins],
                   check=True)
    subprocess.run([venv_python(venv), '-m', 'pip', 'install',
                    *(['--upgrade'] if latest else []), *pins, *requirements(distro)],
                   check=True)
    with open(marker, 'w', encoding='utf-8') as stream:
        stream.write(wanted)
    return venv_python(venv)


def write_constraints(python, distro):
    """tools/constraints-<distro>.txt from `pip freeze` of `python`'s environment."""
    frozen = subprocess.run([python, '-m', 'pip', 'freeze', '--all'], check=True,
                            capture_output=True, text=True).stdout.splitlines()
    pins = sorted((line for line in frozen if '==' in line and ' @ ' not in line),
                  key=str.lower)
    path = constraints_file(distro)
    with open(path, 'w', encoding='utf-8') as stream:
        stream.write(f'# Versions tools/dev.py installs into .venv-{distro} (pip -c); the suite '
                     'passed with them.\n# Update on purpose: python3 tools/dev.py test '
                     f'--distro {distro} --latest, then\n# python3 tools/dev.py lock --distro '
                     f'{distro} --latest if it passed.\n')
        stream.write('\n'.join(pins) + '\n')
    print(f'dev.py: wrote {len(pins)} pins to {os.path.relpath(path, REPO)}')
    return 0


def environment():
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [REPO, env.get('PYTHONPATH')]))
    env.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    return env


def run_sim(python, options):
    """The simulation in a child process. Ctrl-C (SIGINT) and SIGTERM are the child's to
    handle: it ends its run, writes what it was asked for and exits with one line (130
    after Ctrl-C); a signal sent to this process alone is passed on to it. Returns the
    child's exit status (128 + N if a signal N ended it)."""
    command = [python, '-m', 'robot_dynamics.nodes.sim']
    if options.duration is not None:
        command += ['--duration', str(options.duration)]
    if options.robot is not None:
        command += ['--robot', options.robot]
    children = []

    def pass_on(signum, frame):
        # Ctrl-C in a terminal reaches the child too (same process group); the child
        # takes a second copy within its grace period as the same stop
        if not children:
            print('dev.py: interrupted before the simulation started', file=sys.stderr)
            raise SystemExit(128 + signum)
        if children[0].poll() is None:
            children[0].send_signal(signum)
    previous = {signum: signal.signal(signum, pass_on)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        # run from the caller's directory: relative --params-file, --csv, --plot paths
        # are theirs
        children.append(subprocess.Popen(command + options.extra, env=environment()))
        code = children[0].wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def pytest_targets(extra):
    """`test/`, unless the options after `--` name test files or directories themselves."""
    named = [arg for arg in extra if not arg.startswith('-')
             and os.path.exists(os.path.join(REPO, arg.split('::')[0]))]
    return [] if named else ['test']


BUSY_LOOP = 'import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n'


def start_busy_loops():
    """One busy loop per CPU this process may use, each pinned to its CPU (as `taskset -c
    <cpu>` would); the processes."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') \
        else list(range(os.cpu_count() or 1))
    loops = [subprocess.Popen([sys.executable, '-c', BUSY_LOOP, str(cpu)]) for cpu in cpus]
    print(f'dev.py: {len(loops)} busy loops pinned to CPUs {cpus}', flush=True)
    return loops


def run_tests(python, options):
    """`run_suite` `options.repeat` times (stopping at the first failure), with a busy
    loop on every CPU meanwhile if `options.busy`."""
    loops = start_busy_loops() if options.busy else []
    try:
        for run in range(1, options.repeat + 1):
            started = time.monotonic()
            code = run_suite(python, options)
            minutes, seconds = divmod(time.monotonic() - started, 60.0)
            print(f'dev.py test run {run}/{options.repeat}'
                  + (' (busy loops on every CPU)' if loops else '')
                  + f': exit {code}, wall time {int(minutes)}:{seconds:04.1f}', flush=True)
            if code != 0:
                return code
        return 0
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def run_suite(python, options):
    """pytest on test/ (or on the files given after `--`), streamed; its summary line
    repeated at the end."""
    process = subprocess.Popen([python, '-m', 'pytest', *pytest_targets(options.extra),
                                *options.extra], cwd=REPO,
                               env=environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    summary = None
    for line in process.stdout:
        sys.stdout.write(line)
        text = line.strip().strip('=').strip()
        if SUMMARY.match(text):
            summary = text
    code = process.wait()
    print(f'dev.py test ({options.distro}): {summary or "no pytest summary line"}')
    if code == 5:
        print('dev.py: pytest collected no tests; treated as a failure')
        return 1
    return code


def run_bench(python, options):
    """benchmarks/run.py, after installing Pinocchio (the yardstick) if it is missing."""
    probe = subprocess.run([python, '-c', 'import pinocchio'], capture_output=True)
    if probe.returncode != 0:
        print('dev.py: installing pin (Pinocchio, the benchmark yardstick)', flush=True)
        subprocess.run([python, '-m', 'pip', 'install', 'pin'], check=True)
    command = [python, os.path.join('benchmarks', 'run.py'), *options.extra]
    return subprocess.run(command, cwd=REPO, env=environment()).returncode


def parse(argv):
    parser = argparse.ArgumentParser(prog='dev.py', description=__doc__.split('\n')[0])
    parser.add_argument('command', choices=('sim', 'test', 'bench', 'lock'))
    parser.add_argument('--distro', choices=DISTROS, default='kilted')
    parser.add_argument('--latest', action='store_true',
                        help='the newest versions from PyPI instead of the pinned ones, in '
                        '.venv-<distro>-latest')
    parser.add_argument('--duration', type=float, default=None,
                        help='sim: simulated seconds, then print a tracking summary')
    parser.add_argument('--robot', default=None,
                        help='sim: a robot preset of config/ (puma560, panda, stanford, '
                        'planar2, sasaki6); default puma560')
    parser.add_argument('--busy', action='store_true',
                        help='test: one busy loop pinned to each CPU while the suite runs')
    parser.add_argument('--repeat', type=int, default=1,
                        help='test: run the suite this many times in a row (default 1)')
    parser.add_argument('--python', default=None,
                        help='use this interpreter (with the requirements installed, and '
                        'control_msgs if wanted: nothing is built into it) instead of '
                        '.venv-<distro>')
    argv = list(argv)
    extra = argv[argv.index('--') + 1:] if '--' in argv else []
    options, unknown = parser.parse_known_args(argv[:argv.index('--')] if '--' in argv
                                               else argv)
    if unknown:
        before = ' '.join(a for a in argv if a not in unknown and a != '--')
        print(f'dev.py: error: {" ".join(unknown)}: options for {options.command} go after '
              f'--, e.g. python3 tools/dev.py {before} -- {" ".join(unknown + extra)}',
              file=sys.stderr)
        raise SystemExit(2)
    options.extra = extra       # after --: passed to sim, pytest or the benchmark
    return options


def main(argv=None):
    options = parse(sys.argv[1:] if argv is None else argv)
    python = options.python or ensure_venv(options.distro, options.latest)
    if options.command == 'lock':
        return write_constraints(python, options.distro)
    # the demo does not need control_msgs (its first run stays quick); an interpreter given
    # with --python is the caller's, built for a distribution dev.py does not know: never
    # build into it (a kilted build into a jazzy venv breaks its rclpy)
    if options.command != 'sim' and not options.python:
        interfaces.ensure_control_msgs(python, options.distro)
    if options.command == 'sim':
        return run_sim(python, options)
    if options.command == 'bench':
        return run_bench(python, options)
    return run_tests(python, options)


if __name__ == '__main__':
    sys.exit(main())
