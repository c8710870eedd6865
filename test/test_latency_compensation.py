"""The controller's latency_compensation and state_age (a loop through controller_manager:
the state is restamped by joint_state_broadcaster after it was measured, and an effort acts
some milliseconds after that measurement). In-process, the test plays the robot: stamped
/joint_states in on_state mode, the controller's ~/reference, ~/error and ~/output read
back."""

import math

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.nodes.controller import ComputedTorqueController, SERVICE_PERIOD
from ros_testing import call_service, double, move_to, PUMA, RosHarness  # noqa: I100

CONTROLLER = '/computed_torque_controller'
JOINTS = [f'joint_{i}' for i in range(1, 7)]
Q = np.array([0.3, -0.5235988, 0.2, 0.3490659, 0.7853982, 0.1745329])
V = np.array([0.8, -0.5, 1.2, 0.3, -0.9, 1.5])         # rad/s
STAMP = 'plant_stamp'                                   # the stamp_joint of `stamped`


class Robot(Node):
    def __init__(self, context):
        from rcl_interfaces.srv import SetParameters
        super().__init__('robot', context=context)
        self.states = self.create_publisher(JointState, '/joint_states', 10)
        self.trajectory = self.create_publisher(JointTrajectory,
                                                f'{CONTROLLER}/joint_trajectory', 10)
        self.client = self.create_client(SetParameters, f'{CONTROLLER}/set_parameters')
        self.seen = {name: [] for name in ('reference', 'error', 'output')}
        for name, values in self.seen.items():
            self.create_subscription(JointState, f'{CONTROLLER}/{name}', values.append, 100)
        self.stamp = self.get_clock().now().nanoseconds

    def send(self, q, qd, after=0.01, measured=None):
        """A state stamped `after` s later than the previous one; with `measured` [s],
        it names the joint STAMP too, at that position (a plant's stamp_joint)."""
        self.stamp += round(after * 1e9)
        extra = [] if measured is None else [STAMP]
        msg = JointState(name=JOINTS + extra, position=[float(v) for v in q] + (
            [] if measured is None else [measured]),
            velocity=[float(v) for v in qd] + ([1.0] if extra else []))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(self.stamp, 1_000_000_000)
        self.states.publish(msg)


def start(*overrides):
    harness = RosHarness(PUMA, overrides=('control_mode:=on_state', 'state_timeout:=0.0',
                                          'state_publish_rate:=0.0') + overrides)
    controller = harness.add(ComputedTorqueController(context=harness.context))
    robot = harness.add(Robot(harness.context))
    harness.spin_until(lambda: robot.states.get_subscription_count() > 0
                       and robot.trajectory.get_subscription_count() > 0
                       and robot.client.service_is_ready(), 'the controller')
    return harness, controller, robot


@pytest.fixture
def running():
    harness, controller, robot = start()
    yield harness, controller, robot
    harness.close()


@pytest.fixture
def stamped():
    """As `running`, the controller with stamp_joint STAMP."""
    harness, controller, robot = start(f'stamp_joint:={STAMP}')
    yield harness, controller, robot
    harness.close()


def cycle(harness, robot, q, qd, after=0.01, measured=None):
    """Send one state; (~/reference, ~/error, ~/output) of the cycle answering it."""
    counts = {name: len(values) for name, values in robot.seen.items()}
    robot.send(q, qd, after, measured)
    harness.spin_until(lambda: all(len(robot.seen[n]) > counts[n] for n in counts),
                       'the cycle answering the state')
    return [robot.seen[n][counts[n]] for n in ('reference', 'error', 'output')]


def set_live(harness, robot, *parameters):
    from rcl_interfaces.srv import SetParameters
    response = call_service(harness, robot.client, SetParameters.Request(
        parameters=list(parameters)), 'set_parameters')
    assert all(r.successful for r in response.results), response


def test_the_state_is_predicted_by_the_latency_and_the_effort_is_that_of_the_prediction(
        running):
    """Holding at Q, a state (Q, V) with latency_compensation d: ~/error is against the
    prediction (Q + V d, V); the effort is the one the controller gives without the
    compensation for the predicted state itself."""
    harness, controller, robot = running
    cycle(harness, robot, Q, np.zeros(6))                  # holds Q from here
    d = 0.004
    set_live(harness, robot, double('latency_compensation', d))
    reference, error, output = cycle(harness, robot, Q, V)
    np.testing.assert_allclose(reference.position, Q, atol=1e-12)     # holding: no motion
    np.testing.assert_allclose(error.position, -V * d, atol=1e-12)
    np.testing.assert_allclose(error.velocity, -V, atol=1e-12)
    compensated = np.array(output.effort)
    set_live(harness, robot, double('latency_compensation', 0.0))
    _, error, output = cycle(harness, robot, Q + V * d, V)
    np.testing.assert_allclose(error.position, -V * d, atol=1e-12)
    np.testing.assert_allclose(output.effort, compensated, rtol=1e-12, atol=1e-12)
    assert np.abs(compensated - np.array(cycle(harness, robot, Q, V)[2].effort)).max() > 1e-3


def test_the_prediction_accelerates_as_the_reference_does(running):
    """During a move, a state (Q, V) with latency_compensation d: the state the controller
    acts on (~/reference less ~/error) is (Q + (V + a d / 2) d, V + a d), a the reference's
    acceleration in the middle of the horizon, its mean over it (that of the time the effort
    acts overshoots the velocity by the jerk times d² / 2)."""
    harness, controller, robot = running
    cycle(harness, robot, Q, np.zeros(6))
    robot.trajectory.publish(move_to(JOINTS, Q + 0.5, 2))
    harness.spin_until(lambda: not controller.sampler.plan.hold, 'the move accepted')
    d = 0.05
    set_live(harness, robot, double('latency_compensation', d))
    reference, error, _ = cycle(harness, robot, Q, V, after=0.3)
    a = controller.sampler.sample(robot.stamp * 1e-9 + 0.5 * d).accelerations
    end = controller.sampler.sample(robot.stamp * 1e-9 + d).accelerations
    assert np.abs(a).max() > 0.1                        # accelerating there
    assert np.abs(end - a).max() * d > 1e-4             # and not as at the horizon's end
    np.testing.assert_allclose(np.array(reference.position) - error.position,
                               Q + (V + 0.5 * a * d) * d, rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.array(reference.velocity) - error.velocity, V + a * d,
                               rtol=0, atol=1e-6)


def test_state_age_and_latency_move_the_reference_sampling_time(running):
    """During a move: the reference answering a state stamped s is the trajectory at
    s - state_age + latency_compensation: the one a state stamped there gets without them
    (to the rounding of epoch seconds, 2.4e-7 s, where the shifts move it by 1e-3 rad)."""
    harness, controller, robot = running
    cycle(harness, robot, Q, np.zeros(6))
    robot.trajectory.publish(move_to(JOINTS, Q + 0.2, 2))
    harness.spin_until(lambda: not controller.sampler.plan.hold, 'the move accepted')

    def reference(after):
        return np.array(cycle(harness, robot, Q, np.zeros(6), after=after)[0].position)
    plain = reference(0.3)                                      # at s
    set_live(harness, robot, double('state_age', 0.05))
    np.testing.assert_allclose(reference(0.05), plain, rtol=0, atol=1e-7)  # s + .05 - .05
    set_live(harness, robot, double('latency_compensation', 0.08))
    ahead = reference(0.02)                                     # s + 0.07 - 0.05 + 0.08
    set_live(harness, robot, double('state_age', 0.0), double('latency_compensation', 0.0))
    np.testing.assert_allclose(reference(0.03), ahead, rtol=0, atol=1e-7)  # s + 0.1
    assert np.abs(ahead - plain).max() > 1e-3                   # the move goes on


@pytest.mark.parametrize('name', ['latency_compensation', 'state_age'])
@pytest.mark.parametrize('value', [-0.001, 0.5])
def test_out_of_range_values_are_refused_naming_the_parameter(running, name, value):
    from rcl_interfaces.srv import SetParameters
    harness, controller, robot = running
    response = call_service(harness, robot.client, SetParameters.Request(
        parameters=[double(name, value)]), 'set_parameters')
    (result,) = response.results
    assert not result.successful and name in result.reason, result.reason
    assert getattr(controller, name) == 0.0


def test_after_a_stall_the_newest_state_is_answered_once(running):
    """The executable's on_state loop: five states queued while the controller was busy
    give one cycle, on the newest (the older ones of the same joints are superseded and
    counted); a message of other joints is still answered."""
    harness, controller, robot = running
    cycle(harness, robot, Q, np.zeros(6))
    outputs = len(robot.seen['output'])
    import rclpy
    listener = rclpy.create_node('listener', context=harness.context)   # not spun by the
    heard = []                                                      # harness: the queue
    listener.create_subscription(JointState, '/joint_states', heard.append, 10)
    alone = rclpy.executors.SingleThreadedExecutor(context=harness.context)
    alone.add_node(listener)
    try:
        for _ in range(6000):             # at most 60 s: the listener matched
            if robot.states.get_subscription_count() > 1:
                break
            alone.spin_once(timeout_sec=0.01)
        for k in range(5):
            robot.send(Q + 0.001 * k, np.zeros(6))
        for _ in range(1200):             # delivered here, so to the controller's reader too
            if len(heard) >= 5:
                break
            alone.spin_once(timeout_sec=0.05)
        assert len(heard) == 5
    finally:
        alone.shutdown()
        listener.destroy_node()
    passes = iter([True, True, False])
    controller.spin_on_state(harness.executor, lambda: next(passes))
    harness.spin_until(lambda: len(robot.seen['output']) > outputs, 'the cycle')
    harness.spin_for(20)
    assert len(robot.seen['output']) == outputs + 1
    np.testing.assert_allclose(controller._q, Q + 0.004, atol=0.0)
    assert controller.superseded_states == 4


def test_the_rest_is_served_right_after_a_cycle_never_between_a_state_and_its_cycle(
        running, monkeypatch):
    """The on_state loop serves the executor (parameters, actions, other topics: ≈ 0.5 ms
    of Python) only right after answering a state, once SERVICE_PERIOD has passed, so that
    it never holds up a state that is waiting; with no states, at most two SERVICE_PERIODs
    apart. Played on a made-up clock: states every 1 ms, answered in 0.3 ms, then none."""
    from types import SimpleNamespace
    from robot_dynamics.nodes.controller import node as controller_node
    harness, controller, robot = running
    clock = [1000.0]
    monkeypatch.setattr(controller_node, 'time', SimpleNamespace(monotonic=lambda: clock[0]))
    states_until = clock[0] + 0.1
    events = []

    def wait_and_take(wait_set, topics, timeout_ns):
        assert timeout_ns > 0
        arrival = (math.floor(clock[0] * 1000.0 + 1e-9) + 1) / 1000.0
        if arrival < states_until and arrival - clock[0] <= timeout_ns * 1e-9:
            clock[0] = arrival + 0.0003          # the cycle answering it
            events.append(('cycle', arrival))
        else:
            clock[0] += timeout_ns * 1e-9
            events.append(('timeout', clock[0]))

    monkeypatch.setattr(controller, '_wait_and_take', wait_and_take)
    executor = SimpleNamespace(spin_once=lambda timeout_sec: events.append(('serve',
                                                                            clock[0])))
    stop_at = states_until + 0.1
    controller.spin_on_state(executor, lambda: clock[0] < stop_at)
    served = [k for k, (what, _) in enumerate(events) if what == 'serve']
    assert len(served) >= 10
    for k in served:
        if events[k][1] < states_until:
            assert events[k - 1][0] == 'cycle', events[k - 3:k + 1]   # right after one
    times = [events[k][1] for k in served]
    cycles = [t for what, t in events if what == 'cycle']
    assert len(cycles) >= 95
    gaps = np.diff(times)
    assert gaps.max() <= 2 * SERVICE_PERIOD + 1e-9
    assert gaps[np.array(times[1:]) < states_until].max() <= SERVICE_PERIOD + 0.0015
    assert gaps.min() >= SERVICE_PERIOD - 1e-9


def test_superseding_keeps_the_newest_message_of_each_joint_set():
    from types import SimpleNamespace
    owner = SimpleNamespace(superseded_states=0)
    a1, b1, a2 = (SimpleNamespace(name=names) for names in (['a'], ['b'], ['a']))
    newest = ComputedTorqueController._newest_states
    assert newest(owner, [a1, b1, a2]) == [b1, a2] and owner.superseded_states == 1
    assert newest(owner, [a1]) == [a1] and newest(owner, []) == []


def test_a_moving_state_sent_again_is_as_old_as_its_first_stamp(running):
    """joint_state_broadcaster republishes the hardware's last values every cycle, also when
    the hardware had nothing new: a moving state (Q, V) sent again under a stamp 1 ms, then
    2 ms later is the measurement of the first stamp, predicted over latency_compensation
    plus that age; a new state is measured at its own stamp again."""
    harness, controller, robot = running
    cycle(harness, robot, Q, np.zeros(6))                  # holds Q from here
    d = 0.004
    set_live(harness, robot, double('latency_compensation', d))
    _, error, _ = cycle(harness, robot, Q, V)
    np.testing.assert_allclose(error.position, -V * d, atol=1e-12)
    for age in (0.001, 0.002):
        _, error, _ = cycle(harness, robot, Q, V, after=0.001)
        np.testing.assert_allclose(error.position, -V * (d + age), atol=1e-6)   # epoch
        #                                                  seconds: 2.4e-7 s apart
        np.testing.assert_allclose(error.velocity, -V, atol=1e-12)
    _, error, _ = cycle(harness, robot, Q + 0.01, V, after=0.001)          # a new state
    np.testing.assert_allclose(error.position, -0.01 - V * d, atol=1e-12)
    assert controller.repeated_states == 2


def test_a_repeated_state_is_aged_without_latency_compensation_too_and_at_most_the_limit(
        running):
    from robot_dynamics.nodes.controller.state_input import REPEAT_AGE_LIMIT
    harness, controller, robot = running
    cycle(harness, robot, Q, np.zeros(6))
    _, error, _ = cycle(harness, robot, Q, V)
    np.testing.assert_allclose(error.position, 0.0, atol=1e-12)            # not predicted
    _, error, _ = cycle(harness, robot, Q, V, after=0.003)
    np.testing.assert_allclose(error.position, -V * 0.003, atol=1e-6)
    _, error, _ = cycle(harness, robot, Q, V, after=0.5)                   # frozen values
    np.testing.assert_allclose(error.position, -V * REPEAT_AGE_LIMIT, atol=1e-6)


@pytest.mark.parametrize('case', ['at rest', 'other positions'])
def test_only_a_moving_state_with_every_value_equal_is_aged(running, case):
    """A resting state sent again (its time does not matter), or a new position under the
    same velocities (a steady motion measured anew), is taken at its own stamp."""
    harness, controller, robot = running
    cycle(harness, robot, Q, np.zeros(6))
    d = 0.004
    set_live(harness, robot, double('latency_compensation', d))
    v = np.zeros(6) if case == 'at rest' else V
    cycle(harness, robot, Q, v)
    q = Q if case == 'at rest' else Q + 1e-9
    _, error, _ = cycle(harness, robot, q, v, after=0.005)
    np.testing.assert_allclose(error.position, (Q - q) - v * d, atol=1e-12)
    assert controller._repeat_age == 0.0 and controller.repeated_states == 0


# ------------------------------------------------------------------ stamp_joint

def aged_cycle(harness, controller, robot, q, qd, age, after=0.01):
    """A state measured `age` s before the controller takes it: its stamp_joint says so,
    and the controller's clock reads 0.2 ms after the header stamp when it arrives."""
    taken = (robot.stamp + round(after * 1e9)) * 1e-9 + 0.0002
    controller._now = lambda: taken
    return cycle(harness, robot, q, qd, after, measured=taken - age)


def test_with_a_stamp_joint_each_state_is_predicted_over_its_own_age(stamped):
    """Holding Q, latency_compensation d: a state as old as the ages' running mean is
    predicted over d (~/error = -V d); one 10 ms older than the others over d plus its age
    less the mean (which moves 1/100 of the way towards it)."""
    harness, controller, robot = stamped
    aged_cycle(harness, controller, robot, Q, np.zeros(6), 0.001)      # holds Q
    d = 0.004
    set_live(harness, robot, double('latency_compensation', d))
    _, error, _ = aged_cycle(harness, controller, robot, Q, V, 0.001)
    np.testing.assert_allclose(error.position, -V * d, rtol=0, atol=1e-6)   # epoch
    #                                                  seconds: 2.4e-7 s apart
    _, error, _ = aged_cycle(harness, controller, robot, Q, V, 0.011)
    mean = 0.001 + (0.011 - 0.001) / 100
    np.testing.assert_allclose(error.position, -V * (d + 0.011 - mean), rtol=0, atol=1e-6)
    np.testing.assert_allclose(error.velocity, -V, atol=1e-12)
    assert controller._age_mean == pytest.approx(mean, abs=1e-6)
    from robot_dynamics.nodes.common.diagnostics import ControllerDiagnostics
    assert f'{mean * 1e3:.3f} ms mean' in ControllerDiagnostics._state_age(controller)


def test_with_a_stamp_joint_the_reference_is_sampled_when_the_effort_acts(stamped):
    """During a move: the reference answering a state measured at m, taken at m + age, is
    the trajectory at m + latency_compensation + age - mean age (here the receipt time plus
    latency_compensation less the mean age), whatever the header stamp and state_age say."""
    harness, controller, robot = stamped
    aged_cycle(harness, controller, robot, Q, np.zeros(6), 0.001)
    robot.trajectory.publish(move_to(JOINTS, Q + 0.2, 2))
    harness.spin_until(lambda: not controller.sampler.plan.hold, 'the move accepted')
    d = 0.02
    set_live(harness, robot, double('latency_compensation', d), double('state_age', 0.05))
    reference, _, _ = aged_cycle(harness, controller, robot, Q, np.zeros(6), 0.041, 0.3)
    mean = 0.001 + 0.04 / 100
    taken = robot.stamp * 1e-9 + 0.0002
    wanted = controller.sampler.sample(taken + d - mean).positions
    np.testing.assert_allclose(reference.position, wanted, rtol=0, atol=1e-7)
    off = controller.sampler.sample(taken - 0.041 + d).positions   # the age ignored
    assert np.abs(off - wanted).max() > 1e-4


@pytest.mark.parametrize('value, said', [
    (0.0, None),                       # ros2_control's initial value: nothing measured yet
    (math.nan, 'nan is not a time'),
    (-5.0, 'is not a time within 1 s of the node clock'),
])
def test_a_stamp_joint_without_a_time_leaves_the_header_stamp_and_state_age(
        stamped, monkeypatch, value, said):
    """The stamp joint at 0, NaN or far from the node clock: the state is taken at its
    header stamp less state_age (predicted over latency_compensation alone), and a value
    that is not a time is said naming the field and the parameter."""
    harness, controller, robot = stamped
    cycle(harness, robot, Q, np.zeros(6))
    d = 0.004
    set_live(harness, robot, double('latency_compensation', d))
    lines = []

    class Recorder:
        def __getattr__(self, level):
            return lambda text, **_: lines.append((level, text))
    monkeypatch.setattr(controller, 'get_logger', lambda: Recorder())
    now = robot.get_clock().now().nanoseconds * 1e-9
    _, error, _ = cycle(harness, robot, Q, V, measured=value if value != -5.0 else now - 5.0)
    np.testing.assert_allclose(error.position, -V * d, rtol=0, atol=1e-12)
    assert controller._age_mean is None
    warnings = [text for level, text in lines if level == 'warning']
    if said is None:
        assert not warnings
    else:
        (warning,) = warnings
        assert warning.startswith(f"joint_states.position[6] (stamp_joint '{STAMP}')")
        assert said in warning and 'the header stamp is used' in warning


def test_at_shutdown_the_repeated_states_are_said_taken_at_their_stamp_joint_time():
    """A moving state the broadcaster sends again (the same values, a newer header stamp)
    is counted; with a stamp joint its time is the joint's, and the shutdown line says so."""
    harness, controller, robot = start(f'stamp_joint:={STAMP}')
    lines = []
    try:
        aged_cycle(harness, controller, robot, Q, np.zeros(6), 0.001)
        aged_cycle(harness, controller, robot, Q, V, 0.001)
        taken = (robot.stamp + 1_000_000) * 1e-9 + 0.0002
        controller._now = lambda: taken
        cycle(harness, robot, Q, V, after=0.001, measured=taken - 0.0012)   # sent again
        assert controller.repeated_states == 1

        class Recorder:
            def __getattr__(self, level):
                return lambda text, **_: lines.append(text)
        controller.get_logger = lambda: Recorder()
    finally:
        harness.close()
    (line,) = [text for text in lines if 'repeated the previous one' in text]
    assert line.startswith('1 moving /joint_states') and 'the time its stamp_joint gives' in line


def test_a_stamp_joint_that_is_a_controlled_joint_stops_the_node_naming_it():
    from robot_dynamics.nodes.common.ros_params import ConfigurationError
    harness = RosHarness(PUMA)
    try:
        with pytest.raises(ConfigurationError, match="stamp_joint: 'joint_3' is a controlled"):
            ComputedTorqueController(context=harness.context, parameter_overrides=[
                Parameter('stamp_joint', value='joint_3')])
    finally:
        harness.close()
