"""The 1 kHz loop's behaviours (doc/performance.md): decimated controller diagnostics, the
command published before them, the controller's known-names fast path, and the plant's
free-running mode: ticks due on the timer's grid, catch-up with its late/dropped tick counts,
holding the initial state until the first command, and the executable's own loop. Callbacks
are called directly (no timing); the plant's steady clock and timer are replaced by fakes."""

import math
import threading
import time

import numpy as np
import pytest

from ros_testing import PUMA, RosHarness, SIM   # noqa: I100 - sets ROS_DOMAIN_ID first
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

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
            Parameter('state_publish_rate', value=rate), Parameter('state_timeout', value=0.0),
            # no DDS here: nobody to ask for the joint order (test_effort_bridge.py does)
            Parameter('check_command_controller', value=False)]))
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


class FakeTimer:
    """The plant's wall timer: rcl schedules its next call when it takes the current one."""

    def __init__(self, clock, next_call):
        self.clock, self.next_call = clock, next_call
        self.cancelled = False

    def time_until_next_call(self):
        return round((self.next_call - self.clock.now) * 1e9)     # ns, as rclpy

    def cancel(self):
        self.cancelled = True


HOLD = Float64MultiArray(data=[0.0] * 6)     # any valid command closes the loop


@pytest.fixture
def free_plant(harness, monkeypatch):
    clock = FakeClock(100.0)
    monkeypatch.setattr(plant_module.time, 'monotonic', clock)
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('publish_clock', value=False), Parameter('publish_rate', value=1000.0),
        Parameter('command_timeout', value=0.0)]))     # one command, held: load-proof
    plant._timer.cancel()
    plant._timer = FakeTimer(clock, 100.001)    # the call due at 100.000 s was taken
    return plant, clock


def test_free_running_plant_on_time_ticks_advance_one_step_each_and_none_is_late(free_plant):
    plant, clock = free_plant
    plant._on_command(HOLD)
    for k in range(20):
        clock.now = 100.0 + k * 1e-3 + 2e-4           # 0.2 ms of timer jitter
        plant._on_timer()
    assert plant.ticks == 20 and plant.late_ticks == 0 and plant.dropped_ticks == 0
    assert plant.sim_time == pytest.approx(20 * plant.dt)


def test_free_running_ticks_are_due_when_the_timer_is_not_when_its_first_call_ran(
        free_plant):
    """The first call runs 0.6 ms late; later calls run 0.05-0.5 ms late. Each is on time for
    its own tick (due on the timer's grid) and integrates it at once; anchored at the first
    call's time, the less-late calls would each have deferred their tick by a whole period."""
    plant, clock = free_plant
    plant._on_command(HOLD)
    jitter = [6e-4, 5e-5, 3e-4, 1e-4, 5e-4, 2e-4, 5e-5, 4e-4]
    for k, late in enumerate(jitter):
        clock.now = 100.0 + k * 1e-3 + late
        plant._on_timer()
        assert plant.ticks == k + 1
    assert plant.late_ticks == 0 and plant._wall_start == pytest.approx(100.0)


def test_a_first_call_more_than_a_period_late_still_puts_the_ticks_on_the_timer_grid(
        free_plant):
    """rcl took the call due at 100.000 s (scheduling the next at 100.001 s), but the callback
    ran 2.5 ms later: tick 0 is due at the last grid point before it, 100.002 s."""
    plant, clock = free_plant
    clock.now = 100.0025
    plant._on_timer()
    assert plant._wall_start == pytest.approx(100.002)


def test_free_running_plant_holds_the_initial_state_until_the_first_command(free_plant):
    plant, clock = free_plant
    published = []
    plant._state_pub = Recorder(published, 'joint_states')
    q0 = plant.q.copy()
    for k in range(5):
        clock.now = 100.0 + k * 1e-3
        plant._on_timer()
    assert plant.ticks == 5 and len(published) == 5 and plant.sim_time == 0.0
    for _, msg in published:                       # the arm does not fall before the loop
        assert list(msg.position) == q0.tolist() and not any(msg.velocity)
    plant._on_command(HOLD)                        # zero effort: now it falls
    clock.now = 100.005
    plant._on_timer()
    assert plant.sim_time == pytest.approx(plant.dt)
    assert not np.array_equal(plant.q, q0) or np.any(plant.qd != 0.0)


def test_a_malformed_command_does_not_end_the_hold(free_plant):
    plant, clock = free_plant
    plant._on_command(Float64MultiArray(data=[0.0] * 5))
    plant._on_command(Float64MultiArray(data=[0.0] * 5 + [math.nan]))
    plant._on_timer()
    assert plant.sim_time == 0.0


def test_free_running_plant_catches_up_ticks_and_counts_those_more_than_a_period_late(
        free_plant):
    plant, clock = free_plant
    plant._on_command(HOLD)
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
    plant._on_command(HOLD)
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


def test_the_plant_executables_loop_takes_commands_itself_and_ticks_on_its_own_schedule(
        harness):
    """spin_free_running (the `plant` executable's loop): the command published before it
    starts is taken from the subscription without the executor; the loop integrates after
    it, and stops when the plant stops."""
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('publish_clock', value=False), Parameter('publish_rate', value=1000.0),
        Parameter('command_timeout', value=0.0)]))     # one command, held: load-proof
    node = harness.add(Node('commander', context=harness.context))
    publisher = node.create_publisher(Float64MultiArray, plant.command_topic, 10)
    harness.spin_until(lambda: publisher.get_subscription_count() > 0, 'the plant to subscribe')
    publisher.publish(Float64MultiArray(data=[1.0, 2.0, 3.0, 0.5, 0.25, 0.125]))
    done = threading.Event()

    def stop_after_some_ticks():       # not a wall-time window: a loaded machine may stall
        deadline = time.monotonic() + 30.0
        while plant.ticks < 20 and time.monotonic() < deadline and not done.wait(0.01):
            pass
        plant.stopped = True
    stopper = threading.Thread(target=stop_after_some_ticks)
    stopper.start()
    try:
        plant.spin_free_running(harness.executor)
    finally:
        done.set()
        stopper.join()
    assert plant._timer.is_canceled()
    assert plant._tau_command.tolist() == [1.0, 2.0, 3.0, 0.5, 0.25, 0.125]
    assert plant.ticks > 0 and plant.sim_time > 0.0
    assert plant.loop_statistics()['closed_loop'] is True
