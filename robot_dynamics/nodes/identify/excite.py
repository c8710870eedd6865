"""`identify excite`: the optimised excitation through the running controller, with
/joint_states recorded into a rosbag2 folder (robot_dynamics.nodes.identify has the usage).

The model, its limits and the joint names are the controller's (its parameters, as the
`excite` executable reads them); the trajectory starts at rest where /joint_states says the
arm is. It goes as a FollowJointTrajectory goal when the controller offers the action,
else on its joint_trajectory topic (then the end of the motion is the controller's
~/status going from running to finished, or, for a controller without it, the duration
elapsed on the stamps of /joint_states). /joint_states is recorded from just before the
motion to its end as the serialised messages arrive (an rclpy raw subscription: nothing is
converted in the loop), with the reliability of its publishers and a deep queue. The bag's
metadata custom_data says how its efforts are timed (``robot_dynamics.effort_timing``, read
by `identify estimate`): held_before when the publisher of /joint_states is this package's
plant (its node name ``plant_simulator``: the effort held over the step that ends at the
message), else instant (a driver's measured effort), unless ``--effort-timing`` says.
"""

import math
import struct
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy)
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from robot_dynamics.identification.arm import optimal_excitation
from robot_dynamics.identification.recordings import BagError, JointStateBagWriter
from robot_dynamics.nodes.excite import ExcitationSender
from robot_dynamics.parameters.params_file import ParamsFileError
from robot_dynamics.nodes.identify.common import (EFFORT_TIMING_KEY, missing_libraries,
                                                  NOT_ENDED, RECORDED_BY_KEY, STOPPED)
from robot_dynamics.nodes.common import trajectory_client
from robot_dynamics.nodes.common.runner import ros_session
from robot_dynamics.nodes.common.trajectory_client import trajectory_message
from robot_dynamics.trajectories.sampler import TrajectoryCommand, TrajectoryPoint

NODE_NAME = 'identify'
SAMPLE_PERIOD = 0.02        # s between the trajectory points sent (the controller
#                             interpolates between them with their velocities and accelerations)
RECORD_DEPTH = 10000        # messages the recorder's queue holds while the executor is busy
PLANT_NODE = 'plant_simulator'   # this package's plant: its efforts are held_before


class ExcitationRecorder(ExcitationSender):
    """The controller's model and the start position (ExcitationSender's machinery), then,
    driven by `run`: the plan, the goal or the trajectory, and the recording. Everything
    runs on one executor (`spin`) the node is added to once, rather than a spin per call
    on rclpy's global executor (which adds and removes the node each time) while
    /joint_states arrives at a high rate."""

    def __init__(self, options, running, **kwargs):
        options.topic = f'{options.controller.rstrip("/")}/joint_trajectory'
        options.identify = options.apply = False
        super().__init__(options, node_name=NODE_NAME, **kwargs)
        self.running = running
        self.states_topic = self._states.topic_name
        self.recorded = []                   # (receive time [ns], CDR bytes)
        self.publishers_ = []                # node names publishing the joint states
        self._recording = False
        self._recorder = None
        self.status = None
        self.last_stamp = None               # header stamp [s] of the last /joint_states
        controller = options.controller.rstrip('/')
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(String, f'{controller}/status', self._on_status, latched)
        self.action_name = f'{controller}/{trajectory_client.ACTION_NAME}'
        self.action = (None if trajectory_client.UNAVAILABLE is not None else
                       trajectory_client.ActionClient(
                           self, trajectory_client.FollowJointTrajectory, self.action_name))
        self.executor_ = SingleThreadedExecutor(context=self.context)
        self.executor_.add_node(self)

    def spin(self, timeout=0.05):
        self.executor_.spin_once(timeout_sec=timeout)

    def spin_until(self, done, timeout=None):
        """Spin until done(); False after `timeout` s or on a stop request."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            if not self.running() or (deadline is not None and time.monotonic() > deadline):
                return False
            self.spin()
        return True

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

    def find_controller(self, timeout):
        """'action' once the controller's action server is there (and has had time to see
        us), 'topic' when only its trajectory topic has a subscriber (a grace period after
        it matched), None after `timeout` s or a stop."""
        return trajectory_client.find_controller(self.action, self.publisher, timeout,
                                                 self.running, self.spin)

    # ------------------------------------------------------------------ recording

    def start_recording(self, timeout):
        """Subscribe to the raw /joint_states with its publishers' reliability (the parsed
        subscription is no longer needed: half the callbacks), and wait until the new
        subscription has received a state: it matches its publishers only after discovery
        (tens of ms, seconds on a busy machine), and a motion sent before would be recorded
        without its beginning. False when no state came within `timeout` s or on a stop."""
        topic = self.states_topic
        publishers = self.get_publishers_info_by_topic(topic)
        self.publishers_ = sorted({p.node_name for p in publishers})
        best_effort = any(p.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
                          for p in publishers)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=RECORD_DEPTH,
                         reliability=(ReliabilityPolicy.BEST_EFFORT if best_effort
                                      else ReliabilityPolicy.RELIABLE))
        self.destroy_subscription(self._states)
        self._recording = True
        self._recorder = self.create_subscription(JointState, topic, self._on_raw_state, qos,
                                                  raw=True)
        return self.spin_until(lambda: bool(self.recorded), timeout)

    def _on_raw_state(self, data):
        if self._recording:
            self.recorded.append((self.get_clock().now().nanoseconds, data))

    def stop_recording(self):
        """Stop, with the states already delivered to the recorder but not yet taken by the
        executor (on a busy machine the goal's result can be handled before them: the last
        moments of the motion, an abort's cause among them, would be lost)."""
        if self._recorder is not None:
            take_waiting(self._recorder, self._on_raw_state)
            self.destroy_subscription(self._recorder)
            self._recorder = None
        self._recording = False

    def effort_timing(self, chosen=None):
        """(timing, why): `chosen`, else held_before for this package's plant, else
        instant."""
        if chosen:
            return chosen, 'as given'
        if PLANT_NODE in self.publishers_:
            return 'held_before', f'{self.states_topic} is published by {PLANT_NODE}'
        return 'instant', f'{self.states_topic} is published by {self.publishers_ or "?"}'

    def write_bag(self, folder, timing='instant'):
        recorder = getattr(self, 'RECORDED_BY', 'identify excite')
        with JointStateBagWriter(folder, topic=self.states_topic,
                                 custom_data={EFFORT_TIMING_KEY: timing,
                                              RECORDED_BY_KEY: recorder}) as writer:
            for received, data in self.recorded:
                writer.write_serialized(received * 1e-9, data)
        return writer.count

    # ------------------------------------------------------------------ the motion

    def run_goal(self, trajectory, timeout):
        """The motion as a FollowJointTrajectory goal that ends with the motion; the exit
        status."""
        return trajectory_client.follow(
            self.action, self.action_name,
            trajectory_client.goal_ending_with_the_motion(trajectory), timeout,
            self.spin_until, self.running, self.get_logger())

    def run_topic(self, trajectory, duration, timeout):
        """The motion on the trajectory topic; the exit status. Done when the controller's
        status went from running to finished or holding (or, without a status, once
        /joint_states' stamps advanced by the duration); failed when the states stop for
        `timeout` s or the controller reports state_timeout."""
        log = self.get_logger()
        self.publisher.publish(trajectory)
        log.info(f'sent the motion on {self.publisher.topic_name} (no action server '
                 f'{self.action_name}: {trajectory_client.UNAVAILABLE or "not found"})')
        first = None
        seen_running = False
        last_count, last_change = 0, time.monotonic()
        while self.running():
            self.spin()
            if self.status == 'running':
                seen_running = True
            elif self.status == 'state_timeout':
                log.error('the motion did not end: the controller stopped (state_timeout)')
                return NOT_ENDED
            elif seen_running and self.status in ('finished', 'holding'):
                return 0
            if self.recorded:
                stamp = _stamp(self.recorded[-1][1])
                first = stamp if first is None else first
                if self.status is None and stamp - first >= duration + 0.2:
                    return 0
            if len(self.recorded) != last_count:
                last_count, last_change = len(self.recorded), time.monotonic()
            elif time.monotonic() - last_change > timeout:
                log.error(f'the motion did not end: no {self.states_topic} for '
                          f'{timeout:g} s')
                return NOT_ENDED
        return STOPPED


def take_waiting(subscription, callback):
    """Call `callback` with each message waiting in `subscription`'s queue, oldest first
    (raw subscriptions get the CDR bytes); nothing on an rclpy without take_message."""
    handle = subscription.handle
    if not hasattr(handle, 'take_message'):
        return
    with handle:
        taken = handle.take_message(subscription.msg_type, subscription.raw)
        while taken is not None:
            callback(taken[0])
            taken = handle.take_message(subscription.msg_type, subscription.raw)


def _stamp(data):
    """The header stamp [s] of a CDR-serialised JointState (4-byte encapsulation header,
    then sec int32 and nanosec uint32, little endian)."""
    sec, nanosec = struct.unpack_from('<iI', data, 4)
    return sec + nanosec * 1e-9


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


def recording_started(node, timeout):
    """None once the recorder has its first state; else the exit status, said."""
    if node.start_recording(timeout):
        return None
    node.stop_recording()
    if not node.running():
        return STOPPED
    node.get_logger().error(f'no {node.states_topic} reached the recorder within {timeout:g} s '
                            '(its publisher stopped?); nothing sent')
    return NOT_ENDED


def run(node, options):
    """Returns the exit status."""
    log = node.get_logger()
    deadline = time.monotonic() + options.timeout
    while not (node.ready() or node.error) and node.running():
        if time.monotonic() > deadline:
            log.error(f'nothing sent within {options.timeout:g} s: {node.why_waiting()}')
            return 1
        node.spin()
    if not node.running():
        return STOPPED
    if node.error:
        return 1
    start = np.array([node._latest[j] for j in node.joints])
    planning = time.monotonic()
    try:
        excitation = optimal_excitation(node.model, options.duration, start, seed=options.seed,
                                        iterations=options.iterations)
    except ValueError as error:
        log.error(f'no excitation from {np.round(start, 4).tolist()}: {error}')
        return 1
    log.info(f'planned a {options.duration:g} s excitation from {np.round(start, 4).tolist()} '
             f'in {time.monotonic() - planning:.1f} s: condition number '
             f'{excitation.condition:.4g}')
    trajectory = trajectory_message(excitation_command(excitation, node.joints,
                                                       options.duration))
    found = node.find_controller(options.timeout)
    if found is None:
        if not node.running():
            return STOPPED
        log.error(f'no action server {node.action_name} and no subscriber on '
                  f'{node.publisher.topic_name} within {options.timeout:g} s; is the '
                  'controller running (check --controller)?')
        return 1
    code = recording_started(node, options.timeout)
    if code is not None:
        return code
    if found == 'action':
        code = node.run_goal(trajectory, options.timeout)
    else:
        code = node.run_topic(trajectory, options.duration, options.timeout)
    node.stop_recording()
    # an aborted goal moved the arm too (e.g. a path tolerance): the recording is kept, for
    # the user to judge, as `identify plan --send` keeps it
    if code not in (0, trajectory_client.FAILED):
        return code
    if not node.recorded:
        log.error(f'nothing recorded on {node.states_topic} during the motion')
        return NOT_ENDED
    timing, why = node.effort_timing(getattr(options, 'effort_timing', None))
    try:
        count = node.write_bag(options.record, timing)
    except BagError as error:
        log.error(str(error))
        return 2
    log.info(f'recorded {count} messages of {node.states_topic} into {options.record} '
             f'(effort timing {timing}: {why})'
             + ('' if code == 0 else ' (kept although the goal did not succeed)')
             + f'; next: identify estimate --params-file ROBOT.yaml --bag {options.record} '
             '--output identified.yaml')
    return code


def run_excite(argv, options):
    """main() of `identify excite`: argv (with the ROS arguments) initialises rclpy."""
    missing = missing_libraries(('scipy.optimize', 'rosbags'))
    if missing:         # said before anything moves: planning needs scipy, the bag rosbags
        rclpy.logging.get_logger(NODE_NAME).error(f'identify excite {missing}')
        return 1
    try:
        with ros_session(argv) as stop:
            node = ExcitationRecorder(options, stop.running)
            try:
                return run(node, options)
            finally:
                node.executor_.shutdown()
                node.destroy_node()
    except ParamsFileError as error:
        rclpy.logging.get_logger(NODE_NAME).error(str(error))
        return 2
