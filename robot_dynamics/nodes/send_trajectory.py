"""`ros2 run robot_dynamics send_trajectory`: send one point-to-point move and exit.

    send_trajectory --positions 0.1 0.2 ... --duration 2.0 --profile quintic|trapezoid
                    [--joints j1 j2 ...] [--points 50] [--start-from q1 q2 ...]
                    [--topic /computed_torque_controller/joint_trajectory]
                    [--action /computed_torque_controller/follow_joint_trajectory]
                    [--joint-states-topic /joint_states] [--timeout 5.0] [--no-wait]
    send_trajectory --file PLAN.yaml [--goal-tolerance-unchecked] [--action ...] ...

With --file, the trajectory_msgs/JointTrajectory of a YAML file (``ros2 topic echo``'s
fields, as `identify plan --output` writes them; a goal's ``trajectory:`` key is read too)
is sent as it is, after checking that the arm (/joint_states) is within 0.01 rad or m of
its first point; --goal-tolerance-unchecked sends the goal's position and velocity
tolerances as -1 (not checked), as `identify` does for its excitation.

The move starts from --start-from, or else from the positions on /joint_states (waited for
up to --timeout). Without --joints the names come from /joint_states, or are joint_1 ..
joint_n when --start-from is given. The trajectory_msgs/JointTrajectory holds --points
samples of the profile (positions, velocities, accelerations, none at t = 0) with
header.stamp = 0 (start on arrival); it is published reliably once a subscriber has matched
(waited for up to --timeout).

When the controller offers the FollowJointTrajectory action (`--action`, by default beside
`--topic`), the move goes as a goal instead (robot_dynamics.nodes.common.trajectory_client): the
sender waits for the outcome and prints it. Without an action server (or without
control_msgs) it publishes on the topic and says that the outcome is unknown.

Exit status: 0 sent on the topic, or the goal SUCCESSFUL (with --no-wait: accepted and
running), 1 timed out (or a bad --params-file), 2 bad arguments, 3 goal refused (the
reason is printed), 4 goal failed (aborted, preempted or canceled), 130 stopped by Ctrl-C
(or SIGTERM); a running goal is canceled first.
"""

import argparse
import math
import sys
import time

import rclpy
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data, QoSProfile, ReliabilityPolicy
from rclpy.utilities import remove_ros_args
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
import yaml

from robot_dynamics.nodes.common import trajectory_client
from robot_dynamics.parameters.params_file import check_params_files, ParamsFileError
from robot_dynamics.nodes.common.runner import ros_session
from robot_dynamics.nodes.common.trajectory_client import (  # noqa: F401 - its names
    duration_message, trajectory_message)
from robot_dynamics.trajectories.profiles import PROFILES, sample_profile

DEFAULT_TOPIC = '/computed_torque_controller/joint_trajectory'
STOPPED = 130          # exit status after Ctrl-C / SIGTERM, as a shell reports SIGINT


def parse_arguments(argv):
    """Parse and check the command line (without ROS arguments); exits with status 2."""
    parser = argparse.ArgumentParser(
        prog='send_trajectory', description='Send one point-to-point joint move.')
    parser.add_argument('--positions', type=float, nargs='+',
                        help='goal positions (rad or m), one per joint')
    parser.add_argument('--duration', type=float, help='move time T (s)')
    parser.add_argument('--file', default=None, metavar='PLAN.yaml',
                        help='send this trajectory_msgs/JointTrajectory YAML file instead '
                        '(e.g. what `identify plan --output` writes)')
    parser.add_argument('--goal-tolerance-unchecked', action='store_true',
                        dest='unchecked', help='send the goal tolerances on position and '
                        'velocity as -1 (not checked)')
    parser.add_argument('--profile', choices=sorted(PROFILES), default='quintic',
                        help='quintic (rest to rest) or [SAS] trapezoid (default: quintic)')
    parser.add_argument('--joints', nargs='+', help='joint names (default: see above)')
    parser.add_argument('--points', type=int, default=50, help='samples sent (default: 50)')
    parser.add_argument('--start-from', type=float, nargs='+', dest='start_from',
                        help='start positions (default: read /joint_states)')
    parser.add_argument('--topic', default=DEFAULT_TOPIC, help=f'default: {DEFAULT_TOPIC}')
    parser.add_argument('--action', default=None,
                        help='FollowJointTrajectory action (default: beside --topic, '
                             f'{trajectory_client.action_beside(DEFAULT_TOPIC)})')
    parser.add_argument('--joint-states-topic', default='/joint_states', dest='states_topic')
    parser.add_argument('--timeout', type=float, default=5.0,
                        help='seconds to wait for /joint_states, for the controller and '
                             'for the goal response')
    parser.add_argument('--no-wait', action='store_true', dest='no_wait',
                        help='with the action: exit once the goal runs, not at its end')
    args = parser.parse_args(argv)
    if args.file is not None:
        if args.positions is not None or args.duration is not None:
            parser.error('--file: give either --file or --positions and --duration')
        if args.action is None:
            args.action = trajectory_client.action_beside(args.topic)
        try:
            args.trajectory = trajectory_from_file(args.file)
        except ValueError as error:
            parser.error(f'--file {args.file}: {error}')
        return args
    if args.positions is None or args.duration is None:
        parser.error('--positions and --duration are required (or --file)')
    n = len(args.positions)
    for name, values in (('--positions', args.positions), ('--start-from', args.start_from)):
        if values is not None and not all(math.isfinite(v) for v in values):
            parser.error(f'{name}: values must be finite, got {values}')
    if not (math.isfinite(args.duration) and args.duration > 0.0):
        parser.error(f'--duration: must be finite and > 0, got {args.duration}')
    if args.points < 1:
        parser.error(f'--points: must be >= 1, got {args.points}')
    if not (math.isfinite(args.timeout) and args.timeout > 0.0):
        parser.error(f'--timeout: must be > 0, got {args.timeout}')
    if args.joints is not None and (len(args.joints) != n or len(set(args.joints)) != n):
        parser.error(f'--joints: need {n} distinct names (one per --positions value), '
                     f'got {args.joints}')
    if args.start_from is not None and len(args.start_from) != n:
        parser.error(f'--start-from: need {n} values (one per --positions value), '
                     f'got {len(args.start_from)}')
    if args.start_from is not None and args.joints is None:
        args.joints = [f'joint_{i + 1}' for i in range(n)]
    if args.action is None:
        args.action = trajectory_client.action_beside(args.topic)
    return args


START_TOLERANCE = 0.01     # rad | m between the file's first point and the arm


def trajectory_from_file(path):
    """The trajectory_msgs/JointTrajectory of a YAML file (its fields as ``ros2 topic
    echo`` writes them, or a goal's ``trajectory:``); ValueError with one line."""
    loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)     # libyaml's: much faster
    try:
        with open(path, encoding='utf-8') as stream:
            fields = yaml.load(stream, Loader=loader)
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(str(error).splitlines()[0]) from None
    if isinstance(fields, dict) and 'trajectory' in fields:
        fields = fields['trajectory']
    if not isinstance(fields, dict) or not fields.get('joint_names') or not fields.get(
            'points'):
        raise ValueError('expected a trajectory_msgs/JointTrajectory (joint_names, points)')
    names = [str(n) for n in fields['joint_names']]
    msg = JointTrajectory(joint_names=names)
    points = []
    for k, point in enumerate(fields['points']):
        try:
            values = {key: [float(v) for v in point.get(key) or []]
                      for key in ('positions', 'velocities', 'accelerations', 'effort')}
            stamp = point.get('time_from_start') or {}
            seconds = float(stamp.get('sec', 0)) + 1e-9 * float(stamp.get('nanosec', 0))
        except (AttributeError, TypeError, ValueError):
            raise ValueError(f'points[{k}]: not a JointTrajectoryPoint') from None
        if len(values['positions']) != len(names) or not all(
                math.isfinite(v) for vs in values.values() for v in vs):
            raise ValueError(f'points[{k}]: expected {len(names)} finite positions')
        points.append(JointTrajectoryPoint(time_from_start=duration_message(seconds),
                                           **values))
    msg.points = points
    return msg


class TrajectorySender(Node):
    """Reads the start on /joint_states if needed, then publishes one trajectory."""

    def __init__(self, topic, states_topic, running=None):
        super().__init__('send_trajectory')
        self.running = running or self.context.ok   # False: Ctrl-C, stop waiting
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.publisher = self.create_publisher(JointTrajectory, topic, reliable)
        self.states_topic = states_topic
        self.latest = {}

    def current_positions(self, joints, count, timeout):
        """Positions of `joints` (or of the first `count` joints seen if None) from the
        joint-state topic, mapped by name; (names, positions) or None on timeout."""
        subscription = self.create_subscription(
            JointState, self.states_topic, self._on_joint_state, qos_profile_sensor_data)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and self.running():
                rclpy.spin_once(self, timeout_sec=0.05)
                names = joints if joints is not None else list(self.latest)
                if len(names) >= count and all(j in self.latest for j in names):
                    return names, [self.latest[j] for j in names]
            return None
        finally:
            self.destroy_subscription(subscription)

    def _on_joint_state(self, msg):
        if len(msg.position) != len(msg.name):
            self.get_logger().warning(f'{self.states_topic}: {len(msg.name)} names but '
                                      f'{len(msg.position)} positions, ignored')
            return
        for name, position in zip(msg.name, msg.position):
            if math.isfinite(position):
                self.latest[name] = position

    def publish(self, msg, timeout):
        """Publish to the matched subscribers and wait for their acknowledgement."""
        self.publisher.publish(msg)
        if not self.publisher.wait_for_all_acked(Duration(seconds=timeout)):
            self.get_logger().warning('the trajectory was published but not acknowledged')


def run_file(node, args):
    """--file: the trajectory sent as it is, from where the arm is; the exit status."""
    logger = node.get_logger()
    trajectory = args.trajectory
    names = list(trajectory.joint_names)
    found = node.current_positions(names, len(names), args.timeout)
    if not node.running():
        return STOPPED
    if found is None:
        logger.error(f'no positions for {names} on {args.states_topic} within '
                     f'{args.timeout} s; is the robot running?')
        return 1
    first = trajectory.points[0].positions
    far = [abs(a - b) for a, b in zip(found[1], first)]
    if max(far) > START_TOLERANCE:
        j = far.index(max(far))
        logger.error(f'{names[j]} is at {found[1][j]:.6g}, the trajectory starts at '
                     f'{first[j]:.6g} (more than {START_TOLERANCE:g} away): move the arm to '
                     'its first point first; nothing sent')
        return 1
    end = trajectory.points[-1].time_from_start
    move = (f'the {end.sec + 1e-9 * end.nanosec:g} s trajectory of {args.file} '
            f'({len(trajectory.points)} points)')
    tolerance = (trajectory_client.goal_ending_with_the_motion(trajectory).goal_tolerance
                 if args.unchecked else None)
    return send(node, args, trajectory, move, tolerance)


def send(node, args, trajectory, move, tolerance=None, watch=''):
    """`trajectory` as a goal to the action server, or on the topic when there is none
    (`watch`: what to look at then); the exit status."""
    logger = node.get_logger()
    sender = trajectory_client.GoalSender(node, args.action)
    found = sender.find_controller(node.publisher, args.timeout, node.running)
    if found == 'action':
        return sender.run_goal(trajectory, move, args.timeout, args.no_wait, tolerance)
    if found == 'topic':
        node.publish(trajectory, args.timeout)
        logger.info(f'sent {move} on {node.publisher.topic_name}; no action server '
                    f'{sender.action_name} ({sender.unavailable or "not found"}): the outcome '
                    f'is unknown{watch}')
        return 0
    if not node.running():
        return STOPPED
    logger.error(f'no subscriber on {node.publisher.topic_name} and no action server '
                 f'{sender.action_name} within {args.timeout} s; is the controller running '
                 '(check --topic, --action)?')
    return 1


def run(node, args):
    """Returns the exit status."""
    if args.file is not None:
        return run_file(node, args)
    logger = node.get_logger()
    n = len(args.positions)
    if args.start_from is not None:
        joints, start = args.joints, args.start_from
    else:
        found = node.current_positions(args.joints, n, args.timeout)
        if not node.running():
            return STOPPED
        if found is None:
            wanted = args.joints if args.joints is not None else f'{n} joints'
            logger.error(f'no positions for {wanted} on {args.states_topic} within '
                         f'{args.timeout} s; is the robot (or plant) running? '
                         'Or give --start-from')
            return 1
        joints, start = found
        if args.joints is None and len(joints) != n:
            logger.error(f'{args.states_topic} has {len(joints)} joints {joints} but '
                         f'--positions has {n} values; give --joints')
            return 1
    command = sample_profile(args.profile, start, args.positions, args.duration,
                             args.points, joints)
    move = (f'a {args.duration} s {args.profile} move of {joints} from '
            f'{[round(q, 4) for q in start]} to {args.positions} ({args.points} points)')
    return send(node, args, trajectory_message(command), move,
                watch=' (watch ~/status and ~/goal_reached)')


def main(args=None):
    argv = sys.argv if args is None else list(args)
    try:
        check_params_files(argv)         # before rcl reads them (remove_ros_args does)
        options = parse_arguments(remove_ros_args(argv)[1:])
        with ros_session(argv) as stop:
            node = TrajectorySender(options.topic, options.states_topic, stop.running)
            try:
                return run(node, options)
            finally:
                node.destroy_node()
    except ParamsFileError as error:     # --ros-args --params-file: checked before rcl
        rclpy.logging.get_logger('send_trajectory').error(str(error))
        return 1


if __name__ == '__main__':
    sys.exit(main())
