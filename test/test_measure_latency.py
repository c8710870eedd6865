"""measure_latency: the controller measures the loop's dead time from the efforts a
simulated arm echoes in /joint_states (the effort it applied over the tick before the
state) and uses the running mean in place of latency_compensation. First the estimate on
made-up tick schedules (no ROS), then in-process against a robot that echoes the commands
it takes, and against this package's plant."""

import math

import numpy as np
import pytest

from robot_dynamics.nodes.controller import loop_delay
from robot_dynamics.nodes.controller.loop_delay import LoopDelayEstimate

T = 0.001          # s: the plant's tick and the interval of the states
AGE = 0.0007       # s: each state is stamped this long after its measurement


def simulate(estimate, arrivals, ticks, seed=0, silent=lambda j: False):
    """A plant ticking every T: the state measured at tick j (stamped j T + AGE) is answered
    by a command that reaches the plant arrivals(j) after the measurement; at each tick the
    plant applies the newest command that has arrived, and the next state reports it as
    applied. A tick j with silent(j) sends no state (as the plant behind
    topic_based_ros2_control one tick in ten): the cycle then answers the last state sent
    again (joint_state_broadcaster repeats it), its command timed from that state's
    measurement. Returns the true dead time of every tick: the middle of the tick minus the
    measurement time of the state the applied command answered."""
    rng = np.random.default_rng(seed)
    commands = []                               # (arrival time, measured at, effort)
    truth = []
    applied = None
    last_sent = 0.0
    for j in range(ticks):
        m = j * T
        if silent(j):
            measured = last_sent                # the state answered: the last one sent
        else:
            measured = last_sent = m
            if applied is not None:             # the state at m reports the last tick's
                estimate.echoed(m + AGE, applied[1])
        effort = rng.normal(size=6)
        estimate.sent(measured + AGE, effort)   # the cycle answering it (its stamp)
        commands.append((m + arrivals(j), measured, effort))
        arrived = [c for c in commands if c[0] <= m + 1e-12]
        if arrived:
            newest = max(arrived, key=lambda c: c[1])
            applied = (newest[1], newest[2])
            truth.append(m + T / 2 - newest[1])
        commands = [c for c in commands if c[0] > m + 1e-12] + ([newest] if arrived else [])
    return np.array(truth)


def test_a_steady_loop_is_measured_to_its_dead_time():
    """Every command arrives within the tick of its state and acts over the next one:
    1.5 ticks, exactly."""
    estimate = LoopDelayEstimate(0.004)
    truth = simulate(estimate, lambda j: 0.6 * T, 2000)
    np.testing.assert_allclose(truth, 1.5 * T, rtol=0, atol=1e-12)
    assert estimate.value == pytest.approx(1.5 * T, abs=1e-9)
    assert estimate.samples > 1900 and estimate.unmatched <= 2


def test_late_commands_lengthen_the_measured_dead_time_by_the_time_they_lose():
    """One command in three arrives after the tick it was meant for: the mean dead time of
    the efforts that acted is longer than the steady 1.5 ticks, and the estimate is it."""
    estimate = LoopDelayEstimate(0.0)
    truth = simulate(estimate, lambda j: (0.6 if j % 3 else 1.2) * T, 3000)
    assert truth.mean() > 1.7 * T
    assert estimate.value == pytest.approx(truth[-600:].mean(), abs=0.03 * T)


@pytest.mark.parametrize('late', [False, True])
def test_ticks_without_a_state_leave_the_estimate_on_the_true_dead_time(late):
    """One tick in ten sends no state (and, `late`, one command in four misses its tick):
    the states are 1.1 ticks apart on average, but each still reports the effort of its last
    tick alone (centred on the mean interval the samples came out 0.05 ticks short), and
    each tick without a state counts too, with the command sent after the one echoed before
    it. With `late`, half of those ticks held the command echoed before them instead (the
    command meant for them came late; the gaps here fall where they may), which no state
    shows: the estimate is then short by 0.1 (the ticks without a state) x 0.5 (held) x 1
    tick. (Behind topic_based_ros2_control such ticks were given a command of their own.)"""
    estimate = LoopDelayEstimate(0.0)
    truth = simulate(estimate, lambda j: (1.2 if late and j % 4 == 1 else 0.6) * T, 4000,
                     silent=lambda j: j % 10 == 9)
    assert estimate.period == pytest.approx(T, abs=1e-9)
    assert estimate.inferred > 390
    bias = 0.05 * T if late else 0.0
    assert estimate.value == pytest.approx(truth[-1000:].mean() - bias, abs=0.005 * T)


def silent_tick_schedule(estimate, ticks, later, gap=1, every=10):
    """Tick k applies the command of cycle k - 2 (sent at k T) and its state, stamped
    (k + 1) T, reports it; the last `gap` ticks in every `every` send no state, and the
    commands that act in them were sent `later` after their cycle time (their dead time
    that much shorter: behind topic_based_ros2_control such ticks' commands came 0.08-0.12
    ms sooner than the rest). Returns the true dead time of every tick: its middle minus
    the time the command that acted in it was sent."""
    def silent(k):
        return k % every >= every - gap
    sent = [k * T + (later if silent(k + 2) else 0.0) for k in range(ticks)]
    efforts = [np.random.default_rng(k).normal(size=6) for k in range(ticks)]
    truth = []
    for k in range(ticks):
        estimate.sent(sent[k], efforts[k])
        if k >= 2:
            truth.append((k + 0.5) * T - sent[k - 2])
            if not silent(k):
                estimate.echoed((k + 1) * T, efforts[k - 2])
    return np.array(truth)


@pytest.mark.parametrize('gap', [1, 2])
def test_the_ticks_without_a_state_count_with_the_command_that_acted_in_them(gap):
    """The efforts that acted in ticks without a state were sent 0.3 ticks late (came that
    much sooner): over all ticks the dead time is shorter than over the echoed ones, and
    the arm is given every tick. Each such tick is a sample of the command sent between the
    two echoed around it whose dead time is nearest the running mean."""
    estimate = LoopDelayEstimate(0.0025)
    truth = silent_tick_schedule(estimate, 4000, 0.3 * T, gap=gap)
    echoed = 2.5 * T
    assert truth.mean() == pytest.approx(echoed - 0.03 * gap * T, abs=1e-4 * T)
    assert estimate.inferred >= 390 * gap
    assert estimate.value == pytest.approx(truth[-1000:].mean(), abs=0.003 * T)


def test_a_stall_longer_than_max_silent_ticks_is_no_sample():
    """The states resume after more than MAX_SILENT ticks: the plant caught up at once
    under whatever command it held, nothing says which, no tick is inferred."""
    estimate = LoopDelayEstimate(0.0025)
    gap = loop_delay.MAX_SILENT + 1
    silent_tick_schedule(estimate, 1000, 0.3 * T, gap=gap, every=50)
    assert estimate.inferred == 0
    assert estimate.value == pytest.approx(2.5 * T, abs=1e-9)


def test_the_tick_follows_a_simulator_that_changes_its_rate():
    """Every interval twice the tick for WINDOW states in a row: a new tick, not skipped
    states."""
    estimate = LoopDelayEstimate(0.0)
    stamp = 0.0
    for j in range(300):
        stamp += T
        estimate.echoed(stamp, np.zeros(6))
    for j in range(loop_delay.WINDOW + 300):
        stamp += 2 * T
        estimate.echoed(stamp, np.zeros(6))
    assert estimate.period == pytest.approx(2 * T, abs=1e-9)


def test_the_estimate_follows_a_change_of_load_within_a_few_hundred_states():
    estimate = LoopDelayEstimate(0.0015)
    simulate(estimate, lambda j: 0.6 * T if j < 1000 else 1.6 * T, 1600)
    assert estimate.value == pytest.approx(2.5 * T, abs=0.02 * T)


def test_measured_torques_echo_no_command_and_leave_the_start_value():
    estimate = LoopDelayEstimate(0.003)
    rng = np.random.default_rng(1)
    for j in range(200):
        effort = rng.normal(size=6)
        estimate.sent(j * T, effort)
        estimate.echoed(j * T + 0.002, effort + 1e-9)     # a sensor's reading of it
    assert estimate.value == 0.003 and estimate.samples == 0 and estimate.unmatched == 200


def test_an_effort_sent_twice_is_no_sample_until_one_of_them_is_forgotten():
    estimate = LoopDelayEstimate(0.0)
    same = np.arange(6.0)
    estimate.echoed(0.0, np.zeros(6))                 # the interval: T from here on
    estimate.sent(0.001, same)
    estimate.sent(0.002, same)                         # which one acted? unknown
    assert not estimate.echoed(0.001 + T, same)
    for j in range(loop_delay.MEMORY - 1):             # the first one forgotten
        estimate.sent(0.003 + j * T, np.full(6, float(j) + 100.0))
    assert estimate.echoed(0.002 + T, same)            # now only the second is known
    assert estimate.samples == 1
    sample = (0.002 + T) - 0.002 - 0.5 * estimate.period     # timed from the second
    assert estimate.value == pytest.approx(sample / loop_delay.WINDOW, abs=1e-15)


@pytest.mark.parametrize('shift', [-0.01, 2 * loop_delay.MAX_DELAY])
def test_a_dead_time_below_zero_or_beyond_the_limit_is_no_sample(shift):
    """An echo stamped before the command's cycle (stamps on another clock), or long after
    it (a restart), says nothing about the loop."""
    estimate = LoopDelayEstimate(0.002)
    effort = np.ones(6)
    estimate.echoed(0.0, np.zeros(6))
    estimate.echoed(T, np.zeros(6))
    estimate.sent(1.0, effort)
    assert not estimate.echoed(1.0 + shift, effort)
    assert estimate.value == 0.002 and estimate.samples == 0


def test_a_new_start_value_restarts_the_mean():
    estimate = LoopDelayEstimate(0.002)
    simulate(estimate, lambda j: 0.6 * T, 500)
    estimate.restart(0.01)
    assert estimate.value == 0.01


# ---------------------------------------------------------------------- in the node

rclpy = pytest.importorskip('rclpy')

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from robot_dynamics.nodes.common.diagnostics import ControllerDiagnostics  # noqa: E402
from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from ros_testing import call_service, double, move_to, PUMA, RosHarness, SIM  # noqa: E402,I100

CONTROLLER = '/computed_torque_controller'
JOINTS = [f'joint_{i}' for i in range(1, 7)]
ORDER = [3, 0, 5, 1, 4, 2]            # the robot names its joints in another order
Q = np.array([0.3, -0.5235988, 0.2, 0.3490659, 0.7853982, 0.1745329])
V = np.array([0.8, -0.5, 1.2, 0.3, -0.9, 1.5])         # rad/s
INTERVAL = 0.01                        # s between the robot's states
LAG = 2                                # the effort of the command answering state j is
#                                        reported by state j + LAG + 1 (acting over the
#                                        interval before it): dead time (LAG + 1/2) INTERVAL


class EchoingRobot(Node):
    """Sends stamped /joint_states (joints in ORDER) whose efforts are the commands it
    took, LAG states late, as a simulator reports the effort it applied."""

    def __init__(self, context):
        from rcl_interfaces.srv import SetParameters
        super().__init__('robot', context=context)
        self.states = self.create_publisher(JointState, '/joint_states', 10)
        self.commands = []
        self.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                 lambda m: self.commands.append(list(m.data)), 100)
        self.errors = []
        self.create_subscription(JointState, f'{CONTROLLER}/error', self.errors.append, 100)
        self.client = self.create_client(SetParameters, f'{CONTROLLER}/set_parameters')
        # stamps INTERVAL apart from 20 s back: never ahead of the node clock
        self.stamp = self.get_clock().now().nanoseconds - 20_000_000_000
        self.sent = 0

    def send(self, q, qd, effort):
        self.stamp += round(INTERVAL * 1e9)
        msg = JointState(name=[JOINTS[i] for i in ORDER],
                         position=[float(q[i]) for i in ORDER],
                         velocity=[float(qd[i]) for i in ORDER],
                         effort=[float(effort[i]) for i in ORDER])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(self.stamp, 1_000_000_000)
        self.states.publish(msg)
        self.sent += 1


@pytest.fixture
def running():
    harness = RosHarness(PUMA, overrides=(
        'control_mode:=on_state', 'state_timeout:=0.0', 'state_publish_rate:=0.0',
        'check_command_controller:=false', 'measure_latency:=true',
        'latency_compensation:=0.004'))
    controller = harness.add(ComputedTorqueController(context=harness.context))
    robot = harness.add(EchoingRobot(harness.context))
    harness.spin_until(lambda: robot.states.get_subscription_count() > 0
                       and robot.client.service_is_ready(), 'the controller')
    yield harness, controller, robot
    harness.close()


def echo_states(harness, robot, count):
    """`count` states at rest near Q (each a little elsewhere, so that each command is
    another), each answered before the next; state j reports command j - LAG - 1 (zeros
    before there is one)."""
    for _ in range(count):
        answered = len(robot.commands)
        k = robot.sent - LAG - 1
        effort = robot.commands[k] if k >= 0 else np.zeros(6)
        robot.send(Q + 1e-4 * np.sin(robot.sent + np.arange(6)), np.zeros(6), effort)
        harness.spin_until(lambda: len(robot.commands) > answered, 'the command')


def moving_error(harness, robot):
    """The ~/error answering the one state sent with velocity V (its velocity error -V:
    holding, the reference's velocity is 0)."""
    def found():
        return [e for e in robot.errors if np.allclose(e.velocity, -V, rtol=0, atol=1e-12)]
    harness.spin_until(found, '~/error of the moving state')
    return found()[0]


def test_the_node_measures_the_dead_time_the_echo_shows_and_predicts_with_it(running):
    """The robot reports each command LAG + 1 states after the state it answered: the
    estimate tends to (LAG + 1/2) INTERVAL from latency_compensation (4 ms), and a moving
    state's prediction (~/error = -V d when holding) uses it, not the parameter."""
    harness, controller, robot = running
    echo_states(harness, robot, 400)
    expected = (LAG + 0.5) * INTERVAL
    samples = 400 - LAG - 1              # from the state reporting the first command on
    start_left = (0.004 - expected) * (1.0 - 1.0 / loop_delay.WINDOW) ** samples
    assert controller.loop_delay.value == pytest.approx(expected + start_left, abs=2e-5)
    assert controller.loop_delay.samples == samples
    d = controller.loop_delay.value
    robot.send(Q, V, np.full(6, 1e6))                  # echoes nothing: d stays
    error = moving_error(harness, robot)
    held = controller.sampler.sample(0.0).positions    # holding the first state's position
    np.testing.assert_allclose(error.position, held - Q - V * d, rtol=0, atol=1e-12)
    assert 'measured' in ControllerDiagnostics._latency(controller)


class StampedEchoingRobot(EchoingRobot):
    """An EchoingRobot whose states also name the joint 'plant_stamp', at the time each
    was measured: TICK apart, not INTERVAL as the header stamps (a broadcaster restamps
    them on its own cycle); `taken` is when the controller's clock says it got the last."""

    TICK = 0.004

    def __init__(self, context):
        super().__init__(context)
        self.measured = self.get_clock().now().nanoseconds * 1e-9 - 10.0
        self.taken = None

    def send(self, q, qd, effort):
        self.stamp += round(INTERVAL * 1e9)
        self.measured += self.TICK
        self.taken = self.measured + 0.0003
        names = [JOINTS[i] for i in ORDER]
        msg = JointState(name=names[:3] + ['plant_stamp'] + names[3:],
                         position=[float(q[i]) for i in ORDER[:3]] + [self.measured]
                         + [float(q[i]) for i in ORDER[3:]],
                         velocity=[float(qd[i]) for i in ORDER[:3]] + [1.0]
                         + [float(qd[i]) for i in ORDER[3:]],
                         effort=[float(effort[i]) for i in ORDER[:3]] + [0.0]
                         + [float(effort[i]) for i in ORDER[3:]])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(self.stamp, 1_000_000_000)
        self.states.publish(msg)
        self.sent += 1


def test_with_a_stamp_joint_the_echo_is_timed_by_the_measurement_times():
    """stamp_joint: each command is timed from the measurement of the state it answered,
    each echo by its own measurement time, so the estimate tends to (LAG + 1/2) TICK of
    the measurement times, not (LAG + 1/2) INTERVAL of the header stamps."""
    harness = RosHarness(PUMA, overrides=(
        'control_mode:=on_state', 'state_timeout:=0.0', 'state_publish_rate:=0.0',
        'check_command_controller:=false', 'measure_latency:=true',
        'latency_compensation:=0.004', 'stamp_joint:=plant_stamp'))
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        robot = harness.add(StampedEchoingRobot(harness.context))
        harness.spin_until(lambda: robot.states.get_subscription_count() > 0, 'the controller')
        controller._now = lambda: robot.taken
        echo_states(harness, robot, 400)
        expected = (LAG + 0.5) * robot.TICK
        samples = 400 - LAG - 1
        start_left = (0.004 - expected) * (1.0 - 1.0 / loop_delay.WINDOW) ** samples
        assert controller.loop_delay.samples == samples
        assert controller.loop_delay.value == pytest.approx(expected + start_left, abs=2e-5)
        assert controller.loop_delay.period == pytest.approx(robot.TICK, abs=1e-6)
    finally:
        harness.close()


def test_a_state_sent_again_value_for_value_is_no_sample(running):
    """joint_state_broadcaster repeats the last state under a new stamp when the hardware
    had nothing new: its efforts are the last state's, its stamp a cycle later than their
    time. Taken as a sample it would count a tick too many."""
    harness, controller, robot = running
    echo_states(harness, robot, 10)
    samples, value = controller.loop_delay.samples, controller.loop_delay.value
    answered = len(robot.commands)
    robot.sent -= 1                                     # the last state once more, a
    echo_states(harness, robot, 1)                      # cycle later
    assert len(robot.commands) > answered
    assert controller.loop_delay.samples == samples and controller.loop_delay.value == value


def test_measure_latency_off_uses_latency_compensation_as_set(running):
    harness, controller, robot = running
    echo_states(harness, robot, 50)
    assert controller.loop_delay.value > 0.004 + 1e-3      # measuring moved it
    response = call_service(harness, robot.client, set_parameters(
        Parameter('measure_latency', value=False).to_parameter_msg()), 'set_parameters')
    assert response.results[0].successful
    robot.send(Q, V, np.zeros(6))
    error = moving_error(harness, robot)
    held = controller.sampler.sample(0.0).positions
    np.testing.assert_allclose(error.position, held - Q - V * 0.004, rtol=0, atol=1e-12)
    assert '(set)' in ControllerDiagnostics._latency(controller)


def test_setting_latency_compensation_live_restarts_the_measurement_there(running):
    harness, controller, robot = running
    echo_states(harness, robot, 20)
    response = call_service(harness, robot.client, set_parameters(
        double('latency_compensation', 0.05)), 'set_parameters')
    assert response.results[0].successful
    assert controller.loop_delay.value == 0.05


def test_efforts_that_echo_no_command_are_said_once_and_change_nothing(running, monkeypatch):
    """A real arm's measured torques: after state_input.UNMATCHED_WARNING states one
    warning naming measure_latency; the dead time stays latency_compensation."""
    from robot_dynamics.nodes.controller import state_input
    harness, controller, robot = running
    monkeypatch.setattr(state_input, 'UNMATCHED_WARNING', 5)
    robot.stamp = controller.get_clock().now().nanoseconds - 20_000_000_000
    lines = []

    class Recorder:
        def __getattr__(self, level):
            return lambda text, **_: lines.append((level, text))
    monkeypatch.setattr(controller, 'get_logger', lambda: Recorder())
    for j in range(12):
        answered = len(robot.commands)
        robot.send(Q + 1e-4 * j, np.zeros(6), np.full(6, 0.5 + j))  # torques, not commands
        harness.spin_until(lambda: len(robot.commands) > answered, 'the command')
    warnings = [text for level, text in lines if level == 'warning'
                and 'measure_latency' in text]
    assert len(warnings) == 1 and 'equal no command' in warnings[0]
    assert controller.loop_delay.value == 0.004 and controller.loop_delay.samples == 0


def set_parameters(*parameters):
    from rcl_interfaces.srv import SetParameters
    return SetParameters.Request(parameters=list(parameters))



def test_this_packages_plant_in_lock_step_is_measured_to_half_its_tick():
    """The plant (config/sim.yaml: lock-step on simulated time, a state every 10 ms) takes
    each command before it integrates the next tick and reports it with the state at the
    end of that tick: each effort acts over the tick after the state it answers, centred
    half a tick after it. Every sample is that: during a move (at rest every command is
    the same one, no sample) the estimate goes from latency_compensation (20 ms) towards
    it as the running mean does."""
    from robot_dynamics.nodes.plant import PlantSimulator
    harness = RosHarness(PUMA, SIM)
    try:
        plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
            Parameter('real_time_factor', value=0.0)]))
        controller = harness.add(ComputedTorqueController(
            context=harness.context, parameter_overrides=[
                Parameter('use_sim_time', value=True), Parameter('measure_latency', value=True),
                Parameter('latency_compensation', value=0.02)]))
        mover = harness.add(Node('mover', context=harness.context))
        trajectories = mover.create_publisher(JointTrajectory, f'{CONTROLLER}/joint_trajectory',
                                              10)
        harness.spin_until(lambda: trajectories.get_subscription_count() > 0
                           and getattr(controller, '_ready', False), 'the controller')
        goal = controller._q + 0.3
        trajectories.publish(move_to(JOINTS, goal, 5))
        harness.spin_until(lambda: controller.loop_delay.samples >= 300, '300 echoed commands')
        estimate = controller.loop_delay
        tick = 1.0 / plant.get_parameter('publish_rate').value
        remainder = (0.02 - tick / 2) * (1.0 - 1.0 / loop_delay.WINDOW) ** estimate.samples
        assert estimate.value == pytest.approx(tick / 2 + remainder, abs=1e-9)
        assert estimate.unmatched <= 3      # the states before the first command
    finally:
        harness.close()
