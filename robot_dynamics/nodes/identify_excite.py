"""`identify excite`: the optimised excitation through the running controller, with
/joint_states recorded into a rosbag2 folder (robot_dynamics.nodes.identify has the usage).

The model, its limits and the joint names are the controller's (its parameters, as the
`excite` executable reads them); the trajectory starts at rest where /joint_states says the
arm is. It goes as a FollowJointTrajectory goal when the controller offers the action,
else on its joint_trajectory topic (then the end of the motion is the controller's
~/status going from running to finished, or, for a controller without it, the duration
elapsed on the stamps of /joint_states). /joint_states is recorded from just before the
motion to its end as the serialised messages arrive (an rclpy raw subscription: nothing is
converted in the loop), with the reliability of its publishers and a deep queue.
"""

import math
import time

import numpy as np
import rclpy
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy)
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from robot_dynamics.joint_state_bag import BagError, JointStateBagWriter
from robot_dynamics.nodes import goal_sender
from robot_dynamics.nodes.excite import ExcitationSender
from robot_dynamics.nodes.params_file import ParamsFileError
from robot_dynamics.nodes.runner import ros_session
from robot_dynamics.nodes.send_trajectory import trajectory_message
from robot_dynamics.trajectory import TrajectoryCommand, TrajectoryPoint

NODE_NAME = 'identify'
SAMPLE_PERIOD = 0.02        # s between the trajectory points sent (the controller
#                             interpolates between them with their velocities and accelerations)
RECORD_DEPTH = 10000        # messages the recorder's queue holds while the executor is busy
NOT_ENDED = 1
STOPPED = 130


class ExcitationRecorder(ExcitationSender):
    """The controller's model and the start position (ExcitationSender's machinery), then,
    driven by `run`: the plan, the goal or the trajectory, and the recording."""

    def __init__(self, options, running, **kwargs):
        options.topic = f'{options.controller.rstrip("/")}/joint_trajectory'
        options.identify = options.apply = False
        super().__init__(options, node_name=NODE_NAME, **kwargs)
        self.running = running
        self.latest = self._latest           # what GoalSender reads after the goal
        self.recorded = []                   # (receive time [ns], CDR bytes)
        self._recording = False
        self._recorder = None
        self.status = None
        self.last_stamp = None               # header stamp [s] of the last /joint_states
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(String, f'{options.controller.rstrip("/")}/status',
                                 self._on_status, latched)

    # ExcitationSender sends as soon as it can; here `run` decides
    def try_send(self):
        pass

    def _on_joint_states(self, msg):
        if len(msg.position) != len(msg.name):
            return
        for name, position in zip(msg.name, msg.position):
            if math.isfinite(position):
                self._latest[name] = position
        self.last_stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9

    def _on_status(self, msg):
        self.status = msg.data

    def ready(self):
        """The model and every joint's position are known."""
        return self.joints is not None and all(j in self._latest for j in self.joints)

    def current_positions(self, joints, count, timeout):
        """(names, positions) of `joints` from /joint_states within `timeout` s (None)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.running():
            rclpy.spin_once(self, timeout_sec=0.05)
            if all(j in self._latest for j in joints):
                return list(joints), [self._latest[j] for j in joints]
        return None

    # ------------------------------------------------------------------ recording

    def start_recording(self):
        """Subscribe to the raw /joint_states with its publishers' reliability."""
        publishers = self.get_publishers_info_by_topic(self._states.topic_name)
        best_effort = any(p.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
                          for p in publishers)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=RECORD_DEPTH,
                         reliability=(ReliabilityPolicy.BEST_EFFORT if best_effort
                                      else ReliabilityPolicy.RELIABLE))
        self._recording = True
        self._recorder = self.create_subscription(JointState, self._states.topic_name,
                                                  self._on_raw_state, qos, raw=True)

    def _on_raw_state(self, data):
        if self._recording:
            self.recorded.append((self.get_clock().now().nanoseconds, data))

    def stop_recording(self):
        self._recording = False
        if self._recorder is not None:
            self.destroy_subscription(self._recorder)
            self._recorder = None

    def write_bag(self, folder):
        with JointStateBagWriter(folder, topic=self._states.topic_name) as writer:
            for received, data in self.recorded:
                writer.write_serialized(received * 1e-9, data)
        return writer.count


def excitation_command(excitation, joints, duration, period=SAMPLE_PERIOD):
    """TrajectoryCommand (start on arrival) of the planned excitation, a point every
    `period` s from 0 to `duration` (both ends at rest)."""
    count = max(2, int(math.ceil(duration / period)) + 1)
    t = np.linspace(0.0, duration, count)
    q, qd, qdd = excitation.sample(t)
    points = tuple(TrajectoryPoint(float(t[k]), tuple(map(float, q[k])),
                                   tuple(map(float, qd[k])), tuple(map(float, qdd[k])))
                   for k in range(count))
    return TrajectoryCommand(tuple(joints), points, 0.0)


def wait_for_topic_motion(node, duration, timeout):
    """After publishing on the topic: True once the controller's status went from running
    to finished or holding (or, without a status, /joint_states' stamps advanced by the
    duration); False when the states stop for `timeout` s or the controller reports
    state_timeout."""
    started_stamp = node.last_stamp
    seen_running = False
    last_count, last_change = len(node.recorded), time.monotonic()
    while node.running():
        rclpy.spin_once(node, timeout_sec=0.05)
        if node.status == 'running':
            seen_running = True
        elif node.status == 'state_timeout':
            return False
        elif seen_running and node.status in ('finished', 'holding'):
            return True
        if node.status is None and started_stamp is not None and node.last_stamp is not None \
                and node.last_stamp - started_stamp >= duration + 0.2:
            return True
        if len(node.recorded) != last_count:
            last_count, last_change = len(node.recorded), time.monotonic()
        elif time.monotonic() - last_change > timeout:
            return False
    return False


def run(node, options):
    """Returns the exit status."""
    log = node.get_logger()
    deadline = time.monotonic() + options.timeout
    while not (node.ready() or node.error) and node.running():
        if time.monotonic() > deadline:
            log.error(f'nothing sent within {options.timeout:g} s: {node.why_waiting()}')
            return 1
        rclpy.spin_once(node, timeout_sec=0.05)
    if not node.running():
        return STOPPED
    if node.error:
        return 1
    from robot_dynamics.arm_identification import optimal_excitation
    start = np.array([node._latest[j] for j in node.joints])
    planning = time.monotonic()
    try:
        excitation = optimal_excitation(node.model, options.duration, start, seed=options.seed)
    except ValueError as error:
        log.error(f'no excitation from {np.round(start, 4).tolist()}: {error}')
        return 1
    log.info(f'planned a {options.duration:g} s excitation from {np.round(start, 4).tolist()} '
             f'in {time.monotonic() - planning:.1f} s: condition number '
             f'{excitation.condition:.4g}')
    command = excitation_command(excitation, node.joints, options.duration)
    trajectory = trajectory_message(command)
    sender = goal_sender.GoalSender(node, f'{options.controller.rstrip("/")}/'
                                    f'{goal_sender.ACTION_NAME}')
    found = sender.find_controller(node.publisher, options.timeout, node.running)
    if found is None:
        if not node.running():
            return STOPPED
        log.error(f'no action server {sender.action_name} and no subscriber on '
                  f'{node.publisher.topic_name} within {options.timeout:g} s; is the '
                  'controller running (check --controller)?')
        return 1
    node.start_recording()
    move = f'the {options.duration:g} s excitation'
    if found == 'action':
        code = sender.run_goal(trajectory, move, options.timeout, no_wait=False)
    else:
        node.publisher.publish(trajectory)
        log.info(f'sent {move} on {node.publisher.topic_name} (no action server '
                 f'{sender.action_name}: {sender.unavailable or "not found"})')
        ended = wait_for_topic_motion(node, options.duration, options.timeout)
        code = 0 if ended else (STOPPED if not node.running() else NOT_ENDED)
        if code == NOT_ENDED:
            log.error(f'the motion did not end: {node.status or "no /joint_states"} '
                      f'(for {options.timeout:g} s)')
    node.stop_recording()
    if code != 0:
        return code
    if not node.recorded:
        log.error(f'nothing recorded on {node._states.topic_name} during the motion')
        return NOT_ENDED
    try:
        count = node.write_bag(options.record)
    except BagError as error:
        log.error(str(error))
        return 2
    log.info(f'recorded {count} messages of {node._states.topic_name} into {options.record}; '
             f'next: identify estimate --params-file ROBOT.yaml --bag {options.record} '
             '--output identified.yaml')
    return 0


def run_excite(argv, options):
    """main() of `identify excite`: argv (with the ROS arguments) initialises rclpy."""
    try:
        with ros_session(argv) as stop:
            node = ExcitationRecorder(options, stop.running)
            try:
                return run(node, options)
            finally:
                node.destroy_node()
    except ParamsFileError as error:
        rclpy.logging.get_logger(NODE_NAME).error(str(error))
        return 2
