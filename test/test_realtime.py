"""Real-time options (`realtime.priority`, `realtime.cpu_affinity`, `realtime.lock_memory`,
doc/realtime.md): validation with the parameter named; the applied path checked from
outside on the controller executable's threads (as root, or wherever SCHED_FIFO is
allowed); the refused path in a process without RLIMIT_RTPRIO, with a tiny RLIMIT_MEMLOCK
and without CAP_SYS_NICE and CAP_IPC_LOCK: one warning saying what was refused and how to
allow it, and the node still controls. The garbage collector is frozen before the loop."""

import errno
import os
import subprocess
import sys

import numpy as np
import pytest

from ros_testing import PUMA, REPO, RosHarness   # noqa: I100 - sets ROS_DOMAIN_ID first
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics.nodes.common import realtime
from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.nodes.common.realtime import (apply_to_threads, enter_loop, parse_options,
                                           RealtimeOptions)
from robot_dynamics.nodes.common.ros_params import ConfigurationError

SIM_1KHZ = os.path.join(REPO, 'config', 'sim_1khz.yaml')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
Q0 = [1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0]
RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
CAP_IPC_LOCK, CAP_SYS_NICE = 14, 23  # linux/capability.h
# Runs the command in argv without a real-time priority allowed, with 64 KiB of lockable
# memory, and with CAP_SYS_NICE and CAP_IPC_LOCK out of the capability bounding set
# (PR_CAPBSET_DROP = 24), so that even root does not get them back at exec; not root (no
# CAP_SETPCAP), the drop fails and the process has neither capability anyway.
UNPRIVILEGED = f"""
import ctypes, os, resource, sys
resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
resource.setrlimit(resource.RLIMIT_MEMLOCK, (65536, 65536))
libc = ctypes.CDLL(None, use_errno=True)
for capability in ({CAP_IPC_LOCK}, {CAP_SYS_NICE}):
    libc.prctl(24, capability, 0, 0, 0)
os.execv(sys.argv[1], sys.argv[1:])
"""
REFUSED = 'real-time options refused'


# ---------------------------------------------------------------------- validation


def test_options_parse_and_default_to_off():
    assert not RealtimeOptions().requested
    options = parse_options(80, [1, 0], True)
    assert options == RealtimeOptions(80, (1, 0), True) and options.requested
    assert parse_options(0, None, False) == RealtimeOptions()
    assert parse_options(0, [], False) == RealtimeOptions()


@pytest.mark.parametrize('values, named', [
    ((-1, [], False), 'realtime.priority'),
    ((100, [], False), 'realtime.priority'),
    ((50.0, [], False), 'realtime.priority'),
    (('high', [], False), 'realtime.priority'),
    ((True, [], False), 'realtime.priority'),
    ((0, 'all', False), 'realtime.cpu_affinity'),
    ((0, [0, -2], False), 'realtime.cpu_affinity[1]'),
    ((0, [0, 1.5], False), 'realtime.cpu_affinity[1]'),
    ((0, [1, 1], False), 'realtime.cpu_affinity[1]'),
    ((0, [], 'yes'), 'realtime.lock_memory'),
])
def test_a_bad_option_names_the_parameter(values, named):
    with pytest.raises(ConfigurationError, match=named.replace('[', r'\[').replace(']', r'\]')):
        parse_options(*values)


@pytest.fixture
def harness():
    harness = RosHarness(PUMA, SIM_1KHZ)
    yield harness
    harness.close()


@pytest.mark.parametrize('node_class', [ComputedTorqueController, PlantSimulator])
def test_both_nodes_declare_the_options_read_only(harness, node_class):
    node = harness.add(node_class(context=harness.context, parameter_overrides=[
        Parameter('realtime.priority', value=30),
        Parameter('realtime.cpu_affinity', value=[0]),
        Parameter('realtime.lock_memory', value=True)]))
    assert node.realtime == RealtimeOptions(30, (0,), True)
    for name in ('realtime.priority', 'realtime.cpu_affinity', 'realtime.lock_memory'):
        assert node.describe_parameter(name).read_only


def test_a_parameter_file_with_an_empty_cpu_list_means_all_cpus(tmp_path):
    path = tmp_path / 'realtime.yaml'
    path.write_text('/**:\n  ros__parameters:\n    realtime:\n      priority: 80\n'
                    '      cpu_affinity: []\n      lock_memory: true\n')
    harness = RosHarness(PUMA, SIM_1KHZ, str(path))
    try:
        node = harness.add(ComputedTorqueController(context=harness.context))
        assert node.realtime == RealtimeOptions(80, (), True)
    finally:
        harness.close()


def test_a_bad_priority_stops_the_node_at_start_up(harness):
    with pytest.raises(ConfigurationError, match=r'realtime\.priority'):
        ComputedTorqueController(context=harness.context, parameter_overrides=[
            Parameter('realtime.priority', value=120)])


# ---------------------------------------------------------------------- refusals, injected


def refuse(code):
    def call(*args):
        raise OSError(code, os.strerror(code))
    return call


def test_refusals_make_one_warning_saying_what_and_how_to_allow_it():
    options = RealtimeOptions(50, (), True)
    report = apply_to_threads(options, set_scheduler=refuse(errno.EPERM),
                              lock_all=refuse(errno.ENOMEM))
    assert report.applied == ()
    assert [name for name, _ in report.refused] == ['lock_memory', 'priority']
    text = report.warning()
    assert '\n' not in text
    for expected in ('SCHED_FIFO priority 50 refused', 'RLIMIT_RTPRIO', 'CAP_SYS_NICE',
                     'rtprio', 'limits.conf', 'ulimit -r', 'mlockall refused',
                     'RLIMIT_MEMLOCK', 'memlock', 'ulimit -l'):
        assert expected in text, expected


def test_cpus_the_process_may_not_use_are_refused_and_the_others_applied():
    calls = []
    missing = max(os.sched_getaffinity(0)) + 1
    allowed = min(os.sched_getaffinity(0))
    report = apply_to_threads(RealtimeOptions(0, (allowed, missing), False),
                              threads=(0, 12345),
                              set_affinity=lambda tid, cpus: calls.append((tid, cpus)))
    assert calls == [(0, [allowed]), (12345, [allowed])]     # every thread given
    assert report.applied == (f'CPUs {[allowed]}',)
    assert f'CPUs [{missing}] are not available' in report.warning()


def test_a_thread_that_ended_meanwhile_is_skipped():
    seen = []

    def set_scheduler(tid, policy, param):
        if tid == 2:
            raise ProcessLookupError(errno.ESRCH, 'No such process')
        seen.append((tid, policy, param.sched_priority))
    report = apply_to_threads(RealtimeOptions(20), threads=(1, 2, 3),
                              set_scheduler=set_scheduler)
    assert seen == [(1, os.SCHED_FIFO, 20), (3, os.SCHED_FIFO, 20)]
    assert report.refused == ()


class RecordingLogger:
    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(('info', text))

    def warning(self, text):
        self.lines.append(('warning', text))


class FakeNode:
    def __init__(self, options):
        self.realtime = options
        self.logger = RecordingLogger()

    def get_logger(self):
        return self.logger


def test_enter_loop_warns_once_for_everything_refused(monkeypatch):
    monkeypatch.setattr(realtime.os, 'sched_setscheduler', refuse(errno.EPERM))
    monkeypatch.setattr(realtime, '_mlockall', refuse(errno.EPERM))
    monkeypatch.setattr(realtime, 'quiet_garbage_collector', lambda: 0)
    node = FakeNode(RealtimeOptions(60, (), True))
    report = enter_loop(node)
    assert len(report.refused) == 2
    assert [level for level, _ in node.logger.lines] == ['warning']


def test_release_puts_every_thread_back_to_normal_scheduling_and_its_cpus():
    calls = []
    undone = realtime.release_threads(
        RealtimeOptions(60, (1,), True), {0, 1}, threads=(7, 8),
        set_scheduler=lambda tid, policy, param: calls.append(
            ('scheduler', tid, policy, param.sched_priority)),
        set_affinity=lambda tid, cpus: calls.append(('affinity', tid, sorted(cpus))),
        unlock_all=lambda: calls.append(('unlock',)))
    assert sorted(calls) == sorted([('scheduler', 7, os.SCHED_OTHER, 0),
                                    ('scheduler', 8, os.SCHED_OTHER, 0),
                                    ('affinity', 7, [0, 1]), ('affinity', 8, [0, 1]),
                                    ('unlock',)])
    assert undone == ('normal scheduling', 'CPUs [0, 1]', 'memory unlocked')


def test_leave_loop_undoes_only_what_enter_loop_applied(monkeypatch):
    """Priority refused, CPUs applied: leaving puts the CPUs back and leaves the
    scheduler alone (it never changed); a second leave does nothing."""
    monkeypatch.setattr(realtime, 'quiet_garbage_collector', lambda: 0)
    monkeypatch.setattr(realtime.os, 'sched_setscheduler', refuse(errno.EPERM))
    affinity_calls = []
    monkeypatch.setattr(realtime.os, 'sched_setaffinity',
                        lambda tid, cpus: affinity_calls.append(set(cpus)))
    before = os.sched_getaffinity(0)
    cpu = min(before)
    node = FakeNode(RealtimeOptions(60, (cpu,), False))
    report = enter_loop(node)
    assert [name for name, _ in report.refused] == ['priority']
    assert affinity_calls and all(cpus == {cpu} for cpus in affinity_calls)
    affinity_calls.clear()
    monkeypatch.setattr(realtime.os, 'sched_setscheduler', lambda *args: pytest.fail(
        'the scheduler was never raised: nothing to put back'))
    assert realtime.leave_loop(node) == (f'CPUs {sorted(before)}',)
    assert affinity_calls and all(cpus == before for cpus in affinity_calls)
    assert node.logger.lines[-1][0] == 'info' and 'released' in node.logger.lines[-1][1]
    assert realtime.leave_loop(node) == ()


def test_enter_loop_does_nothing_with_the_options_off(monkeypatch):
    monkeypatch.setattr(realtime, 'quiet_garbage_collector', lambda: 0)
    node = FakeNode(RealtimeOptions())
    assert enter_loop(node) is None and node.logger.lines == []


def test_the_garbage_collector_is_frozen_with_the_start_up_objects():
    code = ('import gc\nfrom robot_dynamics.nodes.common.realtime import quiet_garbage_collector\n'
            'survivor = [[i] for i in range(1000)]\n'
            'frozen = quiet_garbage_collector()\n'
            'print(frozen, gc.get_freeze_count(), len(gc.get_objects()))\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=REPO), check=True).stdout.split()
    frozen, count, tracked = (int(v) for v in out)
    assert frozen == count >= 1000                  # the survivors are frozen ...
    assert tracked < 100                            # ... and no longer traversed


# ---------------------------------------------------------------------- the executable


class Probe(Node):
    def __init__(self, context):
        super().__init__('realtime_probe', context=context)
        self.commands = []
        self.state_pub = self.create_publisher(JointState, '/joint_states', RELIABLE)
        self.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                 self.commands.append, RELIABLE)

    def send_state(self):
        msg = JointState(name=JOINTS, position=Q0, velocity=[0.0] * 6)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.state_pub.publish(msg)


def start_executable(options, launcher=(), executable='controller'):
    """The `controller` (or `plant`) executable with the 1 kHz settings and `options`,
    started through `launcher` (a command that execs its arguments) if given."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    return subprocess.Popen(
        [*launcher, sys.executable, '-m', f'robot_dynamics.nodes.{executable}', '--ros-args',
         '--params-file', PUMA, '--params-file', SIM_1KHZ, '-p', 'use_sim_time:=false',
         *options], env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


def finish(process):
    if process.poll() is None:
        process.send_signal(2)
    try:
        out, _ = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return out


def answers_states(harness, process, count=20):
    """Send states until the controller answers, then `count` more one by one; the
    answers."""
    probe = harness.add(Probe(harness.context))
    harness.spin_until(lambda: probe.count_subscribers('/joint_states') > 0
                       and probe.count_publishers('/effort_controller/commands') > 0
                       or process.poll() is not None, 'the controller', wall_limit=60.0)
    assert process.poll() is None, finish(process)
    for _ in range(1000):                          # until both sides have matched
        probe.send_state()
        harness.spin_for(2)
        if probe.commands:
            break
    for k in range(len(probe.commands) + 1, len(probe.commands) + count + 1):
        probe.send_state()
        harness.spin_until(lambda: len(probe.commands) >= k, f'the answer to state {k}')
    return probe.commands


def fifo_allowed():
    """Whether this process may use SCHED_FIFO (checked in a child)."""
    code = ('import os\nos.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))')
    return subprocess.run([sys.executable, '-c', code], capture_output=True).returncode == 0


@pytest.fixture
def dds():
    harness = RosHarness()
    yield harness
    harness.close()


def start_with_every_option(executable, priority, cpu):
    """The executable under SCHED_FIFO `priority` on `cpu` with its memory locked; the
    test is skipped where SCHED_FIFO is not allowed."""
    if not fifo_allowed():
        pytest.skip('SCHED_FIFO is not allowed here (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)')
    return start_executable(['-p', f'realtime.priority:={priority}',
                             '-p', f'realtime.cpu_affinity:=[{cpu}]',
                             '-p', 'realtime.lock_memory:=true'], executable=executable)


def test_the_options_are_applied_to_every_thread_of_the_controller(dds):
    cpu = min(os.sched_getaffinity(0))
    process = start_with_every_option('controller', 11, cpu)
    try:
        commands = answers_states(dds, process)
        assert np.all(np.isfinite(commands[-1].data))
        wait_until_applied(dds, process.pid, 11, cpu)
    finally:
        out = finish(process)
    assert all(text in out for text in ('real-time: memory locked', f'CPUs [{cpu}]',
                                        'SCHED_FIFO priority 11')), out
    assert REFUSED not in out


def assert_applied(pid, priority, cpu):
    """Every thread of process `pid` under SCHED_FIFO `priority` on `cpu` alone, and some
    memory locked: seen from outside."""
    threads = [int(tid) for tid in os.listdir(f'/proc/{pid}/task')]
    assert len(threads) > 1                        # the loop and the middleware's threads
    for tid in threads:
        assert os.sched_getscheduler(tid) == os.SCHED_FIFO
        assert os.sched_getparam(tid).sched_priority == priority
        assert os.sched_getaffinity(tid) == {cpu}
    with open(f'/proc/{pid}/status', encoding='utf-8') as stream:
        locked = [line for line in stream if line.startswith('VmLck:')]
    assert int(locked[0].split()[1]) > 0


def wait_until_applied(harness, pid, priority, cpu):
    """Spin until the options are in place (the node applies them thread by thread while
    it may already be publishing), then assert them."""
    def applied():
        try:
            assert_applied(pid, priority, cpu)
        except AssertionError:
            return False
        return True
    harness.spin_until(applied, 'the real-time options applied')
    assert_applied(pid, priority, cpu)


def test_the_options_are_applied_to_every_thread_of_the_plant(dds):
    cpu = max(os.sched_getaffinity(0))
    process = start_with_every_option('plant', 12, cpu)
    try:
        listener = dds.add(Node('realtime_listener', context=dds.context))
        states = []
        listener.create_subscription(JointState, '/joint_states', states.append, RELIABLE)
        # the plant publishes its initial state every tick until a command comes
        dds.spin_until(lambda: len(states) >= 10 or process.poll() is not None,
                       'states from the plant')
        assert process.poll() is None, finish(process)
        wait_until_applied(dds, process.pid, 12, cpu)
        count = len(states)
        dds.spin_until(lambda: len(states) > count + 10, 'more states')   # it runs on
    finally:
        out = finish(process)
    assert 'SCHED_FIFO priority 12' in out and REFUSED not in out, out


def effective_capabilities(pid):
    with open(f'/proc/{pid}/status', encoding='utf-8') as stream:
        line = next(line for line in stream if line.startswith('CapEff:'))
    return int(line.split()[1], 16)


def test_refused_options_give_one_warning_and_the_controller_still_controls(dds):
    process = start_executable(
        ['-p', 'realtime.priority:=50', '-p', 'realtime.lock_memory:=true'],
        launcher=(sys.executable, '-c', UNPRIVILEGED))
    try:
        commands = answers_states(dds, process)       # the controller itself runs now
        if effective_capabilities(process.pid) & (1 << CAP_SYS_NICE | 1 << CAP_IPC_LOCK):
            pytest.skip('root without CAP_SETPCAP here: the capabilities cannot be dropped')
        hold = np.array(commands[-1].data)
        assert np.all(np.isfinite(hold)) and np.any(hold != 0.0)     # gravity held
        assert os.sched_getscheduler(process.pid) == os.SCHED_OTHER
    finally:
        out = finish(process)
    warnings = [line for line in out.splitlines() if REFUSED in line]
    assert len(warnings) == 1, out
    for expected in ('realtime.priority', 'SCHED_FIFO priority 50 refused', 'ulimit -r',
                     'limits.conf', 'realtime.lock_memory', 'ulimit -l'):
        assert expected in warnings[0], expected
    assert 'WARN' in warnings[0]
    assert process.returncode == 0, out


def test_the_managed_controller_applies_the_options_once_configured(dds):
    lifecycle = pytest.importorskip('test_lifecycle')   # its operator and transitions
    cpu = min(os.sched_getaffinity(0))
    process = start_with_every_option('managed_controller', 13, cpu)
    try:
        operator = dds.add(lifecycle.Operator(dds.context))
        dds.spin_until(lambda: operator.change_state.service_is_ready()
                       and operator.get_state.service_is_ready()
                       and operator.set_parameters.service_is_ready()
                       or process.poll() is not None, 'the lifecycle services')
        assert process.poll() is None, finish(process)
        lifecycle.reachable(dds, operator)
        assert os.sched_getscheduler(process.pid) == os.SCHED_OTHER    # unconfigured
        assert lifecycle.transition(dds, operator, 'configure')
        wait_until_applied(dds, process.pid, 13, cpu)
        # cleanup: unconfigured again, so normal priority on the CPUs it had, memory unlocked
        assert lifecycle.transition(dds, operator, 'cleanup')
        wait_until_released(dds, process.pid, os.sched_getaffinity(0))
        assert lifecycle.transition(dds, operator, 'configure')     # and raised again
        wait_until_applied(dds, process.pid, 13, cpu)
    finally:
        out = finish(process)
    assert out.count('SCHED_FIFO priority 13') == 2 and REFUSED not in out, out
    assert out.count('real-time options released: normal scheduling') == 1, out


def released_threads(pid, cpus):
    """Whether every thread of process `pid` runs under SCHED_OTHER on `cpus`, with no
    memory locked: seen from outside."""
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            if (os.sched_getscheduler(int(tid)) != os.SCHED_OTHER
                    or os.sched_getaffinity(int(tid)) != cpus):
                return False
        except ProcessLookupError:
            continue
    with open(f'/proc/{pid}/status', encoding='utf-8') as stream:
        locked = [line for line in stream if line.startswith('VmLck:')]
    return int(locked[0].split()[1]) == 0


def wait_until_released(harness, pid, cpus):
    harness.spin_until(lambda: released_threads(pid, cpus), 'the real-time options released')


def test_the_managed_controller_refused_the_options_cleans_up_without_a_word_more(dds):
    """Refused at configure (one warning): cleanup has nothing to put back, says nothing
    about it, and the node stays at normal priority through configure, cleanup and
    configure again."""
    lifecycle = pytest.importorskip('test_lifecycle')
    process = start_executable(
        ['-p', 'realtime.priority:=50', '-p', 'realtime.lock_memory:=true'],
        launcher=(sys.executable, '-c', UNPRIVILEGED), executable='managed_controller')
    try:
        operator = dds.add(lifecycle.Operator(dds.context))
        dds.spin_until(lambda: operator.change_state.service_is_ready()
                       and operator.get_state.service_is_ready()
                       and operator.set_parameters.service_is_ready()
                       or process.poll() is not None, 'the lifecycle services')
        assert process.poll() is None, finish(process)
        if effective_capabilities(process.pid) & (1 << CAP_SYS_NICE | 1 << CAP_IPC_LOCK):
            pytest.skip('root without CAP_SETPCAP here: the capabilities cannot be dropped')
        lifecycle.reachable(dds, operator)
        cpus = os.sched_getaffinity(process.pid)
        for label in ('configure', 'cleanup', 'configure'):
            assert lifecycle.transition(dds, operator, label)
            assert released_threads(process.pid, cpus)
    finally:
        out = finish(process)
    assert len([line for line in out.splitlines() if REFUSED in line]) == 2, out
    assert 'released' not in out and 'Traceback' not in out, out
    assert process.returncode == 0, out
