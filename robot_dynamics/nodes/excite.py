"""`ros2 run robot_dynamics excite`: send an exciting trajectory for payload identification.

    excite [--duration 20] [--amplitude 0.5 [...]] [--harmonics 5] [--base-frequency 0.2]
           [--seed 0] [--sample-period 0.02]
           [--topic /computed_torque_controller/joint_trajectory]
           [--joint-states-topic /joint_states] [--timeout 5.0]
           --ros-args --params-file <robot preset, the controller's>

A finite Fourier series per joint (robot_dynamics.identification.exciting_trajectory) that
starts and ends at rest at the position read on /joint_states, at most --amplitude from it
(rad | m; one value, or one per joint), scaled down per joint where it would come within
10 % of a position or velocity limit of the robot model. The model and the joint names come
from the ROS parameters, exactly as the controller reads them (robot block, `joints`; with
robot.source urdf also the robot_description topic): give the excite node the controller's
parameter file, so the limits are the ones the controller checks. The trajectory is sent as
trajectory_msgs/JointTrajectory with a point every --sample-period s (positions, velocities,
accelerations) from time_from_start 0 (the measured start: the controller's reference steps
to where the arm is), header.stamp 0 (start on arrival). Exit status: 0 sent, 1 timed out or no
valid trajectory, 2 bad arguments, 130 stopped before sending.
"""

import argparse
import math
import sys
import time
import warnings

import numpy as np
import rclpy
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data, QoSProfile, ReliabilityPolicy
from rclpy.utilities import remove_ros_args
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.identification import ExcitationWarning, exciting_trajectory
from robot_dynamics.nodes.ros_params import ConfigurationError, declare_robot
from robot_dynamics.nodes.runner import ros_session
from robot_dynamics.nodes.send_trajectory import DEFAULT_TOPIC, STOPPED, trajectory_message
from robot_dynamics.trajectory import TrajectoryCommand, TrajectoryPoint

NODE_NAME = 'excite'


def parse_arguments(argv):
    """Parse and check the command line (without ROS arguments); exits with status 2."""
    parser = argparse.ArgumentParser(
        prog='excite', description='Send an exciting trajectory (payload identification) '
        'from the current /joint_states position.')
    parser.add_argument('--duration', type=float, default=20.0,
                        help='length of the trajectory [s] (default: 20)')
    parser.add_argument('--amplitude', type=float, nargs='+', default=[0.5],
                        help='largest excursion from the start [rad | m], one value or one '
                        'per joint (default: 0.5)')
    parser.add_argument('--harmonics', type=int, default=5,
                        help='harmonics of the Fourier series, >= 2 (default: 5)')
    parser.add_argument('--base-frequency', type=float, default=0.2, dest='base_frequency',
                        help='base frequency [Hz], rounded to whole periods (default: 0.2)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the Fourier coefficients (default: 0)')
    parser.add_argument('--sample-period', type=float, default=0.02, dest='sample_period',
                        help='time between trajectory points [s] (default: 0.02)')
    parser.add_argument('--topic', default=DEFAULT_TOPIC, help=f'default: {DEFAULT_TOPIC}')
    parser.add_argument('--joint-states-topic', default='/joint_states', dest='states_topic')
    parser.add_argument('--timeout', type=float, default=5.0,
                        help='seconds to wait for the model, /joint_states and a subscriber')
    args = parser.parse_args(argv)
    for name in ('duration', 'base_frequency', 'sample_period', 'timeout'):
        value = getattr(args, name)
        if not (math.isfinite(value) and value > 0.0):
            parser.error(f'--{name.replace("_", "-")}: must be finite and > 0, got {value}')
    if not all(math.isfinite(v) and v >= 0.0 for v in args.amplitude):
        parser.error(f'--amplitude: values must be finite and >= 0, got {args.amplitude}')
    if args.harmonics < 2:
        parser.error(f'--harmonics: need at least 2, got {args.harmonics}')
    if args.sample_period > args.duration:
        parser.error('--sample-period: longer than --duration')
    return args


def excitation_command(model, joints, start, duration, amplitude=0.5, harmonics=5,
                       base_frequency=0.2, seed=0, sample_period=0.02):
    """(TrajectoryCommand of the exciting trajectory from `start`, [warnings about joints
    scaled down]); raises ValueError (e.g. a start outside the position limits). Its first
    point, at t = 0, is `start` at rest: the controller's reference steps there (JTC
    semantics), to where the arm is even if it had sagged away from its reference."""
    amplitude = np.asarray(amplitude, dtype=float)
    if amplitude.size not in (1, model.n):
        raise ValueError(f'amplitude: one value or {model.n} (one per joint), got '
                         f'{amplitude.size}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', ExcitationWarning)
        t, q, qd, qdd = exciting_trajectory(
            model, duration, amplitude=amplitude if amplitude.size > 1 else float(amplitude[0]),
            harmonics=harmonics, base_frequency=base_frequency, start=start,
            sample_period=sample_period, seed=seed)
    points = tuple(TrajectoryPoint(float(t[k]), tuple(map(float, q[k])),
                                   tuple(map(float, qd[k])), tuple(map(float, qdd[k])))
                   for k in range(len(t)))
    notes = [str(w.message) for w in caught if issubclass(w.category, ExcitationWarning)]
    return TrajectoryCommand(tuple(joints), points, 0.0), notes


class ExcitationSender(Node):
    """Builds the model from its parameters, reads the start on /joint_states, and sends
    the exciting trajectory once the controller's trajectory topic has a subscriber;
    `sent` then turns true (`error` holds why nothing can be sent)."""

    def __init__(self, options, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.options = options
        self.model = self.joints = None
        self.sent = False
        self.error = None
        self.start = None
        self._latest = {}
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.publisher = self.create_publisher(JointTrajectory, options.topic, reliable)
        self._states = self.create_subscription(JointState, options.states_topic,
                                                self._on_joint_states, qos_profile_sensor_data)
        try:
            declare_robot(self, self._on_model)
        except Exception:
            self.destroy_node()
            raise

    def _on_model(self, model, joints):
        self.model, self.joints = model, joints

    def _on_joint_states(self, msg):
        if self.sent or self.error or len(msg.position) != len(msg.name):
            return
        for name, position in zip(msg.name, msg.position):
            if math.isfinite(position):
                self._latest[name] = position
        self.try_send()

    def try_send(self):
        """Send if the model, every joint's position and a subscriber are there."""
        if self.sent or self.error or self.joints is None \
                or not all(j in self._latest for j in self.joints) \
                or self.publisher.get_subscription_count() == 0:
            return
        o = self.options
        self.start = np.array([self._latest[j] for j in self.joints])
        try:
            command, notes = excitation_command(
                self.model, self.joints, self.start, o.duration, o.amplitude, o.harmonics,
                o.base_frequency, o.seed, o.sample_period)
        except ValueError as error:
            self.error = str(error)
            self.get_logger().error(f'no exciting trajectory from {self.start.tolist()}: '
                                    f'{error}')
            return
        for note in notes:
            self.get_logger().warning(note)
        self.publisher.publish(trajectory_message(command))
        self.sent = True
        excursion = np.max(np.abs(np.array([p.positions for p in command.points])
                                  - self.start), axis=0)
        self.get_logger().info(
            f'sent a {o.duration:g} s exciting trajectory ({len(command.points)} points) on '
            f'{self.publisher.topic_name} from {np.round(self.start, 4).tolist()}; largest '
            f'excursion per joint {np.round(excursion, 3).tolist()} rad|m')

    def why_waiting(self):
        if self.joints is None:
            return 'no robot model (pass the robot parameters: --ros-args --params-file ...)'
        missing = [j for j in self.joints if j not in self._latest]
        if missing:
            return f'no positions for {missing} on {self.options.states_topic}'
        return f'no subscriber on {self.publisher.topic_name}; is the controller running?'


def main(args=None):
    argv = sys.argv if args is None else list(args)
    options = parse_arguments(remove_ros_args(argv)[1:])
    with ros_session(argv) as stop:
        try:
            node = ExcitationSender(options)
        except ConfigurationError as error:
            rclpy.logging.get_logger(NODE_NAME).error(f'bad parameter: {error}')
            return 1
        try:
            deadline = time.monotonic() + options.timeout
            while not (node.sent or node.error) and stop.running():
                if time.monotonic() > deadline:
                    node.get_logger().error(f'nothing sent within {options.timeout:g} s: '
                                            f'{node.why_waiting()}')
                    return 1
                rclpy.spin_once(node, timeout_sec=0.05)
                node.try_send()
            if node.error:
                return 1
            if not node.sent:
                return STOPPED
            node.publisher.wait_for_all_acked(Duration(seconds=options.timeout))
            return 0
        finally:
            node.destroy_node()


if __name__ == '__main__':
    sys.exit(main())
