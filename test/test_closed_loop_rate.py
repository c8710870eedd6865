"""The 1 kHz loop's behaviours (README "Performance"): decimated controller diagnostics, the
command published before them, the controller's known-names fast path, and the plant's
free-running catch-up with its late/dropped tick counts. Callbacks are called directly (no
DDS traffic, no timing); the plant's steady clock is replaced by a fake one."""

import math

import numpy as np
import pytest

from ros_testing import PUMA, RosHarness, SIM   # noqa: I100 - sets ROS_DOMAIN_ID first
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from robot_dynamics.nodes import plant as plant_module
from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.plant import MAX_CATCH_UP, PlantSimulator

JOINTS = [f'joint_{i}' for i in range(1, 7)]


@pytest.fixture
def harness():
    harness = RosHarness(PUMA, SIM)
    yield harness
    harness.close()


class Recorder:
    """Stands in for a publisher; appends (topic, message data) to a shared log."""

    def __init__(self, log, topic):
        self.log, self.topic = log, topic

    def publish(self, msg):
        self.log.append((self.topic, msg))


def controller_with_recorders(harness, rate):
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[
            Parameter('state_publish_rate', value=rate), Parameter('state_timeout', value=0.0)]))
    log = []
    controller._command_pub = Recorder(log, 'command')
    for name in ('reference', 'feedback', 'error', 'output'):
        setattr(controller, f'_{name}_pub', Recorder(log, name))
    return controller, log


def stream_states(controller, count, period_ns=1_000_000, names=JOINTS, positions=None):
    """`count` on_state messages stamped period_ns apart, starting at the node clock."""
    start = controller.get_clock().now().nanoseconds
    positions = [0.1 * i for i in range(len(names))] if positions is None else positions
    for k in range(count):
        msg = JointState(name=list(names), position=list(positions),
                         velocity=[0.0] * len(names))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(start + k * period_ns,
                                                                1_000_000_000)
        controller._on_joint_states(msg)


def test_diagnostics_are_decimated_to_state_publish_rate_while_every_state_gets_a_command(
        harness):
    controller, log = controller_with_recorders(harness, 100.0)
    stream_states(controller, 50)                   # 50 ms of states at 1 kHz
    topics = [topic for topic, _ in log]
    assert topics.count('command') == 50
    for name in ('reference', 'feedback', 'error', 'output'):
        assert topics.count(name) == 5              # 100 Hz of 50 ms: t = 0, 10, ... 40 ms


def test_state_publish_rate_zero_publishes_diagnostics_every_cycle(harness):
    controller, log = controller_with_recorders(harness, 0.0)
    stream_states(controller, 20)
    topics = [topic for topic, _ in log]
    assert topics.count('command') == 20 and topics.count('reference') == 20


def test_the_effort_command_goes_out_before_the_cycles_diagnostics(harness):
    controller, log = controller_with_recorders(harness, 0.0)
    stream_states(controller, 5)
    topics = [topic for topic, _ in log]
    for k, topic in enumerate(topics):
        if topic == 'reference':
            assert topics[k - 1] == 'command'
    output = [msg for topic, msg in log if topic == 'output'][-1]
    command = [msg for topic, msg in log if topic == 'command'][-1]
    assert list(output.effort) == list(command.data)    # same cycle's effort


def test_known_names_fast_path_maps_reordered_and_extra_joints_like_the_full_path(harness):
    controller, _ = controller_with_recorders(harness, 100.0)
    rng = np.random.default_rng(3)
    names = list(reversed(JOINTS)) + ['gripper']
    msg = JointState(name=names, position=rng.uniform(-1, 1, 7).tolist(),
                     velocity=rng.uniform(-1, 1, 7).tolist())
    for _ in range(2):                               # second call: cached mapping
        fast = controller._known_names_updates(msg)
        targets, positions, velocities = fast
        full = {i: (p, v) for i, p, v in controller._joint_updates(msg)}
        assert sorted(targets.tolist()) == sorted(full)
        for i, p, v in zip(targets, positions, velocities):
            assert (p, v) == full[int(i)]


@pytest.mark.parametrize('bad', [math.nan, math.inf, 2.0e6])
def test_a_bad_value_leaves_the_fast_path_and_the_message_is_dropped(harness, bad):
    controller, log = controller_with_recorders(harness, 100.0)
    stream_states(controller, 3)
    before = controller._q.copy()
    commands = sum(topic == 'command' for topic, _ in log)
    positions = [0.1 * i for i in range(6)]
    positions[4] = bad
    msg = JointState(name=JOINTS, position=positions, velocity=[0.0] * 6)
    assert controller._known_names_updates(msg) is None
    stream_states(controller, 1, positions=positions)
    assert np.array_equal(controller._q, before)
    assert sum(topic == 'command' for topic, _ in log) == commands


def test_duplicate_names_are_never_taken_by_the_fast_path(harness):
    controller, _ = controller_with_recorders(harness, 100.0)
    msg = JointState(name=JOINTS + ['joint_1'], position=[0.0] * 7, velocity=[0.0] * 7)
    assert controller._known_names_updates(msg) is None
    assert controller._joint_updates(msg) is None


class FakeClock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def free_plant(harness, monkeypatch):
    clock = FakeClock(100.0)
    monkeypatch.setattr(plant_module.time, 'monotonic', clock)
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('publish_clock', value=False), Parameter('publish_rate', value=1000.0)]))
    return plant, clock


def test_free_running_plant_on_time_ticks_advance_one_step_each_and_none_is_late(free_plant):
    plant, clock = free_plant
    for k in range(20):
        clock.now = 100.0 + k * 1e-3 + 2e-4           # 0.2 ms of timer jitter
        plant._on_timer()
    assert plant.ticks == 20 and plant.late_ticks == 0 and plant.dropped_ticks == 0
    assert plant.sim_time == pytest.approx(20 * plant.dt)


def test_free_running_plant_catches_up_ticks_and_counts_those_more_than_a_period_late(
        free_plant):
    plant, clock = free_plant
    clock.now = 100.0
    plant._on_timer()                                # tick 0, due at 100.000
    clock.now = 100.0045
    plant._on_timer()                                # ticks 1..4 due at 1..4 ms
    assert plant.ticks == 5
    assert plant.late_ticks == 3                     # 3.5, 2.5, 1.5 ms late; tick 4: 0.5
    assert plant.sim_time == pytest.approx(5 * plant.dt)
    stats = plant.loop_statistics()
    assert stats['real_time_factor'] == pytest.approx(0.005 / 0.0045)


def test_free_running_plant_drops_ticks_beyond_the_catch_up_limit_and_loses_that_time(
        free_plant):
    plant, clock = free_plant
    clock.now = 100.0
    plant._on_timer()
    clock.now = 100.1                                # a 100 ms stall: 100 ticks due
    plant._on_timer()
    assert plant.ticks == 1 + MAX_CATCH_UP
    assert plant.dropped_ticks == 100 - MAX_CATCH_UP
    assert plant.loop_statistics()['real_time_factor'] < 0.2
    clock.now = 100.101                              # back on the new schedule
    plant._on_timer()
    assert plant.ticks == 2 + MAX_CATCH_UP and plant.dropped_ticks == 100 - MAX_CATCH_UP


def test_free_running_plant_counts_states_left_unanswered_and_statistics_start_with_the_loop(
        free_plant):
    plant, clock = free_plant
    for k in range(3):
        clock.now = 100.0 + k * 1e-3
        plant._on_timer()
    assert plant.loop_statistics()['closed_loop'] is False
    command = type('Command', (), {'data': [0.0] * 6})()
    plant._on_command(command)                       # answers the state of tick 2
    stats = plant.loop_statistics()
    assert stats['closed_loop'] is True and stats['ticks'] == 0
    clock.now = 100.003
    plant._on_timer()                                # answered: not counted
    clock.now = 100.004
    plant._on_timer()                                # tick 3's state had no answer
    assert plant.loop_statistics()['unanswered_states'] == 1
    assert plant.loop_statistics()['ticks'] == 2
