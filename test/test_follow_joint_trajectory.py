"""The FollowJointTrajectory action and ~/controller_state over real DDS (doc/action.md),
driven by an rclpy ActionClient as MoveIt's controller handle drives JTC: send a goal, wait
for acceptance, read the feedback, wait for the result.

The loop is the shipped one (config/sim.yaml: plant and controller in on_state lock-step on
simulated time, as fast as the CPU allows), so motions and outcomes do not depend on CPU
load. Each test starts from the state the previous one left; every goal is built from the
measured position. The whole module skips only when control_msgs cannot be imported.
"""

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip('control_msgs', reason='control_msgs is not built in this environment '
                                           '(tools/dev.py builds it; needs cmake and a C '
                                           'compiler)')
from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Duration, Time  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import (JointComponentTolerance, JointTolerance,  # noqa: E402
                              JointTrajectoryControllerState)
from rclpy.action import ActionClient, ActionServer  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import (JointTrajectory, JointTrajectoryPoint,  # noqa: E402
                                 MultiDOFJointTrajectoryPoint)

from robot_dynamics.nodes.trajectories import follow_joint_trajectory  # noqa: E402
from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.send_trajectory import trajectory_message  # noqa: E402
from robot_dynamics.trajectories.profiles import sample_profile  # noqa: E402
from ros_testing import lockstep_loop, PUMA, REPO, RosHarness, SIM  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'
ACTION = f'{CONTROLLER}/follow_joint_trajectory'
Result = FollowJointTrajectory.Result
GOAL_TOLERANCE = 0.01           # constraints.goal_tolerance default (README)
KP, KD = 100.0, 20.0            # config/sim.yaml gains: critical damping, ωn = 10 s⁻¹
# After a cancel or an abort the reference holds the measured position with zero velocity;
# the critically damped error then obeys e(t) = v0 t exp(−ωn t), at most v0 / (e ωn): for
# the 1 rad/s moves here, 0.037 rad. The bound asserted leaves room for the nonlinear arm.
HOLD_BOUND = 0.06
SIM_1KHZ = os.path.join(REPO, 'config', 'sim_1khz.yaml')
PUMA_DEMO = os.path.join(REPO, 'config', 'sim_puma560.yaml')   # its widened limits
RATE_AND_WATCHDOG = os.path.join(REPO, 'test', 'data', 'executables_200hz.yaml')


def duration(seconds):
    nanoseconds = int(round(seconds * 1e9))
    return Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


class MoveItLikeClient(Node):
    """Sends goals with an ActionClient, records feedback per goal and every effort."""

    def __init__(self, context):
        super().__init__('follow_joint_trajectory_client', context=context)
        deep = QoSProfile(depth=follow_joint_trajectory.REQUEST_DEPTH,
                          reliability=ReliabilityPolicy.RELIABLE)
        self.client = ActionClient(self, FollowJointTrajectory, ACTION,
                                   goal_service_qos_profile=deep,
                                   result_service_qos_profile=deep)
        self.feedback = {}
        self.efforts = []
        self.states = []
        self.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                 lambda m: self.efforts.append(list(m.data)), 1000)
        self.create_subscription(JointTrajectoryControllerState,
                                 f'{CONTROLLER}/controller_state', self.states.append, 1000)
        self.topic = self.create_publisher(JointTrajectory, f'{CONTROLLER}/joint_trajectory',
                                           10)

    def send(self, goal):
        """The send_goal future; its feedback goes to self.feedback[goal id]."""
        return self.client.send_goal_async(goal, feedback_callback=self._on_feedback)

    def _on_feedback(self, msg):
        self.feedback.setdefault(bytes(msg.goal_id.uuid), []).append(msg.feedback)

    def handshake(self, harness):
        """Once the server is ready: send an empty goal (refused at once, changing nothing)
        every second until one is answered. The server may take our request before it has
        matched our response reader, and DDS then drops its response (seen on loaded
        machines); after one answer both directions are matched."""
        harness.spin_until(self.client.server_is_ready, 'the action server')
        while True:
            future = self.send(FollowJointTrajectory.Goal())
            sent = time.monotonic()
            harness.spin_until(lambda: future.done() or time.monotonic() - sent > 1.0,
                               'a goal response')
            if future.done():
                return


@pytest.fixture(scope='module')
def loop():
    harness, plant, controller = lockstep_loop(integration_step=0.002)
    client = harness.add(MoveItLikeClient(harness.context))
    harness.spin_until(lambda: client.client.server_is_ready()
                       and client.topic.get_subscription_count() > 0
                       and controller._ready, 'the action server and the loop')
    client.handshake(harness)
    # past 2 s of simulated time a 1 s trajectory stamped at 1 µs ended long ago
    harness.spin_until(lambda: plant.sim_time > 2.0, '2 s of simulated time')
    yield harness, plant, controller, client
    harness.close()


def run(loop, goal):
    """Send `goal` and wait for its acceptance: the goal handle."""
    harness, _, _, client = loop
    future = client.send(goal)
    harness.spin_until(future.done, 'the goal response')
    handle = future.result()
    assert handle.accepted
    return handle


def outcome(loop, handle):
    """Wait for the result: (status, Result)."""
    harness = loop[0]
    future = handle.get_result_async()
    harness.spin_until(future.done, 'the result')
    response = future.result()
    return response.status, response.result


def move(plant, goal_positions, seconds=1.0, points=20, joints=JOINTS):
    """A goal: a quintic move from the measured position."""
    start = [float(plant.q[JOINTS.index(j)]) if j in JOINTS else 0.0 for j in joints]
    command = sample_profile('quintic', start, goal_positions, seconds, points, joints)
    return FollowJointTrajectory.Goal(trajectory=trajectory_message(command))


def away(plant, offsets):
    return (np.asarray(plant.q) + np.asarray(offsets)).tolist()


def settle(loop, seconds):
    """Spin until `seconds` of simulated time have passed."""
    harness, plant = loop[0], loop[1]
    end = plant.sim_time + seconds
    harness.spin_until(lambda: plant.sim_time >= end, f'{seconds} s of simulated time')


MOVE = [0.3, -0.2, 0.25, 0.4, -0.5, 0.6]    # rad, a distinct offset per joint


# The next two tests run their own controllers under the same names, and come before the
# module's loop exists: goals they send would otherwise also queue up at its action server.

def start_executable(module):
    """A node executable as `ros2 run` starts it, with config/sim_1khz.yaml on the wall
    clock: the controller then runs its own on_state loop and serves the action between
    states. At 200 Hz and with a 0.5 s state_timeout, so that a loaded test machine does
    not trip the watchdog (which would rightly abort the goal). Those two are in a file
    after config/sim_1khz.yaml: its node sections name them, and a file's node-specific
    value wins over a global `-p` (both had been ignored: 1 kHz, 0.1 s)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    return subprocess.Popen(
        [sys.executable, '-m', f'robot_dynamics.nodes.{module}', '--ros-args',
         '--params-file', PUMA, '--params-file', PUMA_DEMO, '--params-file', SIM_1KHZ,
         '--params-file', RATE_AND_WATCHDOG,
         '-p', 'use_sim_time:=false'],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_the_controller_executable_serves_the_action_from_its_own_loop():
    harness = RosHarness()
    processes = [start_executable('plant'), start_executable('controller')]
    try:
        client = harness.add(MoveItLikeClient(harness.context))
        harness.spin_until(lambda: client.client.server_is_ready() and len(client.efforts) > 0,
                           'the executables running')
        client.handshake(harness)
        goal = FollowJointTrajectory.Goal(trajectory=JointTrajectory(
            joint_names=JOINTS, points=[JointTrajectoryPoint(
                positions=[1.4, 0.1, 1.4, 0.1, 0.1, 0.1], time_from_start=duration(1.0))]))
        future = client.send(goal)
        harness.spin_until(future.done, 'the goal response')
        result = future.result().get_result_async()
        harness.spin_until(result.done, 'the result')
        assert result.result().status == GoalStatus.STATUS_SUCCEEDED, (
            result.result().result.error_string)
        feedback = client.feedback[bytes(future.result().goal_id.uuid)]
        assert len(feedback) >= 10               # 20 Hz over 1 s
        refused = client.send(FollowJointTrajectory.Goal())
        harness.spin_until(refused.done, 'the refused goal response')
        outcome = refused.result().get_result_async()
        harness.spin_until(outcome.done, 'the refusal')
        assert outcome.result().result.error_code == Result.INVALID_GOAL
        assert 'trajectory.points: empty' in outcome.result().result.error_string
        # A goal runs while 200 hostile goals arrive at once: the own loop keeps answering
        # states (else the 0.5 s watchdog would abort the goal) and refuses every one.
        class Now:
            q = np.array([1.4, 0.1, 1.4, 0.1, 0.1, 0.1])
        running = client.send(move(Now, [1.2, 0.2, 1.3, 0.0, 0.3, 0.2], seconds=2.0))
        harness.spin_until(running.done, 'the goal response')
        result = running.result().get_result_async()      # kept 10 s after the end only
        burst = [client.send(goal) for goal in hostile_goals(Now, np.random.default_rng(7),
                                                             200)]
        harness.spin_until(lambda: all(f.done() for f in burst), 'the 200 goal responses')
        results = [f.result().get_result_async() for f in burst]
        harness.spin_until(lambda: all(r.done() for r in results), 'the 200 results')
        succeeded = [(k, r.result().result.error_string) for k, r in enumerate(results)
                     if r.result().result.error_code == Result.SUCCESSFUL]
        assert not succeeded, succeeded
        harness.spin_until(result.done, 'the result of the running goal')
        assert result.result().status == GoalStatus.STATUS_SUCCEEDED, (
            result.result().result.error_string)
        assert np.all(np.isfinite(client.efforts))
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
        for process in processes:
            try:
                output = process.communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                process.kill()
                output = process.communicate()[0]
            assert process.returncode == 0, output
        harness.close()


def test_the_managed_controller_refuses_goals_unless_active_and_deactivate_aborts_one():
    from robot_dynamics.nodes.managed_controller import ManagedComputedTorqueController
    from robot_dynamics.nodes.plant import PlantSimulator
    harness = RosHarness(PUMA, SIM, ros_args=['-p', 'real_time_factor:=0.0',
                                              '-p', 'integration_step:=0.005'])
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        controller = harness.add(ManagedComputedTorqueController(
            context=harness.context,
            parameter_overrides=[Parameter('use_sim_time', value=True)]))
        client = harness.add(MoveItLikeClient(harness.context))
        loop = (harness, plant, controller, client)
        controller.trigger_configure()
        client.handshake(harness)
        status, result = outcome(loop, run(loop, move(plant, away(plant, MOVE))))
        assert result.error_code == Result.INVALID_GOAL
        assert 'the controller is inactive (activate it first)' in result.error_string
        controller.trigger_activate()
        harness.spin_until(lambda: controller._ready, 'the controller holding')
        handle = run(loop, move(plant, away(plant, MOVE), seconds=1.5))
        wait_for_progress(loop, handle, 0.3)
        controller.trigger_deactivate()
        status, result = outcome(loop, handle)
        assert status == GoalStatus.STATUS_ABORTED
        assert 'deactivated' in result.error_string
        controller.trigger_cleanup()
        assert not any(isinstance(w, ActionServer) for w in controller.waitables)
    finally:
        harness.close()


def test_goal_succeeds_with_final_error_inside_goal_tolerance_and_feedback(loop):
    harness, plant, controller, client = loop
    target = away(plant, MOVE)
    handle = run(loop, move(plant, target, seconds=1.5))
    status, result = outcome(loop, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert result.error_code == Result.SUCCESSFUL
    assert np.all(np.abs(np.asarray(plant.q) - target) <= GOAL_TOLERANCE)
    feedback = client.feedback[bytes(handle.goal_id.uuid)]
    stamps = [f.header.stamp.sec + f.header.stamp.nanosec * 1e-9 for f in feedback]
    # action_monitor_rate 20 Hz of simulated time over a 1.5 s move
    assert 25 <= len(feedback) <= 33
    assert np.all(np.diff(stamps) >= 0.99 / 20.0 - 1e-9)
    for f in feedback:
        assert list(f.joint_names) == JOINTS
        np.testing.assert_allclose(np.subtract(f.desired.positions, f.actual.positions),
                                   f.error.positions, atol=1e-12)
        np.testing.assert_allclose(np.subtract(f.desired.velocities, f.actual.velocities),
                                   f.error.velocities, atol=1e-12)
    if hasattr(feedback[0], 'index'):     # control_msgs 6 (Kilted); Jazzy's 5.8 has none
        indices = [f.index for f in feedback]
        assert indices == sorted(indices) and indices[0] == 0 and indices[-1] == 19


def test_controller_state_carries_reference_feedback_error_and_effort(loop):
    harness, plant, controller, client = loop
    client.states.clear()
    settle(loop, 0.1)
    assert len(client.states) >= 9         # every cycle (state_publish_rate 0) at 100 Hz
    state = client.states[-1]
    assert list(state.joint_names) == JOINTS
    np.testing.assert_allclose(np.subtract(state.reference.positions, state.feedback.positions),
                               state.error.positions, atol=1e-12)
    assert len(state.output.effort) == 6 and np.all(np.isfinite(state.output.effort))
    assert any(list(state.output.effort) == e for e in client.efforts[-20:])
    assert state.speed_scaling_factor == 1.0


def bad_goals(plant):
    """(goal, expected error_code, words the error_string must contain)."""
    def goal_with(**changes):
        goal = move(plant, away(plant, MOVE))
        for name, value in changes.items():
            setattr(goal, name, value)
        return goal

    unknown = move(plant, [0.1, 0.2], joints=['shoulder', 'elbow'])
    duplicate = goal_with()
    duplicate.trajectory.joint_names[1] = 'joint_1'
    partial = move(plant, away(plant, MOVE)[:3], joints=JOINTS[:3])
    nan = goal_with()
    nan.trajectory.points[1].positions[2] = math.nan
    times = goal_with()
    times.trajectory.points[3].time_from_start = times.trajectory.points[2].time_from_start
    empty = goal_with()
    empty.trajectory.points = []
    limits = goal_with()
    limits.trajectory.points[-1].positions[0] = 9.0
    multi_dof = goal_with()
    multi_dof.multi_dof_trajectory.joint_names = ['base']
    multi_dof.multi_dof_trajectory.points = [MultiDOFJointTrajectoryPoint()]
    old = goal_with()
    old.trajectory.header.stamp = Time(sec=0, nanosec=1000)        # ended long ago
    bad_tolerance = goal_with(path_tolerance=[JointTolerance(name='joint_2', position=-2.0)])
    unknown_tolerance = goal_with(goal_tolerance=[JointTolerance(name='wrist', position=0.1)])
    component = goal_with(component_path_tolerance=[JointComponentTolerance(
        joint_name='joint_1', component=JointComponentTolerance.ROTATION, position=0.1)])
    bad_time = goal_with(goal_time_tolerance=Duration(sec=-3, nanosec=0))
    return [
        (unknown, Result.INVALID_JOINTS, ["trajectory.joint_names[0]", "'shoulder'"]),
        (duplicate, Result.INVALID_JOINTS, ['trajectory.joint_names[1]', 'duplicate']),
        (partial, Result.INVALID_JOINTS, ['joint_4', 'allow_partial_joints_goal']),
        (nan, Result.INVALID_GOAL, ["trajectory.points[1].positions[2]", "'joint_3'", 'nan']),
        (times, Result.INVALID_GOAL, ['trajectory.points[3].time_from_start']),
        (empty, Result.INVALID_GOAL, ['trajectory.points', 'empty']),
        (limits, Result.INVALID_GOAL, ['.positions[0]', "'joint_1'", '9.0', 'outside']),
        (multi_dof, Result.INVALID_JOINTS, ['multi_dof_trajectory', 'base']),
        (old, Result.OLD_HEADER_TIMESTAMP, ['trajectory.header.stamp', 'past']),
        (bad_tolerance, Result.INVALID_GOAL, ['path_tolerance[0].position', "'joint_2'"]),
        (unknown_tolerance, Result.INVALID_GOAL, ['goal_tolerance[0].name', "'wrist'"]),
        (component, Result.INVALID_GOAL, ['component_path_tolerance[0]', "'joint_1'"]),
        (bad_time, Result.INVALID_GOAL, ['goal_time_tolerance']),
    ]


def test_refused_goals_end_at_once_with_code_and_reason_and_do_not_disturb_the_motion(loop):
    harness, plant, controller, client = loop
    target = away(plant, [-v for v in MOVE])
    running = run(loop, move(plant, target, seconds=2.0))
    start = plant.sim_time
    for goal, code, words in bad_goals(plant):
        status, result = outcome(loop, run(loop, goal))
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error_code == code, result.error_string
        for word in words:
            assert word in result.error_string
    assert plant.sim_time < start + 2.0          # all refused while the first goal ran
    status, result = outcome(loop, running)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert np.all(np.abs(np.asarray(plant.q) - target) <= GOAL_TOLERANCE)


def wait_for_progress(loop, handle, fraction_of_points):
    """Spin until the goal's feedback says it has passed this share of its points."""
    harness, _, _, client = loop
    key = bytes(handle.goal_id.uuid)

    def moving():
        feedback = client.feedback.get(key, [])
        return feedback and np.max(np.abs(feedback[-1].desired.velocities)) > 0.3
    harness.spin_until(moving, 'the goal under way')


def assert_holds(loop, q_then, bound=HOLD_BOUND):
    """The arm comes to rest within `bound` of q_then and stays."""
    plant = loop[1]
    settle(loop, 1.0)
    q1 = np.asarray(plant.q).copy()
    assert np.all(np.abs(q1 - q_then) <= bound), q1 - q_then
    assert np.all(np.abs(plant.qd) < 0.01)
    settle(loop, 0.5)
    assert np.all(np.abs(np.asarray(plant.q) - q1) < 1e-3)


def test_path_tolerance_violation_aborts_and_holds(loop):
    harness, plant, controller, client = loop
    goal = move(plant, away(plant, MOVE), seconds=1.5)
    goal.path_tolerance = [JointTolerance(name='joint_5', position=1e-5)]
    handle = run(loop, goal)
    status, result = outcome(loop, handle)
    q_then = np.asarray(plant.q).copy()
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.PATH_TOLERANCE_VIOLATED
    assert "joint 'joint_5' position error" in result.error_string
    assert controller.sampler.status(controller._last_t) == 'holding'
    assert_holds(loop, q_then)


def test_goal_tolerance_violated_after_goal_time_tolerance(loop):
    harness, plant, controller, client = loop
    goal = move(plant, away(plant, MOVE), seconds=1.0)
    goal.goal_tolerance = [JointTolerance(name=j, position=1e-12) for j in JOINTS]
    goal.goal_time_tolerance = duration(0.3)
    start = plant.sim_time
    status, result = outcome(loop, run(loop, goal))
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.GOAL_TOLERANCE_VIOLATED
    assert 'goal_time_tolerance 0.3 s' in result.error_string
    assert plant.sim_time >= start + 1.3 - 0.011


def test_constraints_goal_time_is_the_live_default_goal_time_tolerance(loop):
    harness, plant, controller, client = loop
    refused = controller.set_parameters([Parameter('constraints.goal_time', value=-1.0)])
    assert not refused[0].successful and 'constraints.goal_time' in refused[0].reason
    assert controller.set_parameters([Parameter('constraints.goal_time', value=0.2)])[
        0].successful
    try:
        goal = move(plant, away(plant, [-v for v in MOVE]), seconds=0.5)
        goal.goal_tolerance = [JointTolerance(name='joint_1', position=1e-12)]
        status, result = outcome(loop, run(loop, goal))
        assert result.error_code == Result.GOAL_TOLERANCE_VIOLATED
        assert 'goal_time_tolerance 0.2 s' in result.error_string
    finally:
        controller.set_parameters([Parameter('constraints.goal_time', value=0.0)])


def test_cancel_mid_motion_holds_within_the_stated_bound(loop):
    harness, plant, controller, client = loop
    handle = run(loop, move(plant, away(plant, MOVE), seconds=1.5))
    wait_for_progress(loop, handle, 0.5)
    cancel = handle.cancel_goal_async()
    harness.spin_until(cancel.done, 'the cancel response')
    q_then = np.asarray(plant.q).copy()
    assert len(cancel.result().goals_canceling) == 1
    status, result = outcome(loop, handle)
    assert status == GoalStatus.STATUS_CANCELED
    assert result.error_string == 'canceled; holding the measured position'
    assert_holds(loop, q_then)


def test_a_second_goal_preempts_the_first(loop):
    harness, plant, controller, client = loop
    first = run(loop, move(plant, away(plant, MOVE), seconds=1.5))
    wait_for_progress(loop, first, 0.3)
    target = away(plant, [0.1] * 6)
    second = run(loop, move(plant, target, seconds=1.0))
    status, result = outcome(loop, first)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.INVALID_GOAL
    assert 'preempted by a new goal' in result.error_string
    status, result = outcome(loop, second)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string


def test_a_trajectory_on_the_topic_preempts_the_goal(loop):
    harness, plant, controller, client = loop
    handle = run(loop, move(plant, away(plant, MOVE), seconds=1.5))
    wait_for_progress(loop, handle, 0.3)
    client.topic.publish(move(plant, away(plant, [0.05] * 6)).trajectory)
    status, result = outcome(loop, handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.INVALID_GOAL
    assert 'preempted by a trajectory on ~/joint_trajectory' in result.error_string


def hostile_goals(plant, rng, count):
    """Goals a broken or malicious client may send: every defect of bad_goals, huge,
    negative and non-finite numbers, random joint names, many points."""
    defects = [goal for goal, _, _ in bad_goals(plant)]
    goals = []
    for k in range(count):
        kind = k % 4
        if kind == 0:
            goals.append(defects[k // 4 % len(defects)])
            continue
        goal = move(plant, away(plant, rng.uniform(-0.2, 0.2, 6)), seconds=0.5,
                    points=int(rng.integers(1, 200)))
        point = goal.trajectory.points[int(rng.integers(len(goal.trajectory.points)))]
        if kind == 1:
            point.positions[int(rng.integers(6))] = float(rng.choice(
                [math.inf, -math.inf, math.nan, 1e300, -1e300]))
        elif kind == 2:
            goal.trajectory.joint_names[int(rng.integers(6))] = ''.join(
                rng.choice(list('abc_1'), 5))
        else:
            point.velocities = [float(rng.choice([math.nan, 1e308]))] * 6
        goals.append(goal)
    return goals


def test_a_burst_of_200_hostile_goals_leaves_the_loop_running_with_finite_efforts(loop):
    harness, plant, controller, client = loop
    rng = np.random.default_rng(13)
    goals = hostile_goals(plant, rng, 200)
    client.efforts.clear()
    sim_start = plant.sim_time
    futures = [client.send(goal) for goal in goals]
    harness.spin_until(lambda: all(f.done() for f in futures), 'the 200 goal responses')
    results = [f.result().get_result_async() for f in futures]
    harness.spin_until(lambda: all(r.done() for r in results), 'the 200 results')
    codes = [r.result().result.error_code for r in results]
    assert all(code != Result.SUCCESSFUL for code in codes), [
        (k, r.result().result.error_string) for k, r in enumerate(results)
        if r.result().result.error_code == Result.SUCCESSFUL]
    assert all(r.result().result.error_string for r in results)
    cycles = (plant.sim_time - sim_start) / 0.01
    # lock-step: the plant advances a cycle only when its command came (or after 1 s of
    # wall time without one, with a warning): one effort per cycle means no cycle stalled
    # (less one: the command answering the first state may have come before the clear)
    assert len(client.efforts) >= round(cycles) - 1
    assert np.all(np.isfinite(client.efforts))
    assert plant.stopped is False
    # still responsive: a valid goal right after the burst succeeds
    status, result = outcome(loop, run(loop, move(plant, away(plant, [0.1] * 6), 0.5)))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string


def test_without_control_msgs_the_controller_runs_without_the_action(monkeypatch):
    monkeypatch.setattr(follow_joint_trajectory, 'UNAVAILABLE', "No module named 'x'")
    harness = RosHarness(PUMA, SIM)
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        assert isinstance(controller._action, follow_joint_trajectory.NoActionInterface)
        assert not any(isinstance(w, ActionServer) for w in controller.waitables)
        topics = [p.topic_name for p in controller.publishers]
        assert f'{CONTROLLER}/reference' in topics
        assert f'{CONTROLLER}/controller_state' not in topics
    finally:
        harness.close()


def send_trajectory(loop, *arguments):
    """Run the send_trajectory executable while the loop spins: (exit status, output)."""
    harness = loop[0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    process = subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.send_trajectory', *arguments],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        harness.spin_until(lambda: process.poll() is not None, 'send_trajectory to exit')
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, process.communicate()[0]


def test_send_trajectory_reports_success_with_the_final_error_per_joint(loop):
    plant = loop[1]
    target = away(plant, [0.1, -0.1, 0.1, -0.1, 0.1, -0.1])
    code, output = send_trajectory(loop, '--positions', *map(str, target), '--duration', '1.0')
    assert code == 0, output
    assert 'goal succeeded: SUCCESSFUL (0)' in output
    assert 'final error per joint (goal - measured)' in output and "'joint_6'" in output
    assert np.all(np.abs(np.asarray(plant.q) - target) <= GOAL_TOLERANCE)


@pytest.mark.parametrize('arguments, words', [
    (['--joints', 'shoulder', 'elbow', '--positions', '0.1', '0.2', '--start-from', '0', '0'],
     ['INVALID_JOINTS (-2)', "trajectory.joint_names[0]: unknown joint 'shoulder'"]),
    (['--positions', '9.0', '0', '0', '0', '0', '0'],
     ['INVALID_GOAL (-1)', "(joint 'joint_1')", 'outside [-6.28']),
    (['--joints', 'joint_1', 'joint_2', '--positions', '0.1', '0.2'],
     ['INVALID_JOINTS (-2)', 'allow_partial_joints_goal']),
])
def test_send_trajectory_exits_3_with_the_reason_of_a_refused_goal(loop, arguments, words):
    code, output = send_trajectory(loop, *arguments, '--duration', '1.0')
    assert code == 3, output
    assert 'goal refused by /computed_torque_controller/follow_joint_trajectory' in output
    for word in words:
        assert word in output


def test_send_trajectory_no_wait_returns_while_the_goal_runs(loop):
    harness, plant, controller, client = loop
    code, output = send_trajectory(loop, '--positions', *map(str, away(plant, MOVE)),
                                   '--duration', '3.0', '--no-wait')
    assert code == 0, output
    assert 'goal accepted and running' in output
    # the sender returned on acceptance; the goal starts at the controller's next cycle
    # (lock-step: a cycle may not have run yet), and runs without the sender
    harness.spin_until(lambda: controller.sampler.status(controller._last_t) == 'running',
                       'the goal running after send_trajectory returned')
    assert controller._action._goal is not None
    settle(loop, 3.5)


def start_send_trajectory(*arguments):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    return subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.send_trajectory', *arguments],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_send_trajectory_exits_4_when_its_goal_is_preempted_and_130_after_canceling_on_ctrl_c(
        loop):
    harness, plant, controller, client = loop
    for stop in ('topic', 'ctrl-c'):
        settle(loop, 0.2)
        before = controller._action._goal
        process = start_send_trajectory('--positions', *map(str, away(plant, MOVE)),
                                        '--duration', '3.0')
        try:
            # this sender's goal, not whatever ran before it
            harness.spin_until(lambda: controller._action._goal not in (None, before)
                               and controller.sampler.status(controller._last_t)
                               == 'running', 'the goal running')
            if stop == 'topic':
                client.topic.publish(move(plant, away(plant, [0.05] * 6)).trajectory)
            else:
                process.send_signal(signal.SIGINT)
            harness.spin_until(lambda: process.poll() is not None, 'send_trajectory to exit')
        finally:
            if process.poll() is None:
                process.kill()
        output = process.communicate()[0]
        if stop == 'topic':
            assert process.returncode == 4, output
            assert 'goal aborted: INVALID_GOAL (-1): preempted by a trajectory' in output
        else:
            assert process.returncode == 130, output
            assert 'goal cancel requested' in output
            assert controller.sampler.status(controller._last_t) == 'holding'
        settle(loop, 1.0)
