"""The two commands against the nodes, over DDS, in simulated time (lock-step), as a user
runs them: `identify excite` plans from where the arm is with the running controller's
model, sends the motion through its FollowJointTrajectory action and records /joint_states
into a bag; `identify estimate` turns the bag into a parameter file; the controller restarted
with ``--params-file puma560.yaml --params-file identified.yaml`` tracks a move better than
with the robot file alone. Without control_msgs, `identify excite` sends the motion on the
controller's trajectory topic instead.

The plant is the PUMA 560 preset with every link perturbed by up to ±30 % and drives
(armature, viscous and Coulomb friction) the preset lacks; the controller starts with the
preset. The excitation is short (10 s simulated, the optimisation's random draw only) to
keep the test quick; doc/identification.md has the figures of full-length runs.
"""

import contextlib
import io
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip('rosbags')
pytest.importorskip('cvxpy')

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics.identification.recordings import read_joint_states  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.identify import main as identify  # noqa: E402
from robot_dynamics.nodes.identify.excite import ExcitationRecorder  # noqa: E402
from robot_dynamics.nodes.plant import PlantSimulator  # noqa: E402
from robot_dynamics.nodes.send_trajectory import trajectory_message  # noqa: E402
from robot_dynamics.trajectories.profiles import sample_profile  # noqa: E402
from ros_testing import PUMA, REPO, RosHarness  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')

CONTROLLER = 'computed_torque_controller'
JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
START = np.array([0.0, -0.5, 0.5, 0.0, 0.3, 0.0])
GOAL = START + np.array([0.6, 0.5, -0.5, 0.6, 0.5, 0.6])
EXCITATION = 10.0       # s of simulated time
MOVE = 2.0              # s, quintic
SETTLE = 0.5            # s after the move
GUARD = 900.0           # s of wall time: a hang guard for the excitation, not an assertion


def plant_overrides():
    """The plant's robot parameters: the perturbed arm with drives."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        prior = RobotModel.from_yaml(PUMA)
    plant = ai.perturbed_model(prior, 0.3, seed=1, **ai.drive_terms(prior))
    return [Parameter(f'robot.{key}', value=list(values) if key == 'friction_model'
                      else [float(v) for v in values])
            for key, values in ai.robot_params_overrides(plant).items()]


class Loop:
    """Plant and controller in one executor, simulated time in lock-step, and a probe
    that publishes moves and reads the controller's ~/error."""

    def __init__(self, *param_files, controller_parameters=()):
        self.harness = RosHarness(*param_files)
        context = self.harness.context
        self.plant = self.harness.add(PlantSimulator(context=context, parameter_overrides=[
            Parameter('initial_positions', value=START.tolist()),
            Parameter('integration_step', value=0.002),
            Parameter('publish_clock', value=True),
            Parameter('real_time_factor', value=0.0),
            Parameter('lockstep_timeout', value=60.0), *plant_overrides()]))
        self.controller = self.harness.add(ComputedTorqueController(
            context=context, parameter_overrides=[
                Parameter('use_sim_time', value=True),
                Parameter('control_mode', value='on_state'),
                Parameter('state_timeout', value=0.5),
                Parameter('publish_state', value=True), *controller_parameters]))
        self.probe = self.harness.add(Node('probe', context=context))
        self.errors = []
        self.probe.create_subscription(JointState, f'{CONTROLLER}/error', self._on_error, 100)
        self.trajectory = self.probe.create_publisher(JointTrajectory,
                                                      f'{CONTROLLER}/joint_trajectory', 10)
        self.harness.spin_until(lambda: self.trajectory.get_subscription_count() > 0
                                and self.controller._status == 'holding', 'the loop closed')

    def _on_error(self, msg):
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.errors.append((stamp, np.max(np.abs(np.array(msg.position)))))

    def run_for(self, seconds):
        end = self.plant.sim_time + seconds
        self.harness.spin_until(lambda: self.plant.sim_time >= end or self.plant.stopped,
                                f'{seconds} s simulated', wall_limit=600.0)
        assert not self.plant.stopped

    def move(self, start, goal):
        """The quintic move; its max |error| over the joints [rad]."""
        t0 = self.plant.sim_time
        command = sample_profile('quintic', start, goal, MOVE, 50, JOINTS)
        self.trajectory.publish(trajectory_message(command))
        self.run_for(MOVE + SETTLE)
        return max(e for stamp, e in self.errors if stamp >= t0)

    def finish(self, process):
        """Spin the loop until `process` exits (killed after GUARD s); its (exit status,
        output)."""
        try:
            self.harness.spin_until(lambda: process.poll() is not None, 'identify excite',
                                    wall_limit=GUARD)
        finally:
            if process.poll() is None:
                process.kill()
        return process.returncode, process.communicate()[0]

    def close(self):
        self.harness.close()


def launch(*arguments, path_first=()):
    """`identify` as a process; `path_first`: folders put before the repository on its
    PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [*path_first, REPO, os.environ.get('PYTHONPATH', '')]))
    return subprocess.Popen([sys.executable, '-m', 'robot_dynamics.nodes.identify', *arguments],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


@pytest.fixture(scope='module')
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp('identify_nodes')
    found = {'folder': folder}
    loop = Loop(PUMA)
    try:
        process = launch('excite', '--duration', str(EXCITATION), '--iterations', '0',
                         '--timeout', '60', '--record', str(folder / 'bag'))
        found['excitation_start'] = loop.plant.sim_time
        found['excite'] = loop.finish(process)
        found['excitation_end'] = loop.plant.sim_time
        loop.move(loop.plant.q.copy(), START)
        found['error_prior'] = loop.move(START, GOAL)
    finally:
        loop.close()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        found['estimate'] = identify(['identify', 'estimate', '--params-file', PUMA, '--bag',
                                      str(folder / 'bag'),        # the bag's effort timing
                                      '--output', str(folder / 'identified.yaml')]), \
            printed.getvalue()
    if found['estimate'][0] == 0:
        loop = Loop(PUMA, str(folder / 'identified.yaml'))      # the controller restarted
        try:
            found['law_armature'] = loop.controller.law.model.armature.copy()
            loop.move(loop.plant.q.copy(), START)
            found['error_identified'] = loop.move(START, GOAL)
        finally:
            loop.close()
    yield found


def test_excite_moves_the_arm_through_the_action_and_exits_0(session):
    code, output = session['excite']
    assert code == 0, output
    assert 'condition number' in output and 'goal succeeded' in output, output
    assert session['excitation_end'] - session['excitation_start'] >= EXCITATION


def test_the_recording_holds_the_motion_at_the_plants_rate(session):
    recording = read_joint_states(session['folder'] / 'bag', JOINTS)
    assert recording.time_source == 'header stamps'
    assert recording.duration >= EXCITATION - 0.1
    assert recording.sample_period == pytest.approx(0.01, rel=1e-6)   # the plant's 100 Hz
    assert len(recording.segments()) == 1                               # nothing lost
    assert np.all(np.ptp(recording.q, axis=0) > 0.05)                   # every joint moved
    # the plant's efforts are held over the step that ends at the message; and what wrote it
    assert recording.custom_data == {'robot_dynamics.effort_timing': 'held_before',
                                     'robot_dynamics.recorded_by': 'identify excite'}


def test_estimate_accepts_the_recording(session):
    code, text = session['estimate']
    assert code == 0, text
    assert "effort timing: held_before (from the bags' metadata" in text
    assert (session['folder'] / 'identified.yaml').exists()


def test_the_controller_restarted_with_the_file_tracks_better(session):
    """The file loaded through the node's parameters (--params-file after the preset)."""
    assert session['estimate'][0] == 0, session['estimate'][1]
    assert np.all(session['law_armature'] > 0.0)          # the file's drives are in the law
    prior, identified = session['error_prior'], session['error_identified']
    print(f'max |e| over the move: {prior:.3e} rad with the preset, {identified:.3e} rad '
          'with the identified file')
    assert identified * 3.0 <= prior, (identified, prior)


def test_excite_without_control_msgs_sends_the_motion_on_the_topic(tmp_path):
    """Where control_msgs cannot be imported (a PyPI-only machine that did not build it),
    `identify excite` sends the motion on the controller's joint_trajectory topic and ends
    it by the controller's ~/status: the recording still holds the whole motion."""
    blocker = tmp_path / 'blocked' / 'control_msgs'
    blocker.mkdir(parents=True)
    (blocker / '__init__.py').write_text("raise ImportError('blocked by the test')\n")
    loop = Loop(PUMA)
    try:
        duration = 3.0
        process = launch('excite', '--duration', str(duration), '--iterations', '0',
                         '--timeout', '60', '--record', str(tmp_path / 'bag'),
                         path_first=[str(blocker.parent)])
        start = loop.plant.sim_time
        code, output = loop.finish(process)
        end = loop.plant.sim_time
    finally:
        loop.close()
    assert code == 0, output
    assert 'sent the motion on /computed_torque_controller/joint_trajectory' in output, output
    assert 'control_msgs cannot be imported' in output and 'blocked by the test' in output
    assert end - start >= duration
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert recording.duration >= duration - 0.1
    assert len(recording.segments()) == 1
    assert np.all(np.ptp(recording.q, axis=0) > 0.05)                   # every joint moved


def test_stopping_the_recorder_keeps_the_states_delivered_but_not_yet_taken():
    """On a busy machine the goal's result can be handled while states of the motion's
    last moments still wait in the recorder's queue: stopping takes them, in order. Here the
    recorder's node is never spun; a witness on the same topic shows they were delivered."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message

    class Recorder(Node):
        _on_raw_state = ExcitationRecorder._on_raw_state
        stop_recording = ExcitationRecorder.stop_recording

    harness = RosHarness()
    recorder = Recorder('recorder', context=harness.context)
    try:
        recorder.recorded, recorder._recording = [], True
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        recorder._recorder = recorder.create_subscription(
            JointState, 'recorded_states', recorder._on_raw_state, qos, raw=True)
        seen = []
        node = harness.add(Node('witness_and_publisher', context=harness.context))
        node.create_subscription(JointState, 'recorded_states', seen.append, qos)
        publisher = node.create_publisher(JointState, 'recorded_states', qos)
        harness.spin_until(lambda: publisher.get_subscription_count() == 2, 'both matched')
        for k in range(5):
            state = JointState(name=list(JOINTS), position=[0.1 * k] * 6)
            state.header.stamp.sec = k + 1
            publisher.publish(state)
        harness.spin_until(lambda: len(seen) == 5, 'the witness has the five')
        assert recorder.recorded == []                    # nothing taken by an executor
        recorder.stop_recording()
        stamps = [deserialize_message(data, JointState).header.stamp.sec
                  for _, data in recorder.recorded]
        assert stamps == [1, 2, 3, 4, 5]
        assert recorder._recorder is None
    finally:
        recorder.destroy_node()
        harness.close()


def test_an_aborted_excitation_keeps_its_recording_and_says_so(tmp_path):
    """The controller's path tolerance (0.1 mrad on joint 2, which the perturbed arm
    leaves at once) aborts the goal: exit 4 (did not succeed), and the bag of the motion
    so far is written all the same, with a line saying so."""
    loop = Loop(PUMA, controller_parameters=[
        Parameter('constraints.joint_2.trajectory', value=1e-4)])
    try:
        process = launch('excite', '--duration', '4', '--iterations', '0', '--timeout', '60',
                         '--record', str(tmp_path / 'bag'))
        code, output = loop.finish(process)
    finally:
        loop.close()
    assert code == 4, output
    assert 'kept although the goal did not succeed' in output, output
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert len(recording) > 1 and recording.duration < 4.0
