"""`identify plan --send ACTION` over DDS: the plan goes as a FollowJointTrajectory goal to
a stand-in action server of this test's own, which knows nothing of robot_dynamics (it
accepts any goal, publishes /joint_states — joints in its own order, with a gripper joint
the model lacks — by interpolating the goal's points over time, and succeeds), while
`identify` records /joint_states into a bag: the goal is the written file, starts where the
arm is, leaves the goal tolerances unchecked, and the bag holds the motion. Then the same
against this package's controller and plant, in simulated time."""

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

pytest.importorskip('control_msgs', reason='control_msgs is not built in this environment')
pytest.importorskip('rosbags')
pytest.importorskip('scipy')

from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.action import ActionServer  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.task import Future  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from robot_dynamics.identification.recordings import read_joint_states  # noqa: E402
from ros_testing import ProcessOutput, PUMA, REPO, RosHarness  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')

JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
ARM_AT = np.array([0.2, 0.6, -1.0, 0.3, 0.5, -0.2])
ACTION = '/arm_controller/follow_joint_trajectory'
PERIOD = 0.01            # s between the stand-in's /joint_states
DURATION = 3.0           # s of motion
GUARD = 300.0            # s of wall time: a hang guard, not an assertion


def seconds(duration):
    return duration.sec + 1e-9 * duration.nanosec


class StandInArm(Node):
    """An arm behind a FollowJointTrajectory server: at rest until a goal comes, then at
    the goal's positions interpolated (linearly) at the time since the goal began; the goal
    succeeds after its last point."""

    def __init__(self, context, joints, start):
        super().__init__('stand_in_arm', context=context)
        self.names = [*reversed(joints), 'gripper_finger']
        self.position = dict(zip(joints, map(float, start)), gripper_finger=0.0)
        self.velocity = dict.fromkeys(self.names, 0.0)
        self.goals = []                       # (goal, start time [s])
        self.motion = None
        self.drift = 0.0                      # rad per state of joint_1 while no goal runs
        self.effort = 0.0                     # every joint's effort (mock hardware's 0)
        self.clip = {}                        # joint: (low, high) the arm cannot leave
        self.abort = False                    # the goal aborted at its end
        self.publisher = self.create_publisher(JointState, '/joint_states', 50)
        self.server = ActionServer(self, FollowJointTrajectory, ACTION, self.execute)
        self.timer = self.create_timer(PERIOD, self.tick)

    async def execute(self, handle):
        trajectory = handle.request.trajectory
        done = Future()
        self.motion = (self.get_clock().now().nanoseconds * 1e-9, list(trajectory.joint_names),
                       np.array([seconds(p.time_from_start) for p in trajectory.points]),
                       np.array([list(p.positions) for p in trajectory.points]),
                       np.array([list(p.velocities) for p in trajectory.points]), done)
        self.goals.append((handle.request, self.motion[0]))
        await done
        if self.abort:
            handle.abort()
            return FollowJointTrajectory.Result(error_code=-4,
                                                error_string='path tolerance violated')
        handle.succeed()
        return FollowJointTrajectory.Result(error_code=0, error_string='')

    def tick(self):
        now = self.get_clock().now()
        if self.motion is not None:
            began, names, times, q, qd, done = self.motion
            elapsed = min(now.nanoseconds * 1e-9 - began, times[-1])
            for j, name in enumerate(names):
                self.position[name] = float(np.clip(np.interp(elapsed, times, q[:, j]),
                                                    *self.clip.get(name, (-9.0, 9.0))))
                self.velocity[name] = float(np.interp(elapsed, times, qd[:, j]))
            if elapsed >= times[-1]:
                self.motion = None
                done.set_result(True)
        else:
            self.position['joint_1'] += self.drift
        message = JointState(name=self.names,
                             position=[self.position[n] for n in self.names],
                             velocity=[self.velocity[n] for n in self.names],
                             effort=[self.effort] * len(self.names))
        message.header.stamp = now.to_msg()
        self.publisher.publish(message)


def launch(*arguments):
    """`identify plan ...` as a process, its output read as it comes."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    process = subprocess.Popen([sys.executable, '-m', 'robot_dynamics.nodes.identify', 'plan',
                                *arguments], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    return process, ProcessOutput(process)


def finish(harness, process, output):
    try:
        harness.spin_until(lambda: process.poll() is not None, 'identify plan',
                           wall_limit=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, output.text()


@pytest.fixture(scope='module')
def arm():
    harness = RosHarness()
    stand_in = harness.add(StandInArm(harness.context, JOINTS, ARM_AT))
    yield harness, stand_in
    harness.close()


@pytest.fixture(scope='module')
def sent(arm, tmp_path_factory):
    harness, stand_in = arm
    folder = tmp_path_factory.mktemp('plan_send')
    process, output = launch('--params-file', PUMA, '--duration', str(DURATION),
                             '--iterations', '0', '--rate', '50', '--timeout', '60',
                             '--output', str(folder / 'plan.yaml'), '--send', ACTION,
                             '--record', str(folder / 'bag'))
    code, text = finish(harness, process, output)
    return code, text, folder, list(stand_in.goals)


def test_the_goal_succeeds_and_the_outcome_is_one_line(sent):
    code, text, _, goals = sent
    assert code == 0, text
    assert len(goals) == 1, text
    outcome = [line for line in text.splitlines() if 'goal succeeded' in line]
    assert len(outcome) == 1 and 'SUCCESSFUL (0)' in outcome[0], text


def test_the_goal_is_the_written_plan_from_where_the_arm_is(sent):
    _, text, folder, goals = sent
    goal, _ = goals[0]
    with open(folder / 'plan.yaml', encoding='utf-8') as stream:
        written = yaml.safe_load(stream)
    assert list(goal.trajectory.joint_names) == written['joint_names'] == list(JOINTS)
    assert len(goal.trajectory.points) == len(written['points']) == DURATION * 50 + 1
    for point, fields in zip(goal.trajectory.points, written['points']):
        assert list(point.positions) == fields['positions']
        assert list(point.velocities) == fields['velocities']
        assert list(point.accelerations) == fields['accelerations']
        assert (point.time_from_start.sec, point.time_from_start.nanosec) == (
            fields['time_from_start']['sec'], fields['time_from_start']['nanosec'])
    first, last = goal.trajectory.points[0], goal.trajectory.points[-1]
    assert np.allclose(first.positions, ARM_AT, atol=1e-12)     # planned from the arm
    assert np.allclose(last.positions, ARM_AT, atol=1e-12)
    assert all(v == 0.0 for v in [*first.velocities, *last.velocities])
    assert 'where /joint_states says the arm is' in text


def test_the_goal_tolerances_are_not_checked(sent):
    goal, _ = sent[3][0]
    assert sorted(t.name for t in goal.goal_tolerance) == sorted(JOINTS)
    assert all(t.position == -1.0 and t.velocity == -1.0 for t in goal.goal_tolerance)


def test_the_bag_holds_the_motion(sent):
    _, text, folder, goals = sent
    goal, began = goals[0]
    times = np.array([seconds(p.time_from_start) for p in goal.trajectory.points])
    q = np.array([list(p.positions) for p in goal.trajectory.points])
    recording = read_joint_states(folder / 'bag', JOINTS)
    assert recording.time_source == 'header stamps'
    during = (recording.t >= began) & (recording.t <= began + DURATION)
    assert recording.t[0] <= began          # recording before the goal was sent (matched)
    assert recording.t[-1] >= began + DURATION - 2 * PERIOD     # to its end
    assert np.count_nonzero(during) >= 0.9 * DURATION / PERIOD  # every state, or nearly
    expected = np.column_stack([np.interp(recording.t[during] - began, times, q[:, j])
                                for j in range(6)])
    # (to the rounding of absolute times in seconds as doubles: 2.4e-7 s near 1.8e9 s)
    assert np.max(np.abs(recording.q[during] - expected)) < 1e-5
    assert np.all(np.ptp(recording.q, axis=0) > 0.05)           # every joint moved
    assert f'into {folder / "bag"}' in text


def test_zero_efforts_are_said_at_once(sent):
    """Mock hardware's efforts (0 where gravity loads the arm): said before the motion,
    which is sent all the same (a rehearsal of the recipe)."""
    code, text, _, goals = sent
    warning = next(line for line in text.splitlines() if 'no usable efforts' in line)
    assert "every joint's effort is 0" in warning and code == 0 and goals
    assert text.index('no usable efforts') < text.index('goal succeeded')


def test_nan_efforts_are_refused_before_anything_is_sent(arm, tmp_path):
    """joint_state_broadcaster without an effort interface: NaN efforts; with --record
    nothing is sent (the recording could not identify anything)."""
    harness, stand_in = arm
    count = len(stand_in.goals)
    stand_in.effort = float('nan')
    try:
        process, output = launch('--params-file', PUMA, '--duration', '2', '--iterations',
                                 '0', '--timeout', '60', '--send', ACTION, '--record',
                                 str(tmp_path / 'bag'))
        code, text = finish(harness, process, output)
    finally:
        stand_in.effort = 0.0
    assert code == 1, text
    assert 'no usable efforts on /joint_states: efforts missing for' in text
    assert 'planned' not in text and len(stand_in.goals) == count
    assert not (tmp_path / 'bag').exists()


@pytest.mark.parametrize('abort', [False, True])
def test_a_clipped_motion_is_recorded_and_the_clipping_said(arm, tmp_path, abort):
    """Limits tighter in the robot's URDF than in the robot file: the arm stops at them.
    The recording is kept (also when the goal then aborts) and the clipped joint named
    with its planned and recorded range."""
    harness, stand_in = arm
    low = ARM_AT[1] - 0.05                       # joint_2 cannot go lower than this
    stand_in.clip = {'joint_2': (low, 9.0)}
    stand_in.abort = abort
    try:
        process, output = launch('--params-file', PUMA, '--duration', '2', '--iterations',
                                 '0', '--rate', '50', '--timeout', '60', '--send', ACTION,
                                 '--record', str(tmp_path / 'bag'))
        code, text = finish(harness, process, output)
    finally:
        stand_in.clip, stand_in.abort = {}, False
    assert code == (4 if abort else 0), text
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert recording.q[:, 1].min() >= low - 1e-9
    warning = next(line for line in text.splitlines() if 'the motion was clipped' in line)
    assert 'joint_2 planned [' in warning and f'recorded [{low:.4g}, ' in warning
    assert 'joint_1 planned' not in warning and 'joint_3 planned' not in warning
    assert 'range per joint, planned -> recorded: joint_1 [' in text
    assert ('kept although the goal did not succeed' in text) == abort


def test_send_trajectory_sends_the_plan_file(arm, tmp_path):
    """`send_trajectory --file plan.yaml` (instead of `ros2 action send_goal`, which takes
    tens of seconds to parse a 30 s plan): the goal is the file's trajectory, the goal
    tolerances unchecked with --goal-tolerance-unchecked; a file that does not start
    where the arm is is not sent."""
    harness, stand_in = arm
    plan = tmp_path / 'plan.yaml'
    start = [stand_in.position[j] for j in JOINTS]
    made = subprocess.run([sys.executable, '-m', 'robot_dynamics.nodes.identify', 'plan',
                           '--params-file', PUMA, '--duration', '2', '--iterations', '0',
                           '--start', *map(str, start), '--output', str(plan)],
                          env=dict(os.environ, PYTHONPATH=REPO), capture_output=True,
                          text=True, timeout=GUARD)
    assert made.returncode == 0, made.stderr
    count = len(stand_in.goals)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    process = subprocess.Popen([sys.executable, '-m', 'robot_dynamics.nodes.send_trajectory',
                                '--file', str(plan), '--action', ACTION, '--timeout', '60',
                                '--goal-tolerance-unchecked'], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    code, text = finish(harness, process, ProcessOutput(process))
    assert code == 0, text
    assert len(stand_in.goals) == count + 1
    goal = stand_in.goals[-1][0]
    with open(plan, encoding='utf-8') as stream:
        points = yaml.safe_load(stream)['points']
    assert len(goal.trajectory.points) == len(points)
    for sent_point, point in zip(goal.trajectory.points[::20], points[::20]):
        assert list(sent_point.positions) == point['positions']
        assert list(sent_point.velocities) == point['velocities']
    assert [(t.name, t.position, t.velocity) for t in goal.goal_tolerance] == [
        (j, -1.0, -1.0) for j in JOINTS]
    stand_in.position['joint_2'] += 0.1           # no longer where the file starts
    try:
        process = subprocess.Popen([sys.executable, '-m',
                                    'robot_dynamics.nodes.send_trajectory', '--file',
                                    str(plan), '--action', ACTION, '--timeout', '60'],
                                   env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        code, text = finish(harness, process, ProcessOutput(process))
    finally:
        stand_in.position['joint_2'] -= 0.1
    assert code == 1 and 'joint_2 is at' in text and 'nothing sent' in text, text
    assert len(stand_in.goals) == count + 1


def test_a_start_away_from_the_arm_is_refused_naming_the_joint(arm, tmp_path):
    harness, stand_in = arm
    count = len(stand_in.goals)
    start = ARM_AT.copy()
    start[2] += 0.1
    process, output = launch('--params-file', PUMA, '--iterations', '0', '--timeout', '60',
                             '--start', *map(str, start), '--send', ACTION)
    code, text = finish(harness, process, output)
    assert code == 2, text
    assert '--start: joint_3 is at' in text and 'move the arm to the start first' in text
    assert len(stand_in.goals) == count                         # nothing sent


def test_no_action_server_exits_1_saying_so(arm, tmp_path):
    harness, _ = arm
    process, output = launch('--params-file', PUMA, '--duration', '2', '--iterations', '0',
                             '--timeout', '3', '--send', '/nobody/follow_joint_trajectory',
                             '--record', str(tmp_path / 'bag'))
    code, text = finish(harness, process, output)
    assert code == 1, text
    assert 'no FollowJointTrajectory action server /nobody/follow_joint_trajectory' in text
    assert not (tmp_path / 'bag').exists()


def test_this_packages_controller_runs_the_plan_and_the_bag_holds_it(tmp_path):
    """The controller and the plant (PUMA 560, simulated time in lock-step; the plant's
    links perturbed, as in test_identify_nodes), the plan sent to the controller's action."""
    nodes = pytest.importorskip('test_identify_nodes')
    loop = nodes.Loop(PUMA)
    try:
        process, output = launch('--params-file', PUMA, '--duration', str(DURATION),
                                 '--iterations', '0', '--timeout', '60', '--send',
                                 '/computed_torque_controller/follow_joint_trajectory',
                                 '--record', str(tmp_path / 'bag'),
                                 '--output', str(tmp_path / 'plan.yaml'))
        start = loop.plant.sim_time
        code, text = finish(loop.harness, process, output)
        end = loop.plant.sim_time
    finally:
        loop.close()
    assert code == 0, text
    assert 'goal succeeded' in text
    assert end - start >= DURATION
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert recording.duration >= DURATION - 0.1
    assert len(recording.segments()) == 1
    assert np.all(np.ptp(recording.q, axis=0) > 0.05)
    with open(tmp_path / 'plan.yaml', encoding='utf-8') as stream:
        planned = yaml.safe_load(stream)['points']
    # planned from where the arm was (the hold under the plant's other model has sagged it
    # from the plant's initial position), so the motion begins there
    assert np.allclose(recording.q[0], planned[0]['positions'], atol=0.01), text
    assert not np.allclose(planned[0]['positions'], planned[len(planned) // 2]['positions'])


def test_an_arm_that_moves_while_the_motion_is_planned_gets_nothing(arm):
    harness, stand_in = arm
    count = len(stand_in.goals)
    before = stand_in.position['joint_1']
    stand_in.drift = 0.0005                 # 0.05 rad/s
    try:
        process, output = launch('--params-file', PUMA, '--duration', '2', '--iterations',
                                 '0', '--timeout', '60', '--send', ACTION)
        code, text = finish(harness, process, output)
    finally:
        stand_in.drift = 0.0
        stand_in.position['joint_1'] = before
    assert code == 1, text
    assert 'the arm moved while the motion was planned: joint_1 is at' in text
    assert len(stand_in.goals) == count


@pytest.mark.parametrize('running', [True, False])
def test_no_state_reaching_the_recorder_sends_nothing(arm, running):
    """The recorder waits for its first state before anything is sent: here the stand-in's
    publisher is there but silent (its harness is not spun), so the wait ends without one:
    exit 1 when it timed out, 130 on a stop."""
    import types
    import rclpy
    from robot_dynamics.nodes.identify.common import NOT_ENDED, STOPPED
    from robot_dynamics.nodes.identify.send import PlanSender, recording_started
    harness, _ = arm
    context = rclpy.Context()
    rclpy.init(context=context)
    node = PlanSender(types.SimpleNamespace(states_topic='/joint_states', send=ACTION), JOINTS,
                      lambda: running, context=context)
    try:
        assert recording_started(node, 0.5) == (NOT_ENDED if running else STOPPED)
        assert not node.recorded and node._recorder is None     # unsubscribed again
    finally:
        node.executor_.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
