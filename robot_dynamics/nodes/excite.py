"""`ros2 run robot_dynamics excite`: send an exciting trajectory for payload identification.

    excite [--duration 20] [--amplitude 0.5 [...]] [--harmonics 5] [--base-frequency 0.2]
           [--seed 0] [--sample-period 0.02]
           [--topic /computed_torque_controller/joint_trajectory]
           [--controller /computed_torque_controller]
           [--joint-states-topic /joint_states] [--timeout 5.0] [--identify | --apply]

A finite Fourier series per joint (robot_dynamics.identification.exciting_trajectory) that
starts and ends at rest at the position read on /joint_states, at most --amplitude from it
(rad | m; one value, or one per joint), scaled down per joint where it would come within
10 % of a position or velocity limit. The robot model, its limits and the joint names are
the controller's: read from its parameters (`robot.*`, `joints`, `robot_description`;
the node is --controller, by default the one of --topic), or, for a URDF the controller got
on the robot_description topic, with the URDF from that topic. So the trajectory respects
exactly the limits the controller checks. It is sent as
trajectory_msgs/JointTrajectory with a point every --sample-period s (positions, velocities,
accelerations) from time_from_start 0 (the measured start: the controller's reference steps
to where the arm is), header.stamp 0 (start on arrival).

With --identify it runs the whole identification through the controller's interfaces, for
a machine without the ros2 command line: identification.enabled true before sending, false
once the controller's ~/status says the trajectory finished, then it prints the final
estimate (~/payload_estimate/quality); --apply also calls ~/apply_payload_estimate.

Exit status: 0 sent (--identify: the estimate is usable; --apply: and applied), 1 timed out,
no valid trajectory, an estimate not usable or an apply refused, 2 bad arguments, 130
stopped (Ctrl-C, SIGTERM).
"""

import argparse
import math
import sys
import time
import warnings

import numpy as np
import rclpy
from rclpy.duration import Duration
from diagnostic_msgs.msg import DiagnosticStatus
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
from rclpy.node import Node
from rclpy.parameter import Parameter, parameter_value_to_python
from rclpy.qos import (DurabilityPolicy, qos_profile_sensor_data, QoSProfile,
                       ReliabilityPolicy)
from rclpy.utilities import remove_ros_args
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.identification import ExcitationWarning, exciting_trajectory
from robot_dynamics.nodes.common.ros_params import ConfigurationError, robot_model
from robot_dynamics.nodes.common.runner import ros_session
from robot_dynamics.nodes.send_trajectory import DEFAULT_TOPIC, STOPPED, trajectory_message
from robot_dynamics.trajectories.sampler import TrajectoryCommand, TrajectoryPoint

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
    parser.add_argument('--controller', default=None,
                        help='the controller node whose robot model and limits are used '
                        '(default: the namespace of --topic)')
    parser.add_argument('--joint-states-topic', default='/joint_states', dest='states_topic')
    parser.add_argument('--timeout', type=float, default=5.0,
                        help='seconds to wait for the model, /joint_states and a subscriber '
                        '(with --identify also for the final estimate and the apply)')
    parser.add_argument('--identify', action='store_true',
                        help="switch the controller's identification on before, off after "
                        'the trajectory, and print the estimate')
    parser.add_argument('--apply', action='store_true',
                        help='--identify, then apply the estimate (refused if not excited '
                        'and consistent)')
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
    if args.controller is None:
        args.controller = args.topic.rsplit('/', 1)[0] or '/'
    args.identify = args.identify or args.apply
    return args


def excitation_command(model, joints, start, duration, amplitude=0.5, harmonics=5,
                       base_frequency=0.2, seed=0, sample_period=0.02):
    """(TrajectoryCommand of the exciting trajectory from `start`, [warnings about joints
    scaled down]); raises ValueError (e.g. a start outside the position limits). Its first
    point, at t = 0, is `start` at rest: the controller's reference steps there (JTC
    semantics), to where the arm is even if it had sagged away from its reference."""
    amplitude = np.asarray(amplitude, dtype=float).ravel()
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
    notes = []
    if any(issubclass(w.category, ExcitationWarning) for w in caught):
        reached = np.max(np.abs(q - start), axis=0) / np.where(amplitude > 0.0, amplitude, 1.0)
        notes = [f'{joint}: excursion scaled down to {ratio:.3g} of --amplitude to stay '
                 'within its position and velocity limits'
                 for joint, ratio, wanted in zip(joints, reached, np.broadcast_to(
                     amplitude, (model.n,))) if wanted > 0.0 and ratio < 1.0 - 1e-6]
    return TrajectoryCommand(tuple(joints), points, 0.0), notes


class ExcitationSender(Node):
    """Reads the controller's robot model (its parameters) and the start on /joint_states,
    and sends the exciting trajectory once the controller's trajectory topic has a
    subscriber; `sent` then turns true (`error` holds why nothing can be sent)."""

    def __init__(self, options, node_name=NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self.options = options
        self.model = self.joints = None
        self.sent = False
        self.error = None
        self.start = None
        self._latest = {}
        self._block = None           # the controller's robot block, until the model is built
        self._pending = None         # the parameter request on its way
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.publisher = self.create_publisher(JointTrajectory, options.topic, reliable)
        self._states = self.create_subscription(JointState, options.states_topic,
                                                self._on_joint_states, qos_profile_sensor_data)
        controller = options.controller.rstrip('/')
        self._list = self.create_client(ListParameters, f'{controller}/list_parameters')
        self._get = self.create_client(GetParameters, f'{controller}/get_parameters')
        self.create_timer(0.1, self._ask_for_the_model)
        self.steps = (IdentificationSteps(self, controller, options.apply)
                      if options.identify else None)

    # ------------------------------------------------------------------ the model

    def _ask_for_the_model(self):
        if self.model is not None or self.error or self._pending is not None \
                or self._block is not None or not self._list.service_is_ready():
            return
        self._pending = self._list.call_async(ListParameters.Request(prefixes=['robot'],
                                                                     depth=0))
        self._pending.add_done_callback(self._on_names)

    def _on_names(self, future):
        if future.result() is None:            # the call failed: the timer asks again
            self._pending = None
            return
        names = list(future.result().result.names) + ['joints', 'robot_description']
        self._pending = self._get.call_async(GetParameters.Request(names=names))
        self._pending.add_done_callback(lambda f: self._on_values(names, f))

    def _on_values(self, names, future):
        if future.result() is None:
            self._pending = None
            return
        values = {name: parameter_value_to_python(value)
                  for name, value in zip(names, future.result().values)}
        block = {name[len('robot.'):]: value for name, value in values.items()
                 if name.startswith('robot.') and value is not None}
        joints, description = values.get('joints'), values.get('robot_description')
        if block.get('source') == 'urdf' and not (block.get('urdf') or block.get('urdf_file')):
            if not description:      # the controller took it from the topic: so do we
                self._block, self._joints_parameter = block, joints
                self.create_subscription(
                    String, 'robot_description', self._on_description,
                    QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                               reliability=ReliabilityPolicy.RELIABLE))
                return
            block['urdf'] = description
        self._build(block, joints)

    def _on_description(self, msg):
        if self.model is None and self._block is not None:
            self._build({**self._block, 'urdf': msg.data}, self._joints_parameter)

    def _build(self, block, joints):
        self._pending = None
        try:
            self.model, self.joints = robot_model(self, block, joints)
        except ConfigurationError as error:
            self.error = f"the controller's robot parameters: {error}"
            self.get_logger().error(self.error)
            return
        self.try_send()

    # ------------------------------------------------------------------ the trajectory

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
        if self.steps is not None and not self.steps.enabled:
            self.steps.enable(then=self.try_send)      # identification on first
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
        if self.steps is not None:
            self.steps.moving()
        excursion = np.max(np.abs(np.array([p.positions for p in command.points])
                                  - self.start), axis=0)
        self.get_logger().info(
            f'sent a {o.duration:g} s exciting trajectory ({len(command.points)} points) on '
            f'{self.publisher.topic_name} from {np.round(self.start, 4).tolist()}; largest '
            f'excursion per joint {np.round(excursion, 3).tolist()} rad|m')

    def why_waiting(self):
        if self.joints is None:
            return (f'no robot model from {self.options.controller} (is the controller '
                    'running? check --controller / --topic)')
        missing = [j for j in self.joints if j not in self._latest]
        if missing:
            return f'no positions for {missing} on {self.options.states_topic}'
        return f'no subscriber on {self.publisher.topic_name}; is the controller running?'


class IdentificationSteps:
    """--identify / --apply on the controller's interfaces: identification.enabled true
    before the excitation, false once ~/status has gone from running to finished, then the
    final estimate (the quality message published after switching off), and with --apply
    the ~/apply_payload_estimate service. `exit_code` is set at the end."""

    def __init__(self, node, controller, apply):
        self.node, self.apply = node, apply
        self.enabled = False
        self.phase = 'enabling'      # moving, closing, final, applying, done
        self.exit_code = None
        self._pending = None
        self._running = False
        self._sent_at = None
        self._set = node.create_client(SetParameters, f'{controller}/set_parameters')
        self._apply = node.create_client(Trigger, f'{controller}/apply_payload_estimate')
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(String, f'{controller}/status', self._on_status, latched)
        node.create_subscription(DiagnosticStatus, f'{controller}/payload_estimate/quality',
                                 self._on_quality, latched)

    def enable(self, then):
        if self._pending is None and self._set.service_is_ready():
            self._set_enabled(True, lambda: (setattr(self, 'enabled', True), then()))

    def moving(self):
        self._enter('moving')

    def _enter(self, phase):
        self.phase, self._sent_at = phase, time.monotonic()

    def check(self, timeout):
        """From the main loop: the trajectory must start running within `timeout` s, and
        after it the final estimate and the apply must come within `timeout` s each."""
        if self._sent_at is None or time.monotonic() - self._sent_at <= timeout:
            return
        if self.phase == 'moving' and not self._running:
            self._finish(1, f'the controller did not start the trajectory within {timeout:g} '
                         's (rejected? see its log)')
        elif self.phase in ('closing', 'applying'):
            what = ('no final estimate on payload_estimate/quality' if self.phase == 'closing'
                    else 'no answer from apply_payload_estimate')
            self._finish(1, f'{what} within {timeout:g} s (is the controller still running?)')

    def _set_enabled(self, value, then):
        request = SetParameters.Request(parameters=[
            Parameter('identification.enabled', value=value).to_parameter_msg()])
        self._pending = self._set.call_async(request)

        def done(future):
            self._pending = None
            response = future.result()
            if response is None or not response.results[0].successful:
                reason = response.results[0].reason if response is not None else 'no answer'
                self._finish(1, f'identification.enabled {str(value).lower()}: {reason}')
                return
            then()
        self._pending.add_done_callback(done)

    def _on_status(self, msg):
        if self.phase != 'moving':
            return
        if msg.data == 'running':
            self._running = True
        elif msg.data == 'state_timeout':
            self._finish(1, 'the controller stopped: state_timeout (no /joint_states)')
        elif self._running and msg.data in ('finished', 'holding'):
            self._enter('closing')
            self._set_enabled(False, lambda: None)

    def _on_quality(self, msg):
        values = {kv.key: kv.value for kv in msg.values}
        if self.phase != 'closing' or values.get('enabled') != 'false':
            return
        self.phase = 'final'
        self.node.get_logger().info(
            f"estimate: mass {values['mass']} kg (std {values['mass_std']}), com "
            f"[{values['com']}] m (std [{values['com_std']}]), inertia [{values['inertia']}] "
            f"kg m^2 about the com; condition number {values['condition_number']}, "
            f"{values['samples']} samples: {msg.message}")
        usable = msg.level == DiagnosticStatus.OK
        if not (self.apply and usable):
            self._finish(0 if usable else 1, None if usable else f'not usable: {msg.message}')
            return
        self._enter('applying')
        future = self._apply.call_async(Trigger.Request())

        def applied(future):
            response = future.result()
            if response is None:
                self._finish(1, 'apply_payload_estimate: no answer')
            else:
                self._finish(0 if response.success else 1, response.message)
        future.add_done_callback(applied)

    def _finish(self, code, message):
        self.phase, self.exit_code = 'done', code
        if message and code == 0:
            self.node.get_logger().info(message)
        elif message:
            self.node.get_logger().error(message)


def main(args=None):
    argv = sys.argv if args is None else list(args)
    options = parse_arguments(remove_ros_args(argv)[1:])
    with ros_session(argv) as stop:
        node = ExcitationSender(options)
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
            steps = node.steps
            if steps is None:
                return 0
            node.get_logger().info('identifying: waiting for the trajectory to finish')
            while steps.exit_code is None and stop.running():
                rclpy.spin_once(node, timeout_sec=0.05)
                steps.check(options.timeout)
            return STOPPED if steps.exit_code is None else steps.exit_code
        finally:
            node.destroy_node()


if __name__ == '__main__':
    sys.exit(main())
