"""The plant's `command_message: joint_state` path: sensor_msgs/JointState efforts mapped by
name (any order), bad commands refused whole with the field and the joints named, the last
good command kept (then command_timeout as on the Float64MultiArray path); and the default
path unchanged. The reader is checked without ROS, the node over DDS (the test plays the
hardware plugin that sends JointState commands)."""

import math

import time

import numpy as np
import pytest

from robot_dynamics.nodes.common.effort_command import (
    COMMAND_MESSAGES, EffortCommand, FLOAT64_MULTI_ARRAY, JOINT_STATE, Refused)

JOINTS = ['joint_1', 'joint_2', 'joint_3', 'joint_4', 'joint_5', 'joint_6']


class Msg:
    """Stands for a message: only the fields the reader uses."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def state(names, efforts):
    return Msg(name=list(names), effort=list(efforts), position=[], velocity=[])


def test_the_two_message_kinds():
    assert COMMAND_MESSAGES == (FLOAT64_MULTI_ARRAY, JOINT_STATE)


@pytest.mark.parametrize('seed', range(5))
def test_efforts_are_mapped_by_name_in_any_order(seed):
    rng = np.random.default_rng(seed)
    reader = EffortCommand(JOINTS, JOINT_STATE)
    wanted = rng.normal(size=6)
    order = rng.permutation(6)
    for _ in range(2):         # the second time through the cached order
        tau = reader.read(state([JOINTS[i] for i in order], wanted[order]))
        np.testing.assert_array_equal(tau, wanted)
    other = rng.permutation(6)  # a new order after the cached one
    np.testing.assert_array_equal(
        reader.read(state([JOINTS[i] for i in other], wanted[other])), wanted)


@pytest.mark.parametrize('names, efforts, named', [
    (JOINTS[:5], [1.0] * 5, ['name lacks joint_6', '5 of 6 named']),            # subset
    (JOINTS + ['gripper'], [1.0] * 7, ['joints this plant does not have: gripper']),
    (JOINTS[:5] + ['joint_2'], [1.0] * 6, ['name lists joint_2 more than once']),
    (JOINTS, [1.0] * 5, ['effort has 5 values for 6 names', 'joint_1']),        # length
    (JOINTS, [1.0] * 7, ['effort has 7 values for 6 names']),
    (JOINTS, [], ['effort is empty for 6 names']),                               # missing
    (JOINTS, [1.0, math.nan, 1.0, math.inf, 1.0, 1.0],
     ['effort is not finite for joint_2, joint_4']),
])
def test_bad_commands_are_refused_naming_the_field_and_the_joints(names, efforts, named):
    reader = EffortCommand(JOINTS, JOINT_STATE)
    with pytest.raises(Refused) as refused:
        reader.read(state(names, efforts))
    for part in named:
        assert part in str(refused.value)
    assert refused.value.level == 'warning'


@pytest.mark.parametrize('stamp_effort', [0.0, math.nan])
def test_the_stamp_joint_may_be_named_and_its_effort_is_dropped(stamp_effort):
    """topic_based_ros2_control sends a command for every joint of its block, also the
    plant's stamp_joint (whose effort nobody writes: NaN or 0); the arm's efforts are read
    as ever, an all-NaN arm is still "no command", and an ignored name is not a joint."""
    reader = EffortCommand(JOINTS, JOINT_STATE, ignored=['stamp'])
    wanted = np.arange(1.0, 7.0)
    names = ['joint_3', 'stamp'] + [j for j in JOINTS if j != 'joint_3']
    efforts = [3.0, stamp_effort] + [v for j, v in zip(JOINTS, wanted) if j != 'joint_3']
    for _ in range(2):                       # the second time through the cached order
        np.testing.assert_array_equal(reader.read(state(names, efforts)), wanted)
    np.testing.assert_array_equal(reader.read(state(JOINTS, wanted)), wanted)  # not needed
    with pytest.raises(Refused) as refused:
        reader.read(state(names, [math.nan] * 7))
    assert refused.value.level == 'info'
    with pytest.raises(Refused, match='effort is not finite for joint_2'):
        reader.read(state(names, [3.0, 0.0, 1.0, math.nan, 4.0, 5.0, 6.0]))
    with pytest.raises(Refused, match='name lacks joint_6'):
        reader.read(state(JOINTS[:5] + ['stamp'], [1.0] * 6))
    with pytest.raises(Refused, match='does not have: stamp'):     # not ignored here
        EffortCommand(JOINTS, JOINT_STATE).read(state(names, efforts))


def test_every_effort_nan_is_no_command_said_at_info_level():
    """ros2_control's "nobody has commanded yet": a command interface holding NaN."""
    with pytest.raises(Refused) as refused:
        EffortCommand(JOINTS, JOINT_STATE).read(state(JOINTS, [math.nan] * 6))
    assert refused.value.level == 'info' and 'no command yet' in str(refused.value)


def test_a_refused_order_is_not_cached_as_good():
    reader = EffortCommand(JOINTS, JOINT_STATE)
    with pytest.raises(Refused):
        reader.read(state(JOINTS[:5], [1.0] * 5))
    with pytest.raises(Refused):               # the same list again: still refused
        reader.read(state(JOINTS[:5], [1.0] * 5))


def test_the_float64_multi_array_path_is_unchanged():
    reader = EffortCommand(JOINTS)
    np.testing.assert_array_equal(reader.read(Msg(data=[1.0, 2, 3, 4, 5, 6])),
                                  [1, 2, 3, 4, 5, 6])
    with pytest.raises(Refused, match=r'data has 5 values for 6 joints'):
        reader.read(Msg(data=[1.0] * 5))
    with pytest.raises(Refused, match=r'data\[2\] \(joint joint_3\) is not finite'):
        reader.read(Msg(data=[1.0, 1.0, math.nan, 1.0, 1.0, 1.0]))


def test_an_unknown_command_message_is_refused_naming_the_parameter():
    from robot_dynamics.nodes.common.ros_params import ConfigurationError
    with pytest.raises(ConfigurationError, match='command_message'):
        EffortCommand(JOINTS, 'joint_states')


# ------------------------------------------------------------------ the node, over DDS

def _dds():
    pytest.importorskip('rclpy')
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from robot_dynamics import dynamics
    from robot_dynamics.model import RobotModel
    from robot_dynamics.nodes.plant import PlantSimulator
    from ros_testing import PUMA, RosHarness, WIDE_LIMITS
    return Node, JointState, dynamics, RobotModel, PlantSimulator, PUMA, RosHarness, \
        WIDE_LIMITS


Q0 = [1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0]
PERIOD_NS = 10_000_000


def start(*overrides):
    Node, JointState, _, _, PlantSimulator, PUMA, RosHarness, WIDE = _dds()

    class Hardware(Node):
        """Plays a hardware plugin that sends JointState commands."""

        def __init__(self, context):
            super().__init__('fake_hardware', context=context)
            self.states = []
            self.create_subscription(JointState, 'plant_states', self.states.append, 100)
            self.publisher = self.create_publisher(JointState, '/arm/joint_commands', 10)

        def command(self, names, efforts):
            self.publisher.publish(JointState(name=list(names),
                                              effort=[float(v) for v in efforts]))

        def stamps(self):
            return [s.header.stamp.sec * 1_000_000_000 + s.header.stamp.nanosec
                    for s in self.states]
    harness = RosHarness(PUMA, overrides=(
        f'initial_positions:={Q0}', 'command_message:=joint_state',
        'command_topic:=/arm/joint_commands') + WIDE + overrides,
        ros_args=('-r', 'joint_states:=plant_states'))
    plant = harness.add(PlantSimulator(context=harness.context))
    hardware = harness.add(Hardware(harness.context))
    harness.spin_until(lambda: hardware.states
                       and hardware.publisher.get_subscription_count() > 0, 'the first state')
    return harness, plant, hardware


def holding():
    _, _, dynamics, RobotModel, _, PUMA, _, _ = _dds()
    return dynamics.gravity_torques(RobotModel.from_yaml(PUMA), np.array(Q0))


def test_the_plant_subscribes_joint_state_and_applies_efforts_by_name():
    """Lock-step: a command in reversed order advances one period and is applied in the
    plant's joint order (the published effort); refused ones (a subset, NaN, all NaN) do
    not answer the state."""
    harness, plant, hardware = start('publish_clock:=true', 'real_time_factor:=0.0',
                                     'lockstep_timeout:=60.0')
    try:
        from sensor_msgs.msg import JointState
        assert plant._command_sub.msg_type is JointState
        assert plant._command_sub.topic_name == '/arm/joint_commands'
        tau = holding()
        hardware.command(JOINTS[:5], tau[:5])
        hardware.command(JOINTS, [math.nan] * 6)
        hardware.command(JOINTS, list(tau[:5]) + [math.nan])
        harness.spin_for(40)
        assert set(hardware.stamps()) == {0}                 # none answered the state
        hardware.command(JOINTS[::-1], tau[::-1])
        harness.spin_until(lambda: max(hardware.stamps()) == PERIOD_NS, 'one step')
        np.testing.assert_allclose(hardware.states[-1].effort, tau, rtol=1e-12)
        np.testing.assert_allclose(hardware.states[-1].position, Q0, atol=1e-9)
    finally:
        harness.close()


def test_the_stamp_joint_carries_each_states_stamp_and_its_command_is_ignored():
    """stamp_joint: every state names one more joint, last, whose position is the state's
    stamp in seconds (velocity 1, effort 0); commands naming it (as the hardware plugin
    sends them) are applied to the arm."""
    harness, plant, hardware = start('publish_clock:=true', 'real_time_factor:=0.0',
                                     'lockstep_timeout:=60.0', 'stamp_joint:=clock_joint')
    try:
        tau = holding()
        for k in range(1, 4):
            hardware.command(['clock_joint'] + JOINTS[::-1], [math.nan] + list(tau[::-1]))
            harness.spin_until(lambda: max(hardware.stamps()) == k * PERIOD_NS, 'one step')
        for msg in hardware.states:
            assert list(msg.name) == JOINTS + ['clock_joint']
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            assert msg.position[6] == stamp and msg.velocity[6] == 1.0
            assert msg.effort[6] == 0.0
        assert max(m.position[6] for m in hardware.states) == pytest.approx(0.03, abs=1e-12)
        np.testing.assert_allclose(hardware.states[-1].effort[:6], tau, rtol=1e-12)
        np.testing.assert_allclose(hardware.states[-1].position[:6], Q0, atol=1e-9)
    finally:
        harness.close()


def test_a_stamp_joint_named_as_a_joint_of_the_arm_is_refused():
    _, _, _, _, PlantSimulator, PUMA, RosHarness, _ = _dds()
    from robot_dynamics.nodes.common.ros_params import ConfigurationError
    harness = RosHarness(PUMA, overrides=('stamp_joint:=joint_2',))
    try:
        with pytest.raises(ConfigurationError, match="stamp_joint: 'joint_2' is a joint"):
            PlantSimulator(context=harness.context)
    finally:
        harness.close()


def test_a_refused_command_keeps_the_last_good_one_until_command_timeout():
    """Free stepping on simulated time (no lock-step): the good command stays applied
    while refused ones arrive, and ages from its own arrival: zero effort (brakes off)
    once it is older than command_timeout, whatever refused commands came meanwhile."""
    harness, plant, hardware = start('publish_clock:=true', 'lockstep:=false',
                                     'command_timeout:=0.2', 'brakes:=false')
    try:
        tau = holding()
        hardware.command(JOINTS, tau)
        harness.spin_until(lambda: any(s.effort[1] for s in hardware.states), 'the command')
        first = next(s for s in hardware.states if s.effort[1])
        start_ns = first.header.stamp.sec * 1_000_000_000 + first.header.stamp.nanosec
        bad = np.array(tau) * 3.0
        seen = len(hardware.states)
        while not any(s.effort[1] == 0.0 for s in hardware.states[seen:]):
            hardware.command(JOINTS[:5], bad[:5])                       # refused
            harness.spin_for(2)
        applied = [s for s in hardware.states if s.effort[1]]
        for s in applied:
            np.testing.assert_allclose(s.effort, tau, rtol=1e-12)       # never the bad one
        last = applied[-1].header.stamp
        held_ns = last.sec * 1_000_000_000 + last.nanosec - start_ns
        assert held_ns <= 0.2e9 + PERIOD_NS                 # zero once older than 0.2 s
        assert held_ns >= 0.2e9 - 3 * PERIOD_NS             # not earlier (refused ones
        #                                                     neither renewed nor cut it)
    finally:
        harness.close()


# ------------------------------------------------------------------ publish_on_command

def test_the_phase_lock_puts_the_ticks_just_after_the_commands_from_any_start():
    """Commands arriving once a period, with jitter of up to 0.3 period either way, at any
    phase of the tick grid: the grid, moved by phase_shift at each tick, ends with its ticks
    PHASE_TARGET periods after the arrivals on average, moves by at most PHASE_GAIN / 2
    periods a tick and, once locked, does not drift: its ticks keep the commands' period
    (a drift would run the simulation faster or slower than the wall clock)."""
    from robot_dynamics.nodes.plant import PHASE_GAIN, PHASE_TARGET, phase_shift
    period = 0.001
    rng = np.random.default_rng(3)
    for offset in np.linspace(0.0, 0.95, 9) * period:
        start, waits, starts = 0.0, [], []
        for k in range(2000):
            due = start + k * period
            arrival = k * period - offset + rng.uniform(-0.3, 0.3) * period
            while arrival > due:          # arrived after the tick: taken at the next one
                arrival -= period
            shift = phase_shift(due, arrival, period)
            assert abs(shift) <= 0.5 * PHASE_GAIN * period + 1e-15
            start -= shift
            starts.append(start)
            waits.append(((due - arrival) / period + 0.5) % 1.0 - 0.5)
        settled = np.array(waits[-500:])
        assert abs(settled.mean() - PHASE_TARGET) < 0.05, (offset, settled.mean())
        drift = (starts[-1] - starts[-1000]) / period
        assert abs(drift) < 0.1, (offset, drift)    # < 0.01 % of 1000 periods


def test_publish_on_command_answers_commands_and_is_quiet_without_them():
    """Free-running on the wall clock: before any command a state only every 0.1 s (by the
    stamps); then a state after each command, never two within one tick whatever came (by
    the plant's tick count at each state: the stamps of consecutive ticks can be a few ms
    apart when a timer call ran late, as on a busy CI machine)."""
    harness, plant, hardware = start('publish_clock:=false', 'publish_on_command:=true',
                                     'publish_rate:=100.0', 'command_timeout:=0.0')
    published_at = []                                      # the plant's tick at each state
    publish = plant._publish

    def counted(*args, **kwargs):
        published_at.append(plant.ticks)
        return publish(*args, **kwargs)
    plant._publish = counted
    try:
        harness.spin_until(lambda: len(hardware.states) >= 3, 'three idle states')
        idle = np.diff(hardware.stamps()[:3])
        assert (idle >= 0.095e9).all(), idle              # not one a tick (10 ms)
        tau = holding()
        for _ in range(5):                                 # one command, one state
            seen = len(hardware.states)
            hardware.command(JOINTS, tau)
            harness.spin_until(lambda: len(hardware.states) > seen, 'the answer')
        seen = len(hardware.states)
        for _ in range(4):                                 # a burst: one state a tick
            hardware.command(JOINTS, tau)
        harness.spin_until(lambda: len(hardware.states) > seen, 'the answer to the burst')
        assert len(published_at) >= 6, published_at       # five answers and the burst's
        assert (np.diff(published_at) >= 1).all(), published_at      # not two a tick
        assert plant.publish_on_command and not plant.braked
    finally:
        harness.close()


@pytest.mark.parametrize('on_command', [True, False])
def test_a_reader_taking_one_state_a_cycle_reads_the_newest_with_publish_on_command(
        on_command):
    """topic_based_ros2_control's read: one state a cycle, the oldest of at most 5 queued
    (SensorDataQoS), then a command. The plant ticking 4 times a cycle: with
    publish_on_command the reader never finds more than one older state waiting; without
    it, the queue is full and every read is 4 states old."""
    import collections
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    harness, plant, hardware = start('publish_clock:=false', 'publish_rate:=400.0',
                                     f'publish_on_command:={str(on_command).lower()}',
                                     'command_timeout:=0.0')
    try:
        queue, waiting = collections.deque(maxlen=5), []
        hardware.create_subscription(JointState, 'plant_states', lambda m: queue.append(m),
                                     qos_profile_sensor_data)
        tau = holding()

        def cycle():                                       # read, then write
            waiting.append(len(queue))
            if queue:
                queue.popleft()
            hardware.command(JOINTS, tau)
        hardware.create_timer(0.01, cycle)
        harness.spin_until(lambda: len(waiting) >= 80, '80 reader cycles')
        settled = waiting[30:]
        if on_command:
            assert max(settled) <= 2, waiting
        else:
            assert min(settled) >= 4, waiting
    finally:
        harness.close()


def oldest_first_reader(hardware, arrivals=None):
    """A queue of the plant's states as topic_based_ros2_control's subscription holds them
    (SensorDataQoS: the last 5); its reader takes the oldest. `arrivals` (a list): one
    entry appended per state queued."""
    import collections
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    queue = collections.deque(maxlen=5)

    def arrived(msg):
        queue.append(msg)
        if arrivals is not None:
            arrivals.append(1)
    hardware.create_subscription(JointState, 'plant_states', arrived,
                                 qos_profile_sensor_data)
    return queue


def test_a_backlog_in_an_oldest_first_reader_ends_within_the_drain_period():
    """The reader as above (one state a cycle, the oldest queued), the plant answering
    each command. From cycle 30, at the first read that finds a state, the reader takes
    nothing, as when a state came too late for its read: two states then wait at the next
    reads and every read is a cycle old, for ever if every command is answered. The plant
    leaves one answered tick in QUEUE_DRAIN_PERIOD without a state: within that many
    cycles (and a margin) a read finds one state again. (The drain count restarts at the
    missed read: a drain right after it would leave no backlog to see.)"""
    from robot_dynamics.nodes.plant import QUEUE_DRAIN_PERIOD
    harness, plant, hardware = start('publish_clock:=false', 'publish_rate:=400.0',
                                     'publish_on_command:=true', 'command_timeout:=0.0')
    try:
        queue, waiting, skipped = oldest_first_reader(hardware), [], []
        tau = holding()

        def cycle():
            waiting.append(len(queue))
            if len(waiting) >= 30 and queue and not skipped:
                skipped.append(len(waiting))              # a read that missed
                plant._answers = 0                        # the drain a period away
            elif queue:
                queue.popleft()
            hardware.command(JOINTS, tau)
        hardware.create_timer(0.01, cycle)
        window = QUEUE_DRAIN_PERIOD + 10
        harness.spin_until(lambda: skipped and len(waiting) >= skipped[0] + 4 + window,
                           'the reader cycles')
        at = skipped[0]
        assert max(waiting[at:at + 3]) >= 2, waiting            # the backlog was there
        assert min(waiting[at + 3:at + 3 + window]) <= 1, waiting   # and it ended
    finally:
        harness.close()


def test_a_command_written_before_the_last_state_was_sent_holds_the_next_state_back():
    """The reader as topic_based_ros2_control: each cycle reads the oldest state queued,
    then writes a command stamped at that write. From cycle 30, one read misses the state
    that came late for it, and the command of that cycle is stamped before the state was
    sent, as it is when a state arrives after the read. The plant then sends no state at
    its next tick: the next read takes the waiting one and finds nothing behind it (no
    backlog, though the periodic drain is a period away), and one state is counted as
    held back. Commands stamped after the state they answer are never held back: the
    reader cycles only once its last command was answered (a state queued, or the plant
    counted the tick that answered it without one), so that a loaded machine delaying an
    answer past the next cycle, which rightly holds a state back too, cannot happen here."""
    from sensor_msgs.msg import JointState
    harness, plant, hardware = start('publish_clock:=false', 'publish_rate:=400.0',
                                     'publish_on_command:=true', 'command_timeout:=0.0')
    try:
        arrivals, waiting, missed, marks = [], [], [], []
        queue = oldest_first_reader(hardware, arrivals)
        tau = holding()

        def answered():
            return (len(arrivals), plant._answers, plant.held_states)

        def write(stamp_ns):
            marks.append(answered())
            msg = JointState(name=list(JOINTS), effort=[float(v) for v in tau])
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
            hardware.publisher.publish(msg)

        def cycle():
            if marks and answered() == marks[-1]:
                return                                    # the last command unanswered
            waiting.append(len(queue))
            if len(waiting) >= 30 and queue and not missed:
                missed.append(len(waiting))               # the state came after the read
                missed.append(plant.held_states)          # none held back before
                plant._answers = 0                        # the drain a period away
                write(hardware.stamps()[-1] - 1)          # written before it was sent
                return
            if queue:
                queue.popleft()
            write(time.time_ns())
        hardware.create_timer(0.01, cycle)
        harness.spin_until(lambda: missed and len(waiting) >= missed[0] + 8,
                           'the reader cycles')
        at = missed[0]
        assert sum(waiting[at - 20:at]) >= 15, waiting         # states read before the miss
        assert max(waiting[at:at + 8]) <= 1, waiting           # no backlog after the miss
        assert missed[1] == 0 and plant.held_states == 1
    finally:
        harness.close()
