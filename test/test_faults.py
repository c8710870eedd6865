"""Faults and load over real DDS (doc/safety.md): restarting the controller while the plant runs
(it re-synchronises and holds where the arm is), restarting the plant while the controller
runs (it holds and resumes when states return, at the new plant's position), and bursts of
/joint_states at ten times the nominal rate (bounded queue: the answers are current again
right after the burst)."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy
from sensor_msgs.msg import JointState

from robot_dynamics.nodes import sim
from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from ros_testing import PUMA, REPO, RosHarness, SIM

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
CONTROLLER = '/computed_torque_controller'
JOINTS = [f'joint_{i}' for i in range(1, 7)]
START = np.radians(sim.LEE_START_DEG)
OTHER_START = START + np.array([0.3, -0.2, 0.25, 0.1, -0.1, 0.2])


class Observer(Node):
    """Records the controller's ~/reference and ~/feedback pairs (same cycle, same stamp)."""

    def __init__(self, context):
        super().__init__('observer', context=context)
        self.references = {}
        self.feedback = {}
        self.create_subscription(JointState, f'{CONTROLLER}/reference',
                                 lambda m: self._record(self.references, m), 1000)
        self.create_subscription(JointState, f'{CONTROLLER}/feedback',
                                 lambda m: self._record(self.feedback, m), 1000)

    @staticmethod
    def _record(table, msg):
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        table.setdefault(stamp, []).append(np.array(msg.position))

    def cycles(self):
        """[(reference q_d, measured q)] in arrival order of the references."""
        return [(r, self.feedback[s][k]) for s, rs in self.references.items()
                for k, r in enumerate(rs) if k < len(self.feedback.get(s, ()))]

    def clear(self):
        self.references.clear()
        self.feedback.clear()


def new_controller(harness):
    return harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))


def remove(harness, node):
    harness.executor.remove_node(node)
    harness.nodes.remove(node)
    node.destroy_node()


@pytest.fixture
def loop(request):
    extra = getattr(request, 'param', ())
    harness = RosHarness(PUMA, SIM, ros_args=['-p', 'real_time_factor:=0.0',
                                              '-p', 'integration_step:=0.005',
                                              '-p', 'lockstep_timeout:=0.02', *extra])
    plant = harness.add(PlantSimulator(context=harness.context))
    controller = new_controller(harness)
    observer = harness.add(Observer(harness.context))
    harness.spin_until(lambda: controller._ready and len(observer.cycles()) > 20,
                       'the loop holding')
    yield harness, plant, controller, observer
    harness.close()


# the arm must move while no controller runs: a plant without brakes (with them it would
# stay exactly where the old controller held it)
@pytest.mark.parametrize('loop', [('-p', 'brakes:=false')], indirect=True)
def test_restarted_controller_resynchronises_and_holds_where_the_arm_is(loop):
    harness, plant, controller, observer = loop
    remove(harness, controller)
    fallen_from = plant.sim_time
    harness.spin_until(lambda: plant.sim_time > fallen_from + 0.3,
                       'the plant running without a controller')
    assert np.max(np.abs(plant.q - START)) > 0.01        # the arm fell (zero effort)
    assert np.max(np.abs(plant.qd)) > 0.01
    observer.clear()
    controller = new_controller(harness)
    harness.spin_until(lambda: len(observer.cycles()) > 300, 'the new controller holding')
    cycles = observer.cycles()
    first_reference, first_measured = cycles[0]
    np.testing.assert_allclose(first_reference, first_measured, atol=1e-12)  # no jump
    assert np.max(np.abs(first_reference - START)) > 0.01    # not the old reference
    settled_reference, settled_measured = cycles[-1]
    np.testing.assert_allclose(settled_reference, first_reference, atol=1e-12)
    assert np.max(np.abs(settled_measured - settled_reference)) < 0.05   # it holds
    assert np.max(np.abs(plant.qd)) < 0.01                               # at rest
    assert not plant.stopped


def test_restarted_plant_the_controller_holds_then_resumes_at_the_new_state(loop):
    harness, plant, controller, observer = loop
    harness.spin_until(lambda: plant.sim_time > 1.5, 'simulated time past 1.5 s')
    remove(harness, plant)
    for _ in range(2):                   # the answer to the last state in flight, then none
        observer.clear()
        end = time.monotonic() + 0.2
        harness.spin_until(lambda: time.monotonic() > end, 'the plant gone')
    assert observer.cycles() == []                       # on_state: nothing without states
    plant = harness.add(PlantSimulator(
        context=harness.context,
        parameter_overrides=[Parameter('initial_positions', value=OTHER_START.tolist())]))
    harness.spin_until(lambda: plant.sim_time > 1.0 and len(observer.cycles()) > 50,
                       'the loop running again')
    cycles = observer.cycles()
    references = np.array([r for r, _ in cycles])
    np.testing.assert_allclose(references, np.tile(OTHER_START, (len(cycles), 1)),
                               atol=1e-12)               # holds the new plant's position
    assert np.max(np.abs(cycles[-1][1] - OTHER_START)) < 0.01
    assert controller.unexpected_errors == 0
    assert not plant.stopped


# The burst comes from another process (its own GIL): 2000 states at 1 kHz = 10x the nominal
# 100 Hz, or as fast as it can publish; markers 1_000_001... in joint_6 like Burst.send.
BURST = """
import sys, time
import rclpy
from sensor_msgs.msg import JointState
start = [float(v) for v in sys.argv[1:7]]
period = float(sys.argv[7])
rclpy.init()
node = rclpy.create_node('burst_source')
publisher = node.create_publisher(JointState, 'joint_states', 10)
while publisher.get_subscription_count() == 0:
    time.sleep(0.01)
begin = time.monotonic()
for k in range(2000):
    q = list(start)
    q[5] += (1_000_001 + k) * 1e-7
    msg = JointState(name=[f'joint_{i}' for i in range(1, 7)], position=q, velocity=[0.0] * 6)
    msg.header.stamp = node.get_clock().now().to_msg()
    publisher.publish(msg)
    time.sleep(max(0.0, begin + period * (k + 1) - time.monotonic()))
print(f'{time.monotonic() - begin:.3f}')
node.destroy_node()
rclpy.shutdown()
"""


class Burst(Node):
    """A robot publishing /joint_states at the nominal rate, one state per send()."""

    def __init__(self, context):
        super().__init__('burst_robot', context=context)
        self.publisher = self.create_publisher(JointState, 'joint_states', 10)
        self.marker = 0

    def send(self):
        self.marker += 1
        q = START.copy()
        q[5] += self.marker * 1e-7                 # tells the answers apart
        msg = JointState(name=JOINTS, position=q.tolist(), velocity=[0.0] * 6)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.publisher.publish(msg)
        return self.marker


def marker(q):
    return int(round((q[5] - START[5]) / 1e-7))


def _controller_executable():
    """The shipped `controller` executable in on_state mode on the wall clock (its own
    wait-set loop, doc/performance.md), in another process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    return subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.controller', '--ros-args',
         '--params-file', PUMA, '-p', 'control_mode:=on_state', '-p', 'state_timeout:=1.0',
         '-p', 'use_sim_time:=false'],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.parametrize('runner', ['executor', 'executable'])
@pytest.mark.parametrize('period', [0.001, 0.0], ids=['10x', 'flat_out'])
def test_joint_state_burst_at_ten_times_the_rate_leaves_no_backlog(period, runner):
    """runner: the controller node spun by the rclpy executor in this process, or the
    `controller` executable (its own loop, which takes every queued state per wake-up)."""
    process = None
    if runner == 'executor':
        harness = RosHarness(PUMA, ros_args=['-p', 'control_mode:=on_state',
                                             '-p', 'state_timeout:=1.0'])
    else:
        harness = RosHarness()
    try:
        if runner == 'executor':
            controller = harness.add(ComputedTorqueController(context=harness.context))
        else:
            process = _controller_executable()
        robot = harness.add(Burst(harness.context))
        answered = []
        robot.create_subscription(JointState, f'{CONTROLLER}/feedback',
                                  lambda m: answered.append(marker(m.position)), 10000)
        harness.spin_until(lambda: robot.publisher.get_subscription_count() > 0
                           and robot.count_publishers(f'{CONTROLLER}/feedback') > 0,
                           'discovery')
        if runner == 'executor':
            state_qos = [s.qos_profile for s in controller.subscriptions
                         if s.topic_name == '/joint_states']
            assert state_qos[0].history == HistoryPolicy.KEEP_LAST
            assert state_qos[0].depth <= 10
        first = robot.send()              # best effort: resent until the reader has
        deadline = time.monotonic() + 60.0   # matched this writer too (earlier ones are lost)
        while not answered:
            assert time.monotonic() < deadline, 'gave up waiting for the first answer'
            if process is not None and process.poll() is not None:
                pytest.fail(f'the controller exited: {process.communicate()[0]}')
            harness.spin_for(10)
            if not answered:
                robot.send()
        assert min(answered) >= first
        burst = subprocess.Popen([sys.executable, '-c', BURST, *map(str, START), str(period)],
                                 stdout=subprocess.PIPE, text=True)
        harness.spin_until(lambda: burst.poll() is not None, 'the burst')
        burst_seconds = float(burst.communicate()[0].strip() or 'nan')
        assert burst.returncode == 0
        during = sum(1 for m in answered if m > 1_000_000)
        backlog = []
        latencies = []
        for _ in range(20):                                   # back to the nominal rate
            count = len(answered)
            sent_at = time.monotonic()
            mark = robot.send()
            harness.spin_until(lambda: mark in answered, 'the answer to a nominal state')
            latencies.append(time.monotonic() - sent_at)
            backlog.append(answered.index(mark, count) - count)   # older answers first
        print(f'{runner}, burst ({period * 1e3:g} ms period): 2000 states in '
              f'{burst_seconds:.2f} s, {during} answered; backlog after it {backlog}; '
              f'latency after it {1e3 * np.median(latencies):.2f} ms median')
        assert backlog[0] <= 30                      # bounded by the reader's depth
        assert backlog[-10:] == [0] * 10             # and gone: current answers again
        if runner == 'executor':
            assert controller.unexpected_errors == 0
        else:
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=20)
            assert process.returncode == 0, output
            assert 'Traceback' not in output and 'unexpected' not in output, output
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.communicate()
        harness.close()
