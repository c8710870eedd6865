"""Trajectory semantics over real DDS (doc/trajectories.md): JointTrajectory messages in,
~/reference and efforts out, through the real computed_torque_controller node.

The test plays both the robot and the clock: the controllers run in `on_state` mode on
simulated time, and every cycle is one /clock tick followed by one /joint_states message
stamped with it, answered by one reference and one effort. So the sampled times are exact
and nothing depends on CPU load. Each trajectory message is followed until the controller's
/rosout line says it was accepted or rejected. The watchdog is off (`state_timeout` 0: the
test pauses between cycles; the watchdog has its own tests). One controller serves the
module; each test starts from a fresh hold (a one-point trajectory at time_from_start 0).
The core-level rules are tested in test_trajectory.py.
"""

import math

import numpy as np
import pytest
from builtin_interfaces.msg import Duration, Time
from rcl_interfaces.msg import Log
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.controller import ComputedTorqueController
from ros_testing import PUMA, RosHarness

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
NODE = 'computed_torque_controller'
PERIOD_NS = 20_000_000                  # one control cycle of simulated time: 20 ms
PERIOD = PERIOD_NS * 1e-9
HOME = np.array([0.3, -0.4, 0.3, 0.2, -0.6, 0.7])   # HOME ± DELTA inside the PUMA limits
DELTA = np.array([0.1, -0.2, 0.3, -0.15, 0.25, -0.05])  # a distinct move for every joint
KP = [100.0, 90.0, 80.0, 120.0, 110.0, 70.0]            # per-joint gains of the controllers
KD = [20.0, 19.0, 18.0, 22.0, 21.0, 17.0]
EFFORT_MAX = RobotModel.from_yaml(PUMA).effort_max      # effort_limits default to these
GOAL_TOLERANCE = 0.01                   # README defaults of constraints.*
STOPPED_VELOCITY_TOLERANCE = 0.01


def duration(seconds):
    nanoseconds = int(round(seconds * 1e9))
    return Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def stamp(nanoseconds):
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def point(positions, t, velocities=(), accelerations=()):
    return JointTrajectoryPoint(positions=[float(v) for v in positions],
                                velocities=[float(v) for v in velocities],
                                accelerations=[float(v) for v in accelerations],
                                time_from_start=duration(t))


def trajectory(points, joints=JOINTS, start_ns=0):
    msg = JointTrajectory(joint_names=list(joints), points=list(points))
    msg.header.stamp = stamp(start_ns)
    return msg


class Cycle:
    """What one control cycle published: q_d, q̇_d, q̈_d (~/reference), the effort command,
    and the state the test sent."""

    def __init__(self, t_ns, reference, effort, q, qd):
        self.t_ns = t_ns
        self.q_d = np.array(reference.position)
        self.qd_d = np.array(reference.velocity)
        self.qdd_d = np.array(reference.effort)     # README: ~/reference effort = q̈_d
        self.names = list(reference.name)
        self.effort = np.array(effort)
        self.q, self.qd = q, qd


class Driver(Node):
    """The robot and the clock of one controller (in namespace `ns`): publishes /clock and
    joint_states, sends trajectories; records references, efforts, status, goal_reached and
    the controller's /rosout lines."""

    def __init__(self, harness, controller, ns=''):
        super().__init__(f'trajectory_driver{ns.replace("/", "_")}', context=harness.context)
        self.harness, self.controller = harness, controller
        prefix = f'{ns}/{NODE}'
        self.logger_name = f'{ns.strip("/")}.{NODE}' if ns else NODE
        self.clock = self.create_publisher(Clock, '/clock', 10)
        self.states = self.create_publisher(JointState, f'{ns}/joint_states', 10)
        self.trajectory = self.create_publisher(JointTrajectory, f'{prefix}/joint_trajectory',
                                                10)
        self.references, self.efforts, self.logs = {}, [], []
        self.status, self.goal_reached = [], []
        self.create_subscription(JointState, f'{prefix}/reference', self._on_reference, 1000)
        self.create_subscription(Float64MultiArray, f'{ns}/effort_controller/commands',
                                 lambda m: self.efforts.append(list(m.data)), 1000)
        latched = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, f'{prefix}/status',
                                 lambda m: self.status.append(m.data), latched)
        self.create_subscription(Bool, f'{prefix}/goal_reached',
                                 lambda m: self.goal_reached.append(m.data), latched)
        rosout = QoSProfile(depth=1000, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(Log, '/rosout', self._on_log, rosout)
        self.now_ns = 0

    def _on_reference(self, msg):
        self.references[msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec] = msg

    def _on_log(self, msg):
        if msg.name == self.logger_name:
            self.logs.append(msg.msg)

    def spin_until(self, predicate, what, wall_limit=30.0):
        self.harness.spin_until(predicate, what, wall_limit)

    def await_status(self, value, since=None):
        """Spin until ~/status says `value` (latest, or any since index `since`); the topic
        is separate from ~/reference, so it may arrive a little after the cycle's reference."""
        def seen():
            return value in self.status[since:] if since is not None else (
                self.status and self.status[-1] == value)
        self.spin_until(seen, f'status {value!r}', wall_limit=10.0)

    def set_clock(self, t_ns):
        """Simulated time t_ns on the controller's clock (ticks sent until it shows)."""
        def arrived():
            self.clock.publish(Clock(clock=stamp(t_ns)))
            return self.controller.get_clock().now().nanoseconds == t_ns
        self.spin_until(arrived, f'the clock at {t_ns} ns')
        self.now_ns = t_ns

    def cycle(self, q, qd=None):
        """Advance the clock one period and send the state (q, q̇) stamped with it: one
        control cycle. Returns what the controller published in that cycle."""
        t_ns = self.now_ns + PERIOD_NS
        self.set_clock(t_ns)
        q = np.array(q, dtype=float)
        qd = np.zeros(6) if qd is None else np.array(qd, dtype=float)
        count = len(self.efforts)
        msg = JointState(name=JOINTS, position=q.tolist(), velocity=qd.tolist())
        msg.header.stamp = stamp(t_ns)
        self.states.publish(msg)
        self.spin_until(lambda: t_ns in self.references and len(self.efforts) > count,
                        f'the cycle at {t_ns} ns')
        return Cycle(t_ns, self.references[t_ns], self.efforts[count], q, qd)

    def follow(self, cycles, q_of=None):
        """`cycles` cycles in which the robot is where the reference was last cycle (or at
        q_of(previous cycle)); returns them."""
        out = []
        q = self.last.q_d
        for _ in range(cycles):
            out.append(self.cycle(q if q_of is None else q_of(out)))
            q = out[-1].q_d
        self.last = out[-1] if out else self.last
        return out

    def send(self, msg):
        """Publish a trajectory; returns the controller's log line about it."""
        count = len(self.logs)
        self.trajectory.publish(msg)

        def verdict():
            return [line for line in self.logs[count:] if line.startswith('joint_trajectory ')]
        self.spin_until(verdict, 'the accept/reject log line')
        return verdict()[0]

    def hold(self, positions):
        """A fresh start: step the reference to `positions` (a point at time_from_start 0)
        and run one cycle there."""
        line = self.send(trajectory([point(positions, 0.0)]))
        assert 'accepted' in line, line
        self.last = self.cycle(positions)
        np.testing.assert_array_equal(self.last.q_d, positions)
        self.await_status('finished')
        return self.last


def start_controller(harness, ns='', **parameters):
    overrides = [Parameter('use_sim_time', value=True),
                 Parameter('control_mode', value='on_state'),
                 Parameter('state_timeout', value=0.0),
                 Parameter('gains.kp', value=KP), Parameter('gains.kd', value=KD),
                 Parameter('command_topic', value=f'{ns}/effort_controller/commands')]
    overrides += [Parameter(name, value=value) for name, value in parameters.items()]
    cli = ['--ros-args', '-r', f'__ns:={ns}'] if ns else None
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=overrides, cli_args=cli))
    driver = harness.add(Driver(harness, controller, ns))
    driver.spin_until(lambda: driver.states.get_subscription_count() > 0
                      and driver.trajectory.get_subscription_count() > 0
                      and driver.count_publishers(f'{ns}/{NODE}/reference') > 0
                      and driver.count_publishers(f'{ns}/effort_controller/commands') > 0,
                      'discovery')
    return driver


@pytest.fixture(scope='module')
def harness():
    harness = RosHarness(PUMA)
    yield harness
    harness.close()


@pytest.fixture(scope='module')
def robot(harness):
    """The default controller (allow_partial_joints_goal false), holding HOME."""
    driver = start_controller(harness)
    driver.set_clock(1_000_000_000)
    driver.last = driver.cycle(HOME)
    driver.spin_until(lambda: any('all joints seen' in line for line in driver.logs),
                      'the start-up log line on /rosout')
    return driver


def move(goal, seconds, joints=JOINTS, start_ns=0):
    """A one-point, positions-only move (the C2 spline rule of the README)."""
    return trajectory([point(goal, seconds)], joints, start_ns)


def heads_for(cycle, before, goal, joints=range(6)):
    """Every listed joint's reference moved from `before` strictly towards `goal`."""
    return all((cycle.q_d[j] - before[j]) * (goal[j] - before[j]) > 0.0 for j in joints)


# ---------------------------------------------------------------------- start time

def test_stamp_zero_starts_moving_at_once(robot):
    robot.hold(HOME)
    goal = HOME + DELTA
    assert 'accepted' in robot.send(move(goal, 0.4))
    first = robot.follow(1)[0]
    assert heads_for(first, HOME, goal)
    assert np.all(first.qd_d * DELTA > 0.0)
    robot.await_status('running')
    rest = robot.follow(round(0.4 / PERIOD))
    np.testing.assert_allclose(rest[-1].q_d, goal, rtol=0, atol=1e-12)


def test_future_stamp_holds_the_reference_until_then_then_moves(robot):
    robot.hold(HOME)
    goal = HOME + DELTA
    begin_ns = robot.now_ns + 5 * PERIOD_NS
    mark = len(robot.status)
    assert 'accepted' in robot.send(move(goal, 0.4, start_ns=begin_ns))
    waiting = robot.follow(5)                  # up to and including the start time
    assert waiting[-1].t_ns == begin_ns
    for cycle in waiting:
        np.testing.assert_allclose(cycle.q_d, HOME, rtol=0, atol=1e-12)
        np.testing.assert_allclose(cycle.qd_d, np.zeros(6), rtol=0, atol=1e-12)
    robot.await_status('waiting', since=mark)
    end = robot.follow(round(0.4 / PERIOD))
    assert heads_for(end[0], HOME, goal)
    robot.await_status('running', since=mark)
    # the move takes its full duration from the stamp, not from the arrival
    assert end[-1].t_ns == begin_ns + round(0.4e9)
    np.testing.assert_allclose(end[-1].q_d, goal, rtol=0, atol=1e-12)
    assert np.any(np.abs(end[-2].q_d - goal) > 1e-6)   # not there one cycle earlier


def test_trajectory_ending_in_the_past_is_rejected_and_the_reference_holds(robot):
    robot.hold(HOME)
    status = list(robot.status)
    past_ns = robot.now_ns - 800_000_000
    line = robot.send(move(HOME + DELTA, 0.5, start_ns=past_ns))
    assert 'rejected' in line and 'in the past' in line, line
    for cycle in robot.follow(5):
        np.testing.assert_array_equal(cycle.q_d, HOME)
    robot.harness.spin_for(10)
    assert robot.status == status              # no new status: still 'finished' at HOME


# ---------------------------------------------------------------------- joint names

def test_shuffled_joint_order_maps_each_joint_by_name(robot):
    robot.hold(HOME)
    goal = HOME + DELTA
    order = [3, 0, 5, 1, 4, 2]
    msg = move(goal[order], 0.3, joints=[JOINTS[j] for j in order])
    assert 'accepted' in robot.send(msg)
    cycles = robot.follow(round(0.3 / PERIOD))
    assert all(c.names == JOINTS for c in cycles)
    assert heads_for(cycles[0], HOME, goal)
    np.testing.assert_allclose(cycles[-1].q_d, goal, rtol=0, atol=1e-12)


def test_partial_joint_set_is_rejected_by_default(robot):
    robot.hold(HOME)
    line = robot.send(move((HOME + DELTA)[[2, 0]], 0.3, joints=['joint_3', 'joint_1']))
    assert 'rejected' in line and 'allow_partial_joints_goal' in line, line
    for cycle in robot.follow(5):
        np.testing.assert_array_equal(cycle.q_d, HOME)


def test_partial_joint_set_with_allow_partial_joints_goal_moves_those_and_holds_others(
        harness, robot):
    partial = start_controller(harness, '/partial', allow_partial_joints_goal=True)
    partial.set_clock(robot.now_ns)
    try:
        partial.last = partial.cycle(HOME)
        goal = HOME + DELTA
        line = partial.send(move(goal[[2, 0]], 0.3, joints=['joint_3', 'joint_1']))
        assert 'accepted' in line, line
        cycles = partial.follow(round(0.3 / PERIOD))
    finally:
        robot.now_ns = partial.now_ns       # the module's one simulated clock runs on
    assert heads_for(cycles[0], HOME, goal, joints=[0, 2])
    np.testing.assert_allclose(cycles[-1].q_d[[0, 2]], goal[[0, 2]], rtol=0, atol=1e-12)
    for cycle in cycles:
        np.testing.assert_array_equal(cycle.q_d[[1, 3, 4, 5]], HOME[[1, 3, 4, 5]])
        np.testing.assert_array_equal(cycle.qd_d[[1, 3, 4, 5]], np.zeros(4))


# ---------------------------------------------------------------------- bad messages

def bad_trajectories():
    goal = HOME - DELTA
    nan, far = goal.copy(), goal.copy()
    nan[4] = math.nan
    far[2] = 2.0                       # joint_3 allows at most 0.785 rad
    return {
        'unknown name': (move(goal, 0.5, joints=JOINTS[:5] + ['elbow']), 'unknown joint'),
        'duplicate name': (move(goal, 0.5, joints=JOINTS[:5] + ['joint_2']), 'duplicate'),
        'length mismatch': (move(goal[:5], 0.5), 'points[0].positions'),
        'non-finite value': (move(nan, 0.5), 'not finite'),
        'inf velocity': (trajectory([point(goal, 0.5, [0, 0, math.inf, 0, 0, 0])]),
                         'not finite'),
        'non-increasing time_from_start': (
            trajectory([point(HOME, 0.5), point(goal, 0.5)]), 'strictly increase'),
        'outside the position limits': (move(far, 0.5), 'outside'),
    }


RUNNING = 0.6          # s: the motion the bad messages try to disturb
INJECT_AT = 10         # cycles into it


@pytest.fixture(scope='module')
def undisturbed(robot):
    """References of the running motion, relative to its start, with nothing injected."""
    robot.hold(HOME)
    assert 'accepted' in robot.send(move(HOME + DELTA, RUNNING))
    return robot.follow(round(RUNNING / PERIOD) + 3)


@pytest.mark.parametrize('case', list(bad_trajectories()))
def test_bad_trajectory_is_rejected_while_the_running_motion_continues_undisturbed(
        robot, undisturbed, case):
    message, reason = bad_trajectories()[case]
    robot.hold(HOME)
    assert 'accepted' in robot.send(move(HOME + DELTA, RUNNING))
    before = robot.follow(INJECT_AT)
    line = robot.send(message)
    assert 'rejected' in line and reason in line, line
    after = robot.follow(len(undisturbed) - INJECT_AT)
    references = np.array([c.q_d for c in before + after])
    expected = np.array([c.q_d for c in undisturbed])
    np.testing.assert_allclose(references, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(references[-1], HOME + DELTA, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------- replacing, stopping

def max_step_allowed(a, b):
    """|q_d(t + h) − q_d(t)| ≤ h·max|q̇_d| + h²·max|q̈_d| over the step, estimated from the
    two samples with a margin of 2 (the reference's speed × period; a jump is far above)."""
    speed = np.maximum(np.abs(a.qd_d), np.abs(b.qd_d))
    acceleration = np.maximum(np.abs(a.qdd_d), np.abs(b.qdd_d))
    return 2.0 * (PERIOD * speed + PERIOD**2 * acceleration) + 1e-12


def test_new_trajectory_replacing_a_running_one_does_not_jump_the_reference(robot):
    robot.hold(HOME)
    assert 'accepted' in robot.send(move(HOME + DELTA, 0.6))
    cycles = robot.follow(12)                  # mid-move, at speed
    assert np.max(np.abs(cycles[-1].qd_d)) > 0.3
    other = HOME - DELTA                      # the opposite direction
    assert 'accepted' in robot.send(move(other, 0.5))
    cycles += robot.follow(round(0.5 / PERIOD))
    for a, b in zip(cycles, cycles[1:]):
        assert np.all(np.abs(b.q_d - a.q_d) <= max_step_allowed(a, b)), (a.t_ns, a.q_d, b.q_d)
    np.testing.assert_allclose(cycles[-1].q_d, other, rtol=0, atol=1e-12)


def test_step_check_detects_a_jump(robot):
    """The bound above is not vacuous: a deliberate step (a first point at
    time_from_start 0, README) violates it."""
    robot.hold(HOME)
    assert 'accepted' in robot.send(move(HOME + DELTA, 0.6))
    cycles = robot.follow(12)
    assert 'accepted' in robot.send(trajectory([point(HOME + 0.5 * DELTA, 0.0),
                                                point(HOME - DELTA, 0.5)]))
    cycles += robot.follow(2)
    steps_ok = [np.all(np.abs(b.q_d - a.q_d) <= max_step_allowed(a, b))
                for a, b in zip(cycles, cycles[1:])]
    assert not all(steps_ok)


def test_empty_trajectory_holds_the_current_reference_position(robot):
    robot.hold(HOME)
    assert 'accepted' in robot.send(move(HOME + DELTA, 0.6))
    last = robot.follow(12)[-1]                # sampled at the clock time of the stop
    assert np.max(np.abs(last.qd_d)) > 0.3
    assert 'accepted' in robot.send(JointTrajectory(joint_names=JOINTS))
    for cycle in robot.follow(10):
        np.testing.assert_allclose(cycle.q_d, last.q_d, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(cycle.qd_d, np.zeros(6))
        np.testing.assert_array_equal(cycle.qdd_d, np.zeros(6))
    robot.await_status('holding')


# ---------------------------------------------------------------------- after the last point

def settle(robot, value):
    """Spin until the latest ~/goal_reached is `value` (it is published on change)."""
    robot.spin_until(lambda: robot.goal_reached and robot.goal_reached[-1] is value,
                     f'goal_reached {value}')


def test_after_the_last_point_the_reference_holds_it_and_goal_reached_needs_tolerances(
        robot):
    robot.hold(HOME)
    goal = HOME + DELTA
    assert 'accepted' in robot.send(move(goal, 0.3))
    robot.follow(round(0.3 / PERIOD) - 1, q_of=lambda out: HOME)   # the arm lags behind
    settle(robot, False)
    robot.await_status('running')
    near, offset = goal.copy(), 0.5 * GOAL_TOLERANCE
    near[1] += offset
    outside = goal.copy()
    outside[4] -= 2.0 * GOAL_TOLERANCE
    slow = np.full(6, 0.5 * STOPPED_VELOCITY_TOLERANCE)
    fast = slow.copy()
    fast[3] = -2.0 * STOPPED_VELOCITY_TOLERANCE
    cases = [(outside, slow, False), (near, fast, False), (near, slow, True),
             (outside, np.zeros(6), False), (goal, np.zeros(6), True)]
    for q, qd, reached in cases:
        cycles = [robot.cycle(q, qd) for _ in range(3)]
        for cycle in cycles:                   # after the last point: hold it, at rest
            np.testing.assert_allclose(cycle.q_d, goal, rtol=0, atol=1e-12)
            np.testing.assert_allclose(cycle.qd_d, np.zeros(6), rtol=0, atol=1e-12)
            np.testing.assert_allclose(cycle.qdd_d, np.zeros(6), rtol=0, atol=1e-12)
        settle(robot, reached)
        robot.harness.spin_for(10)             # a late opposite value would show up now
        assert robot.goal_reached[-1] is reached, (q, qd)
        robot.await_status('finished')
    robot.last = cycles[-1]


# ---------------------------------------------------------------------- effort out

def expected_effort(model, cycle):
    """[LEE] eq. 4.4 from the published reference and the state the test sent, with the
    readable reference Newton–Euler (the node runs the generated kernels), then clipped."""
    u = (cycle.qdd_d + np.array(KD) * (cycle.qd_d - cycle.qd)
         + np.array(KP) * (cycle.q_d - cycle.q))
    previous = dynamics.get_backend()
    dynamics.set_backend('reference')
    try:
        tau = dynamics.inverse_dynamics(model, cycle.q, cycle.qd, u)
    finally:
        dynamics.set_backend(previous)
    return tau, np.clip(tau, -EFFORT_MAX, EFFORT_MAX)


def test_effort_is_the_computed_torque_law_of_the_published_reference_and_sent_state(robot):
    model = RobotModel.from_yaml(PUMA)
    rng = np.random.default_rng(4)
    robot.hold(HOME)
    assert 'accepted' in robot.send(move(HOME + DELTA, 0.4))
    cycles = [robot.last]
    for _ in range(round(0.4 / PERIOD) + 2):   # the arm near the reference, perturbed
        cycles.append(robot.cycle(cycles[-1].q_d + rng.uniform(-0.01, 0.01, 6),
                                  cycles[-1].qd_d + rng.uniform(-0.2, 0.2, 6)))
    robot.last = cycles[-1]
    assert any(np.max(np.abs(c.qdd_d)) > 1.0 for c in cycles)     # q̈_d fed forward
    for cycle in cycles:
        tau, clipped = expected_effort(model, cycle)
        assert np.array_equal(tau, clipped)    # within the limits: the law itself
        scale = np.max(np.abs(tau))
        np.testing.assert_allclose(cycle.effort, tau, rtol=1e-9, atol=1e-9 * scale)


def test_effort_beyond_the_limits_is_clipped_to_them(robot):
    model = RobotModel.from_yaml(PUMA)
    robot.hold(HOME)
    far = HOME + np.array([-0.9, 0.9, -0.9, 0.9, -0.9, 0.9])     # a large position error
    cycle = robot.cycle(far, np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]))
    robot.last = cycle
    tau, clipped = expected_effort(model, cycle)
    assert np.any(np.abs(tau) > EFFORT_MAX) and np.any(np.abs(tau) < EFFORT_MAX)
    scale = np.max(np.abs(tau))
    np.testing.assert_allclose(cycle.effort, clipped, rtol=1e-9, atol=1e-9 * scale)
