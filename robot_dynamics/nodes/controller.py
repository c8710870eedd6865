"""computed_torque_controller: the [LEE] §4 computed-torque law as a ROS 2 node.

Each cycle: sample the reference (q_d, q̇_d, q̈_d) of the current trajectory and publish
τ = inverse_dynamics(q, q̇, q̈_d + Kd(q̇_d − q̇) + Kp(q_d − q)) ([LEE] eq. 4.4: one
Newton–Euler call), clipped to the effort limits, as Float64MultiArray in `joints` order.
Interfaces, parameters and failure behaviour: README "Topics and parameters".
"""

import math
import sys

import numpy as np
from rcl_interfaces.msg import SetParametersResult
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, qos_profile_sensor_data, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String, UInt64
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.control import ComputedTorqueLaw, saturate
from robot_dynamics.nodes.ros_params import (as_bool, as_choice, as_float, as_floats, as_string,
                                             ConfigurationError, declare, declare_joints,
                                             declare_robot, seconds)
from robot_dynamics.trajectory import JointTrajectorySampler, TrajectoryCommand, TrajectoryRejected

NODE_NAME = 'computed_torque_controller'
CONTROL_MODES = ('timer', 'on_state')
THROTTLE = 2.0  # s between repeated warnings


def gain_vector(name, value, n):
    """gains.kp (> 0, 1/s²) or gains.kd (≥ 0, 1/s): one finite value per joint."""
    gains = as_floats(name, value, n)
    strict = name.endswith('kp')
    for i, g in enumerate(gains):
        if g < 0.0 or (strict and g == 0.0):
            raise ConfigurationError(f'{name}[{i}]: must be {"> 0" if strict else ">= 0"}, '
                                     f'got {g}')
    return np.array(gains)


class ComputedTorqueController(Node):
    """Subscribes /joint_states and ~/joint_trajectory, publishes efforts and its state."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        try:
            self._declare_parameters()
        except Exception:
            self.destroy_node()
            raise
        self._pending_law = None
        n = self.model.n
        self._index = {name: i for i, name in enumerate(self.joints)}
        self._q = np.zeros(n)
        self._qd = np.zeros(n)
        self._received = np.full(n, -math.inf)   # clock time each joint was last seen [s]
        self._ready = False
        self._status = None
        self._goal_reached = None
        self._saturated_cycles = 0
        self._create_interfaces()
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.get_logger().info(
            f'{n} joints {list(self.joints)}; {self.control_mode} control'
            + (f' at {self.control_rate:g} Hz' if self.control_mode == 'timer' else '')
            + f'; efforts on {self._command_pub.topic_name}; waiting for /joint_states')

    # ------------------------------------------------------------------ parameters

    def _declare_parameters(self):
        self.model = declare_robot(self)
        n = self.model.n
        self.joints = declare_joints(self, n)
        self.control_rate = as_float('control_rate', declare(
            self, 'control_rate', 100.0, 'control loop rate in timer mode [Hz]',
            read_only=True, minimum=0.1, maximum=10000.0), positive=True)
        self.control_mode = as_choice('control_mode', declare(
            self, 'control_mode', 'timer', 'timer: a cycle every 1/control_rate s of the node '
            'clock; on_state: a cycle on every /joint_states message (lock-step with a '
            'simulator)', read_only=True), CONTROL_MODES)
        self.command_topic = as_string('command_topic', declare(
            self, 'command_topic', '/effort_controller/commands', 'effort command topic '
            '(std_msgs/Float64MultiArray, joints order, N m | N)', read_only=True))
        kp = gain_vector('gains.kp', declare(
            self, 'gains.kp', [100.0] * n, 'position gains per joint, acceleration level '
            '[1/s^2] (not effort gains); > 0'), n)
        kd = gain_vector('gains.kd', declare(
            self, 'gains.kd', [20.0] * n, 'velocity gains per joint, acceleration level '
            '[1/s]; >= 0; critical damping: kd = 2 sqrt(kp)'), n)
        self.law = ComputedTorqueLaw(self.model, kp, kd)
        limits = declare(self, 'effort_limits', None, 'per joint effort limits [N m | N]; '
                         'default robot.effort_max (none: unlimited)', read_only=True)
        self.effort_limits = np.array(self.model.effort_max, dtype=float)
        if limits is not None and len(limits) > 0:
            self.effort_limits = np.array(as_floats('effort_limits', limits, n))
            for i, value in enumerate(self.effort_limits):
                if value <= 0.0:
                    raise ConfigurationError(f'effort_limits[{i}]: must be > 0, got {value}')
        self.state_timeout = as_float('state_timeout', declare(
            self, 'state_timeout', 0.1, 'zero effort when a controlled joint has not been '
            'heard from for this long [s]; 0 = never', minimum=0.0, maximum=3600.0),
            minimum=0.0)
        self.goal_tolerance = as_float('constraints.goal_tolerance', declare(
            self, 'constraints.goal_tolerance', 0.01, 'goal reached when every |q - q_goal| '
            '<= this after the last point [rad | m]; 0 = not checked', minimum=0.0,
            maximum=1e3), minimum=0.0)
        self.stopped_velocity_tolerance = as_float(
            'constraints.stopped_velocity_tolerance', declare(
                self, 'constraints.stopped_velocity_tolerance', 0.01, 'goal reached only '
                'when every |qd| <= this [rad/s | m/s]; 0 = not checked', minimum=0.0,
                maximum=1e3), minimum=0.0)
        allow_partial = as_bool('allow_partial_joints_goal', declare(
            self, 'allow_partial_joints_goal', False, 'accept trajectories naming a subset '
            'of joints (the others hold their reference)', read_only=True))
        self.publish_state = as_bool('publish_state', declare(
            self, 'publish_state', True, 'publish ~/reference, ~/feedback, ~/error and '
            '~/output every cycle', read_only=True))
        self.sampler = JointTrajectorySampler(
            self.joints, position_min=self.model.position_min,
            position_max=self.model.position_max, allow_partial_joints_goal=allow_partial)

    def _on_set_parameters(self, parameters):
        """Validate live changes; accepted gains take effect together at the next cycle."""
        n = self.model.n
        base = self._pending_law or self.law
        kp, kd = base.kp, base.kd
        scalars = {}
        try:
            for parameter in parameters:
                if parameter.name == 'gains.kp':
                    kp = gain_vector(parameter.name, parameter.value, n)
                elif parameter.name == 'gains.kd':
                    kd = gain_vector(parameter.name, parameter.value, n)
                elif parameter.name in ('state_timeout', 'constraints.goal_tolerance',
                                        'constraints.stopped_velocity_tolerance'):
                    scalars[parameter.name] = as_float(parameter.name, parameter.value,
                                                       minimum=0.0)
        except ConfigurationError as error:
            return SetParametersResult(successful=False, reason=str(error))
        if kp is not base.kp or kd is not base.kd:
            self._pending_law = ComputedTorqueLaw(self.model, kp, kd)
        self.state_timeout = scalars.get('state_timeout', self.state_timeout)
        self.goal_tolerance = scalars.get('constraints.goal_tolerance', self.goal_tolerance)
        self.stopped_velocity_tolerance = scalars.get(
            'constraints.stopped_velocity_tolerance', self.stopped_velocity_tolerance)
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ interfaces

    def _create_interfaces(self):
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._command_pub = self.create_publisher(Float64MultiArray, self.command_topic, 10)
        self._reference_pub = self.create_publisher(JointState, '~/reference', 10)
        self._feedback_pub = self.create_publisher(JointState, '~/feedback', 10)
        self._error_pub = self.create_publisher(JointState, '~/error', 10)
        self._output_pub = self.create_publisher(JointState, '~/output', 10)
        self._status_pub = self.create_publisher(String, '~/status', latched)
        self._goal_pub = self.create_publisher(Bool, '~/goal_reached', latched)
        self._saturation_pub = self.create_publisher(UInt64, '~/saturation_count', latched)
        # Best effort hears both reliable and best-effort publishers (ros-conventions §3.2).
        self.create_subscription(JointState, 'joint_states', self._on_joint_states,
                                 qos_profile_sensor_data)
        self.create_subscription(JointTrajectory, '~/joint_trajectory', self._on_trajectory,
                                 10)
        if self.control_mode == 'timer':
            self.create_timer(1.0 / self.control_rate, self._on_timer)

    def _now(self):
        return self.get_clock().now().nanoseconds * 1e-9

    def _warn(self, text):
        self.get_logger().warning(text, throttle_duration_sec=THROTTLE)

    # ------------------------------------------------------------------ callbacks

    def _on_joint_states(self, msg):
        """Map by name; ignore other joints; a malformed message is ignored as a whole."""
        count = len(msg.name)
        for field in ('position', 'velocity'):
            if len(getattr(msg, field)) != count:
                self._warn(f'joint_states.{field}: {len(getattr(msg, field))} values for '
                           f'{count} names; message ignored')
                return
        updates = []
        for name, position, velocity in zip(msg.name, msg.position, msg.velocity):
            i = self._index.get(name)
            if i is None:
                continue
            if not (math.isfinite(position) and math.isfinite(velocity)):
                self._warn(f'joint_states: non-finite position/velocity for joint {name!r}; '
                           'message ignored')
                return
            updates.append((i, position, velocity))
        if not updates:
            return
        now = self._now()
        for i, position, velocity in updates:
            self._q[i] = position
            self._qd[i] = velocity
            self._received[i] = now
        if self.control_mode == 'on_state':
            stamp = seconds(msg.header.stamp)
            self._control_cycle(stamp if stamp > 0.0 else now, now)

    def _on_timer(self):
        now = self._now()
        self._control_cycle(now, now)

    def _on_trajectory(self, msg):
        if not self._ready:
            self._warn('joint_trajectory rejected: not all controlled joints seen on '
                       '/joint_states yet')
            return
        now = self._now()
        try:
            self.sampler.accept(TrajectoryCommand.from_message(msg), now)
        except TrajectoryRejected as error:
            self.get_logger().warning(f'joint_trajectory rejected: {error}')
            return
        duration = seconds(msg.points[-1].time_from_start) if msg.points else 0.0
        self.get_logger().info(f'joint_trajectory accepted: {len(msg.points)} points, '
                               f'{duration:g} s')
        self._goal_reached = None

    # ------------------------------------------------------------------ the control cycle

    def _control_cycle(self, t, clock_now):
        """t: the time the reference is sampled at; clock_now: for the state timeout."""
        if not self._ready and not self._start_holding(t):
            return
        if self.state_timeout > 0.0 and clock_now - self._received.min() > self.state_timeout:
            stale = [self.joints[i] for i in np.flatnonzero(
                clock_now - self._received > self.state_timeout)]
            self._warn(f'no /joint_states for {stale} within state_timeout '
                       f'{self.state_timeout:g} s: commanding zero effort')
            self._publish_command(np.zeros(self.model.n))
            self._set_status('state_timeout')
            return
        if self._pending_law is not None:
            self.law, self._pending_law = self._pending_law, None
        reference = self.sampler.sample(t)
        tau = self.law.effort(self._q, self._qd, reference.positions, reference.velocities,
                              reference.accelerations)
        if not np.all(np.isfinite(tau)):
            self.get_logger().error('non-finite effort computed; commanding zero effort',
                                    throttle_duration_sec=THROTTLE)
            tau = np.zeros(self.model.n)
        tau, clipped = saturate(tau, self.effort_limits)
        self._publish_command(tau)
        if clipped:
            self._saturated_cycles += 1
            self._saturation_pub.publish(UInt64(data=self._saturated_cycles))
        self._update_status(t)
        if self.publish_state:
            self._publish_state(reference, tau)

    def _start_holding(self, t):
        """Before the first trajectory: hold the position measured once all are seen."""
        if not np.all(np.isfinite(self._received)):
            missing = [self.joints[i] for i in np.flatnonzero(~np.isfinite(self._received))]
            self.get_logger().info(f'waiting for /joint_states of {missing}',
                                   throttle_duration_sec=5.0)
            return False
        self.sampler.hold(self._q.copy(), t)
        self._ready = True
        self.get_logger().info('all joints seen: holding the measured position')
        return True

    def _update_status(self, t):
        status = self.sampler.status(t)
        self._set_status(status)
        if status in ('finished', 'holding'):
            reached = self.sampler.at_goal(self._q, self._qd, t, self.goal_tolerance,
                                           self.stopped_velocity_tolerance)
        else:
            reached = False
        if reached != self._goal_reached:
            self._goal_reached = reached
            self._goal_pub.publish(Bool(data=reached))

    def _set_status(self, status):
        if status != self._status:
            self._status = status
            self._status_pub.publish(String(data=status))

    # ------------------------------------------------------------------ publishing

    def _publish_command(self, tau):
        self._command_pub.publish(Float64MultiArray(data=tau.tolist()))

    def _publish_state(self, reference, tau):
        stamp = self.get_clock().now().to_msg()
        names = list(self.joints)
        # ~/reference: effort carries q̈_d [rad/s² | m/s²] (documented in the README).
        self._reference_pub.publish(self._joint_state(
            stamp, names, reference.positions, reference.velocities, reference.accelerations))
        self._feedback_pub.publish(self._joint_state(stamp, names, self._q, self._qd, ()))
        self._error_pub.publish(self._joint_state(
            stamp, names, reference.positions - self._q, reference.velocities - self._qd, ()))
        self._output_pub.publish(self._joint_state(stamp, names, (), (), tau))

    @staticmethod
    def _joint_state(stamp, names, position, velocity, effort):
        msg = JointState()
        msg.header.stamp = stamp
        msg.name = names
        msg.position = [float(v) for v in position]
        msg.velocity = [float(v) for v in velocity]
        msg.effort = [float(v) for v in effort]
        return msg


def main(args=None):
    """Entry point `controller`: exits 1 with one log line on a bad parameter file."""
    rclpy.init(args=args)
    try:
        node = ComputedTorqueController()
    except ConfigurationError as error:
        rclpy.logging.get_logger(NODE_NAME).error(f'bad parameter: {error}')
        rclpy.try_shutdown()
        return 1
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
