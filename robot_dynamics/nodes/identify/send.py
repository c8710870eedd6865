"""`identify plan --send ACTION`: the plan as a control_msgs/action/FollowJointTrajectory
goal to any action server (ros2_control's joint_trajectory_controller, this package's
controller), /joint_states recorded into a rosbag2 folder during the motion.

The start is where /joint_states says the arm is (or --start, which must be within
START_TOLERANCE of it): the goal's first point is the start at time 0, which a trajectory
controller takes as its reference at once. The recorder and the goal are `identify
excite`'s (robot_dynamics.nodes.identify.excite.ExcitationRecorder's methods, used on
this node): the raw /joint_states as they arrive, written with the package's bag
writer; the goal's position and velocity goal tolerances sent as -1 (not checked, so that the
goal succeeds once the motion's time has passed even where the model being identified
leaves an offset at rest; the server's path tolerances still apply); the outcome, the
result code and the error string, in one line.
"""

import math
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from robot_dynamics import dynamics
from robot_dynamics.nodes.common import trajectory_client
from robot_dynamics.parameters.params_file import ParamsFileError
from robot_dynamics.nodes.common.runner import ros_session
from robot_dynamics.nodes.common.trajectory_client import trajectory_message
from robot_dynamics.identification.recordings import BagError, read_joint_states
from robot_dynamics.nodes.identify import plan as identify_plan
from robot_dynamics.nodes.identify.common import missing_libraries, NOT_ENDED, STOPPED
from robot_dynamics.nodes.identify.excite import ExcitationRecorder, recording_started
from robot_dynamics.trajectories.sampler import TrajectoryCommand, TrajectoryPoint

NODE_NAME = 'identify_plan'
START_TOLERANCE = 0.01     # rad | m between --start and where the arm is


class PlanSender(Node):
    """Where the arm is (/joint_states), the action client, and `identify excite`'s
    recorder and goal (its methods work on any node with these attributes)."""

    RECORDED_BY = 'identify plan'     # in the bag's metadata, for `identify estimate`

    spin = ExcitationRecorder.spin
    spin_until = ExcitationRecorder.spin_until
    start_recording = ExcitationRecorder.start_recording
    _on_raw_state = ExcitationRecorder._on_raw_state
    stop_recording = ExcitationRecorder.stop_recording
    write_bag = ExcitationRecorder.write_bag
    run_goal = ExcitationRecorder.run_goal

    def __init__(self, options, joints, running, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.joints = tuple(joints)
        self.running = running
        self._latest = {}
        self._effort = {}                    # the last effort of each joint (NaN: none)
        self._states = self.create_subscription(JointState, options.states_topic,
                                                self._on_joint_states, qos_profile_sensor_data)
        self.states_topic = self._states.topic_name
        self.recorded = []                   # (receive time [ns], CDR bytes)
        self._recording = False
        self._recorder = None
        self.action_name = options.send
        self.action = trajectory_client.ActionClient(
            self, trajectory_client.FollowJointTrajectory, self.action_name)
        self.executor_ = SingleThreadedExecutor(context=self.context)
        self.executor_.add_node(self)

    def _on_joint_states(self, msg):
        if len(msg.position) != len(msg.name):
            return
        efforts = (msg.effort if len(msg.effort) == len(msg.name)
                   else [math.nan] * len(msg.name))
        for name, position, effort in zip(msg.name, msg.position, efforts):
            if np.isfinite(position):
                self._latest[name] = position
                self._effort[name] = float(effort)

    def effort_problem(self, model, q):
        """What makes the efforts on /joint_states unusable for identification, seen in
        the last message of each joint: (missing, all zero), each a list of joints."""
        efforts = np.array([self._effort.get(j, math.nan) for j in self.joints])
        missing = [j for j, e in zip(self.joints, efforts) if not math.isfinite(e)]
        gravity = dynamics.gravity_torques(model, q)
        zero = ([] if missing or np.any(efforts != 0.0)
                or not np.max(np.abs(gravity)) > 1e-6 else list(self.joints))
        return missing, zero

    def position(self):
        """Where the arm is (None until every joint has been seen)."""
        if not all(j in self._latest for j in self.joints):
            return None
        return np.array([self._latest[j] for j in self.joints])

    def find_server(self, timeout):
        """True once the action server is there and has had time to see us."""
        return trajectory_client.find_server(self.action, timeout, self.running, self.spin)


def goal_trajectory(plan):
    """trajectory_msgs/JointTrajectory of the plan (header stamp 0: start on arrival)."""
    points = tuple(TrajectoryPoint(float(plan.t[k]), tuple(map(float, plan.q[k])),
                                   tuple(map(float, plan.qd[k])),
                                   tuple(map(float, plan.qdd[k])))
                   for k in range(len(plan.t)))
    return trajectory_message(TrajectoryCommand(plan.joints, points, 0.0))


def start_of(node, options, log):
    """(start, 0): where the arm is, or --start when it is there; (None, exit status)
    after a line saying why not."""
    deadline = time.monotonic() + options.timeout
    while node.position() is None:
        if not node.running():
            return None, STOPPED
        if time.monotonic() > deadline:
            missing = [j for j in node.joints if j not in node._latest]
            log.error(f'no position of {missing} on {node.states_topic} within '
                      f'{options.timeout:g} s (is the robot running? --joint-states-topic)')
            return None, NOT_ENDED
        node.spin()
    measured = node.position()
    if options.start is None:
        return measured, 0
    start = np.array(options.start, dtype=float)
    if start.shape != measured.shape:
        log.error(f'--start: expected {len(measured)} values (one per joint '
                  f'{list(node.joints)}), got {start.size}')
        return None, identify_plan.BAD_INPUT
    far = np.abs(start - measured)
    if np.any(far > START_TOLERANCE):
        j = int(np.argmax(far))
        log.error(f'--start: {node.joints[j]} is at {measured[j]:.6g}, not at '
                  f'{start[j]:.6g} (more than {START_TOLERANCE:g} away): move the arm to the '
                  'start first, or plan from where it is (without --start)')
        return None, identify_plan.BAD_INPUT
    return start, 0


def run(node, options, model, joints, workspace):
    """The exit status."""
    log = node.get_logger()
    start, code = start_of(node, options, log)
    if start is None:
        return code
    missing, zero = node.effort_problem(model, start)
    if missing and options.record is not None:
        log.error(f'no usable efforts on {node.states_topic}: efforts missing for {missing} '
                  '(empty or NaN: e.g. a joint_state_broadcaster without an effort state '
                  'interface); `identify estimate` needs the efforts the drives apply: '
                  'export them, then record; nothing sent')
        return NOT_ENDED
    if missing or zero:
        log.warning(f'no usable efforts on {node.states_topic}: '
                    + (f'efforts missing for {missing} (empty or NaN)' if missing else
                       'every joint\'s effort is 0 where gravity loads the arm (mock '
                       'hardware?)')
                    + ': the recording cannot identify the arm (`identify estimate` '
                    'needs the efforts the drives apply); sending the motion anyway')
    origin = ('--start' if options.start is not None
              else f'where {node.states_topic} says the arm is')
    try:
        plan = identify_plan.plan_and_write(options, model, joints, workspace, start, origin,
                                            out=log.info)
    except identify_plan.PlanError as error:
        log.error(str(error))
        return error.status
    if not node.find_server(options.timeout):
        if not node.running():
            return STOPPED
        log.error(f'no FollowJointTrajectory action server {options.send} within '
                  f'{options.timeout:g} s (is the controller active? `ros2 action list -t`)')
        return NOT_ENDED
    moved = np.abs(node.position() - plan.q[0])
    if np.any(moved > START_TOLERANCE):
        j = int(np.argmax(moved))
        log.error(f'the arm moved while the motion was planned: {joints[j]} is at '
                  f'{node.position()[j]:.6g}, the motion starts at {plan.q[0][j]:.6g}; '
                  'nothing sent')
        return NOT_ENDED
    code = recording_started(node, options.timeout)
    if code is not None:
        return code
    log.info(f'sending the motion to {options.send}'
             + (f', recording {node.states_topic}' if options.record else ''))
    code = node.run_goal(goal_trajectory(plan), options.timeout)
    node.stop_recording()
    # an aborted goal moved the arm too (e.g. a path tolerance, limits the controller
    # enforces): the recording is kept, for the user to judge
    if code not in (0, trajectory_client.FAILED) or options.record is None:
        return code
    if not node.recorded:
        log.error(f'nothing recorded on {node.states_topic} during the motion')
        return NOT_ENDED
    try:
        count = node.write_bag(options.record)
    except ValueError as error:              # BagError: e.g. rosbags missing
        log.error(str(error))
        return identify_plan.BAD_INPUT
    ranges, clipped = recorded_ranges(options.record, joints, plan, node.states_topic)
    log.info(ranges)
    if clipped:
        log.warning(clipped)
    log.info(f'recorded {count} messages of {node.states_topic} into {options.record}'
             + ('' if code == 0 else ' (kept although the goal did not succeed)')
             + f'; next: identify estimate --params-file {" ".join(options.params_files)} '
             f'--bag {options.record} --output identified.yaml')
    return code


CLIPPED = 0.02        # rad | m, and this share of the planned range: a recorded range short
CLIPPED_SHARE = 0.05  # of the planned one by more than both at either end is said


def recorded_ranges(folder, joints, plan, topic):
    """(one line: the planned and recorded range of each joint, one warning naming the
    joints whose recorded range falls short of the planned one (the motion was clipped,
    e.g. by limits in the robot's URDF tighter than the robot file's) or '')."""
    try:
        q = read_joint_states(folder, joints, topic).q
    except BagError as error:
        return f'the recorded range cannot be read: {error}', ''
    planned = np.stack((plan.q.min(axis=0), plan.q.max(axis=0)), axis=1)
    recorded = np.stack((q.min(axis=0), q.max(axis=0)), axis=1)
    margin = np.maximum(CLIPPED, CLIPPED_SHARE * (planned[:, 1] - planned[:, 0]))
    short = ((recorded[:, 0] > planned[:, 0] + margin)
             | (recorded[:, 1] < planned[:, 1] - margin))

    def span(pair):
        return f'[{pair[0]:.4g}, {pair[1]:.4g}]'
    line = 'range per joint, planned -> recorded: ' + ', '.join(
        f'{j} {span(p)} -> {span(r)}' for j, p, r in zip(joints, planned, recorded))
    clipped = ''
    if np.any(short):
        clipped = ('the motion was clipped: ' + ', '.join(
            f'{j} planned {span(p)}, recorded {span(r)}'
            for j, p, r, s in zip(joints, planned, recorded, short) if s)
            + ' (limits tighter than the robot file\'s, e.g. in the robot\'s URDF, or the '
            'controller could not follow); the recording is kept: estimate it, or give the '
            'robot file the limits the robot enforces and plan again')
    return line, clipped


def send(argv, options, model, joints, workspace):
    """`identify plan --send`: argv (with the ROS arguments) initialises rclpy."""
    log = rclpy.logging.get_logger(NODE_NAME)
    if trajectory_client.UNAVAILABLE is not None:
        log.error(f'--send: {trajectory_client.UNAVAILABLE} (build control_msgs, or send the '
                  '--output file with `ros2 action send_goal`: doc/identification.md)')
        return NOT_ENDED
    missing = missing_libraries(('scipy.optimize',) + (('rosbags',) if options.record
                                                        else ()))
    if missing:         # planning needs scipy, the bag (written after the motion) rosbags
        log.error(f'identify plan --send{" --record" if options.record else ""} {missing}')
        return NOT_ENDED
    try:
        with ros_session(argv) as stop:
            node = PlanSender(options, joints, stop.running)
            try:
                return run(node, options, model, joints, workspace)
            finally:
                node.executor_.shutdown()
                node.destroy_node()
    except ParamsFileError as error:
        log.error(str(error))
        return identify_plan.BAD_INPUT
