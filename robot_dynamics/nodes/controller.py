"""computed_torque_controller: the [LEE] §4 computed-torque law as a ROS 2 node.

Each cycle: sample the reference (q_d, q̇_d, q̈_d) of the current trajectory and publish
τ = inverse_dynamics(q, q̇, q̈_d + Kd(q̇_d − q̇) + Kp(q_d − q)) ([LEE] eq. 4.4: one
Newton–Euler call), clipped to the effort limits, as Float64MultiArray in `joints` order.
The live parameter `control_law` switches to gravity compensation, joint or Cartesian
impedance (nodes/common/control_laws.py, doc/control-laws.md).
Interfaces: README "Topics and parameters"; parameters: doc/parameters.md; failure behaviour:
doc/safety.md.
"""

import functools
import math
import sys
import threading
import time
from dataclasses import replace

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, qos_profile_sensor_data, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String, UInt64
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.control import ComputedTorqueLaw, saturate
from robot_dynamics.nodes.trajectories import follow_joint_trajectory, speed_scaling
from robot_dynamics.nodes.common import control_laws
from robot_dynamics.nodes.common.cartesian_topics import CartesianTopics
from robot_dynamics.nodes.common.command_controller import CommandControllerCheck
from robot_dynamics.nodes.common.diagnostics import ControllerDiagnostics, measured
from robot_dynamics.nodes.trajectories.feasibility_check import FeasibilityCheck
from robot_dynamics.nodes.trajectories.joint_constraints import JointConstraints
from robot_dynamics.nodes.trajectories.topic_tolerances import TopicTrajectoryTolerances
from robot_dynamics.nodes.payload_identification import PayloadIdentification
from robot_dynamics.nodes.common.ros_params import (
    as_bool, as_choice, as_float, as_floats, as_string, ConfigurationError, declare,
    declare_robot, keep_float_types, name_unknown_parameters, payload_model, seconds)
from robot_dynamics.nodes.common.realtime import declare_realtime
from robot_dynamics.nodes.common.runner import own_loop_after_the_model, run
from robot_dynamics.trajectory import (INTERPOLATION_METHODS, JointTrajectorySampler,
                                       TrajectoryCommand, TrajectoryRejected)
from robot_dynamics.trajectory_goal import GOAL_TOLERANCE_VIOLATED

NODE_NAME = 'computed_torque_controller'
CONTROL_MODES = ('timer', 'on_state')
THROTTLE = 2.0  # s between repeated warnings
MAX_ABS_STATE = 1.0e6   # |q| [rad | m] or |q̇| [rad/s | m/s] beyond this: message dropped
CLOCK_RESET = 1.0       # s: on_state stamps going back further mean the publisher restarted
FUTURE_LIMIT = 1.0      # s: on_state stamps further ahead of the node clock are dropped
LIVE_SCALARS = ('state_timeout', 'constraints.goal_tolerance',
                'constraints.stopped_velocity_tolerance', 'cmd_timeout')
LIVE_FLAGS = ('allow_nonzero_velocity_at_trajectory_end',
              'allow_integration_in_goal_trajectories', 'allow_partial_joints_goal')
PAYLOAD_KEYS = ('mass', 'com', 'inertia')
SERVICE_PERIOD = 0.01   # s: in spin_on_state, the executor serves the rest this often
ZERO_ACK_WAIT = 0.5     # s: at exit, wait at most this for the subscribers to take the zero


def guarded(what, control=False):
    """A callback that logs an unexpected exception instead of ending the node's spin.
    `control`: a callback that runs the control cycle; an exception in it before the
    cycle's effort went out commands zero effort instead (a forward_command_controller
    would otherwise keep applying the last effort)."""
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args):
            if control:
                self._cycle_published = False
            try:
                return method(self, *args)
            except Exception as error:  # noqa: B902 - the node must keep controlling
                self.unexpected_errors += 1
                zero = (control and not self._cycle_published
                        and getattr(self, '_commanding', False))
                if zero:
                    self._publish_command(np.zeros(self.model.n))
                self.get_logger().error(f'{what}: unexpected {type(error).__name__}: '
                                        f'{error}; dropped'
                                        + ('; zero effort commanded' if zero else ''),
                                        throttle_duration_sec=THROTTLE)
                return None
        return wrapper
    return decorate


def gain_vector(name, value, n):
    """gains.kp (> 0, 1/s²) or gains.kd (≥ 0, 1/s): one finite value per joint."""
    gains = as_floats(name, value, n)
    strict = name.endswith('kp')
    for i, g in enumerate(gains):
        if g < 0.0 or (strict and g == 0.0):
            raise ConfigurationError(f'{name}[{i}]: must be {"> 0" if strict else ">= 0"}, '
                                     f'got {g}')
    return np.array(gains)


def effort_limit_vector(name, value, model):
    """effort_limits: one finite value > 0 per joint, at most robot.effort_max; empty or
    unset: robot.effort_max (unlimited where that is not given)."""
    if value is None or (hasattr(value, '__len__') and not isinstance(value, str)
                         and len(value) == 0):
        return np.array(model.effort_max, dtype=float)
    limits = as_floats(name, value, model.n)
    for i, v in enumerate(limits):
        if v <= 0.0:
            raise ConfigurationError(f'{name}[{i}]: must be > 0, got {v}')
        if v > model.effort_max[i]:
            raise ConfigurationError(f'{name}[{i}]: {v} exceeds robot.effort_max[{i}] = '
                                     f'{model.effort_max[i]}')
    return np.array(limits)


def doubles(values):
    """A float64[] message field from an array (tolist() measured faster than building an
    array.array or converting element by element)."""
    return np.asarray(values, dtype=float).tolist()


class LawSwap:
    """A new (law, effort limits, law settings), built in the parameter callback and taken
    by the next control cycle, so that the law, gains, limits and payload change together
    between two cycles; only the latest accepted change is kept.

    A payload change is cheap: the new model shares the compiled kernels of the old one
    (the last body's inertial parameters are runtime inputs of the generated code), and one
    call of the new law binds them (microseconds), so nothing is compiled in the loop."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ready = None

    def request(self, model, kp, kd, limits, settings):
        law = control_laws.build_law(model, kp, kd, settings)   # binds the kernels now
        with self._lock:
            self._ready = (law, limits, settings)

    def take(self):
        """The latest built (law, limits, settings), or None."""
        if self._ready is None:
            return None
        with self._lock:
            ready, self._ready = self._ready, None
        return ready

    @property
    def pending(self):
        return self._ready is not None


class ComputedTorqueController(Node):
    """Subscribes /joint_states and ~/joint_trajectory, publishes efforts and its state."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.model = None        # until the robot model exists (robot_description topic)
        self.unexpected_errors = 0   # exceptions caught (and logged) by the callback guard
        self._cycle_published = False  # the control cycle under way has sent its effort
        keep_float_types(self)               # integers set live on floats stay floats
        name_unknown_parameters(self)        # `ros2 param set` of a misspelt name
        try:
            declare_robot(self, self._start)   # now, or when the URDF arrives
        except Exception:
            self.destroy_node()
            raise

    def destroy_node(self):
        """A last zero effort (`_zero_on_exit`), then also the action server (rclpy's
        destroy_node leaves it, and the node, alive)."""
        self._zero_on_exit()
        action = getattr(self, '_action', None)
        if action is not None:
            action.destroy()
        super().destroy_node()

    def _start(self, model, joints):
        """The rest of the start-up, once the model exists."""
        self.model, self.joints = model, joints
        self._declare_parameters()
        self._swap = LawSwap()
        self._target = (self.law.model, *self._gains, self.effort_limits, self.law_settings)
        n = self.model.n
        self._index = {name: i for i, name in enumerate(self.joints)}
        self._q = np.zeros(n)
        self._qd = np.zeros(n)
        self._received = np.full(n, -math.inf)   # clock time each joint was last seen [s]
        self._ready = False
        self._stale = False          # states timed out (or time went back): re-sync and hold
        self._last_t = -math.inf     # reference time of the last cycle [s]
        self._last_stamp = None      # on_state: stamp of the last accepted /joint_states
        self._last_now = -math.inf   # on_state: node clock when it was accepted
        self._last_raw = 0.0         # on_state: its header stamp as sent (0: not stamped)
        self._status = None
        self._goal_reached = None
        self._saturated_cycles = 0
        self._names = None           # the last /joint_states name list, with its mapping
        self._last_state_t = -math.inf   # cycle time of the last diagnostics [s]
        self._cmd_timeout_warned = False
        self._continuous = bool(self.model.continuous.any())   # wrapped position errors
        # 1 % short of the period: rounding of epoch stamps never skips a due cycle
        self._state_period = (0.99 / self.state_publish_rate
                              if self.state_publish_rate > 0.0 else 0.0)
        self._create_interfaces()
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.identification = PayloadIdentification(self, self.law.model)
        self.get_logger().info(
            f'{n} joints {list(self.joints)}; {self.control_mode} control'
            + (f' at {self.control_rate:g} Hz' if self.control_mode == 'timer' else '')
            + ('' if self.compensate_gravity else ' without gravity (compensate_gravity: '
               'false)')
            + f'; efforts on {self._command_pub.topic_name}; waiting for /joint_states')

    # ------------------------------------------------------------------ parameters

    def _declare_parameters(self):
        n = self.model.n
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
        self.command_controller = declare(
            self, 'command_controller', '', 'the ros2_control controller taking command_topic '
            '(its joints must equal joints, in order, or no effort is published); empty: the '
            'node command_topic belongs to when it ends in /commands', read_only=True)
        if not isinstance(self.command_controller, str):
            raise ConfigurationError(f'command_controller: expected a string (a node name), '
                                     f'got {self.command_controller!r}')
        self.check_command_controller = as_bool('check_command_controller', declare(
            self, 'check_command_controller', True, 'ask the command controller for its '
            'joints before the first effort and publish nothing on a mismatch; false: never '
            'ask (efforts in joints order, unchecked)', read_only=True))
        kp = gain_vector('gains.kp', declare(
            self, 'gains.kp', [100.0] * n, 'position gains per joint, acceleration level '
            '[1/s^2] (not effort gains); > 0'), n)
        kd = gain_vector('gains.kd', declare(
            self, 'gains.kd', [20.0] * n, 'velocity gains per joint, acceleration level '
            '[1/s]; >= 0; critical damping: kd = 2 sqrt(kp)'), n)
        self.compensate_gravity = as_bool('compensate_gravity', declare(
            self, 'compensate_gravity', True, 'include the gravity torques g(q) in the '
            'effort; false for a robot whose drives compensate gravity themselves (e.g. '
            "Franka's firmware; the plant's drives_compensate_gravity)", read_only=True))
        law_model = (self.model if self.compensate_gravity
                     else self.model.with_gravity((0.0, 0.0, 0.0)))
        self.law = ComputedTorqueLaw(law_model, kp, kd)
        self._gains = (kp, kd)          # of computed_torque, whichever law is in effect
        zero = np.zeros(n)
        self.law.effort(zero, zero, zero, zero, zero)   # generates the kernels now, not in
        #                                                 the first control cycle
        self.effort_limits = effort_limit_vector('effort_limits', declare(
            self, 'effort_limits', None, 'per joint effort limits [N m | N], > 0 and at most '
            'robot.effort_max; empty: robot.effort_max (none given: unlimited)'), self.model)
        self.law_settings = control_laws.declare_parameters(self, self.model)
        self.control_law = self.law_settings['control_law']     # the latest accepted
        self._law_name = 'computed_torque'                      # the one in effect
        self._rate_limit = None         # an EffortRateLimit, or None: nothing per cycle
        if self.control_law != 'computed_torque':
            self._use_law(control_laws.build_law(law_model, kp, kd, self.law_settings),
                          self.law_settings, math.inf)
        else:
            self._set_rate_limit(self.law_settings)
        self.state_timeout = as_float('state_timeout', declare(
            self, 'state_timeout', 0.1, 'zero effort when a controlled joint has not been '
            'heard from for this long [s of node clock]; 0 = never', minimum=0.0,
            maximum=3600.0),
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
        self.joint_constraints = JointConstraints(self, self.joints)   # constraints.<joint>.*
        self.feasibility = FeasibilityCheck(self)   # feasibility.*: limits at accept time
        allow_partial = as_bool('allow_partial_joints_goal', declare(
            self, 'allow_partial_joints_goal', False, 'accept trajectories naming a subset '
            'of joints (the others hold their reference)'))
        self.publish_state = as_bool('publish_state', declare(
            self, 'publish_state', True, 'publish ~/reference, ~/feedback, ~/error and '
            '~/output (at most state_publish_rate)', read_only=True))
        self.state_publish_rate = as_float('state_publish_rate', declare(
            self, 'state_publish_rate', 0.0, 'at most this rate of the cycle time for '
            '~/reference, ~/feedback, ~/error and ~/output [Hz]; 0 = every cycle',
            read_only=True, minimum=0.0, maximum=1e6), minimum=0.0)
        self.realtime = declare_realtime(self)    # applied by the runner's loop
        interpolation = as_choice('interpolation_method', declare(
            self, 'interpolation_method', 'splines', 'splines: polynomial segments through the '
            'points; none: no interpolation, the reference jumps to each next point',
            read_only=True), INTERPOLATION_METHODS)
        flags = {'allow_nonzero_velocity_at_trajectory_end': (
                     False, 'accept trajectories whose last point has a non-zero velocity'),
                 'allow_integration_in_goal_trajectories': (
                     False, 'accept points without positions (or velocities): integrated '
                     'from their velocities (accelerations)')}
        flags = {name: as_bool(name, declare(self, name, default, description))
                 for name, (default, description) in flags.items()}
        self.cmd_timeout = as_float('cmd_timeout', declare(
            self, 'cmd_timeout', 0.0, 'hold the measured position (or decelerate) when no new '
            'trajectory came this long after the last point of the current one [s]; 0 = '
            'never; must exceed constraints.goal_time', minimum=0.0, maximum=1e6),
            minimum=0.0)
        scaling, scaling_rate = speed_scaling.declare_parameters(self)   # speed_scaling.*
        self.sampler = JointTrajectorySampler(
            self.joints, position_min=self.model.position_min,
            position_max=self.model.position_max, allow_partial_joints_goal=allow_partial,
            interpolation_method=interpolation,
            max_deceleration_on_cancel=self.joint_constraints.max_deceleration_on_cancel,
            speed_scaling_factor=scaling, speed_scaling_rate_limit=scaling_rate,
            continuous=self.model.continuous, **flags)

    def _on_set_parameters(self, parameters):
        """Validate live changes (all or none are accepted); gains, effort limits and payload
        are built into a new law here and take effect together at the next control cycle."""
        model, kp, kd, limits, settings = self._target
        payload = {}
        scalars = {}
        flags = {}
        try:
            for parameter in parameters:
                name, value = parameter.name, parameter.value
                if name == 'gains.kp':
                    kp = gain_vector(name, value, model.n)
                elif name == 'gains.kd':
                    kd = gain_vector(name, value, model.n)
                elif name == 'effort_limits':
                    limits = effort_limit_vector(name, value, model)
                elif name.startswith('robot.payload.') and name[14:] in PAYLOAD_KEYS:
                    payload[name[14:]] = value
                elif name in LIVE_SCALARS:
                    scalars[name] = as_float(name, value, minimum=0.0)
                elif name in LIVE_FLAGS:
                    flags[name] = as_bool(name, value)
            if payload:
                model = payload_model(model, payload)
            settings = control_laws.updated(settings, parameters, model)
            target = (model, kp, kd, limits, settings)
            if any(new is not old for new, old in zip(target, self._target)):
                self._swap.request(model, kp, kd, limits, settings)
        except (ConfigurationError, TypeError, ValueError) as error:
            return SetParametersResult(successful=False, reason=str(error))
        if target is not self._target:
            self._target = target
            self.control_law = settings['control_law']
        self.state_timeout = scalars.get('state_timeout', self.state_timeout)
        self.goal_tolerance = scalars.get('constraints.goal_tolerance', self.goal_tolerance)
        self.stopped_velocity_tolerance = scalars.get(
            'constraints.stopped_velocity_tolerance', self.stopped_velocity_tolerance)
        self.cmd_timeout = scalars.get('cmd_timeout', self.cmd_timeout)
        for name, value in flags.items():
            setattr(self.sampler, name, value)
        return SetParametersResult(successful=True)

    def _effective_cmd_timeout(self):
        """cmd_timeout, or 0 (off) when it does not exceed constraints.goal_time (JTC)."""
        timeout = self.cmd_timeout
        if timeout > 0.0 and timeout <= getattr(self._action, 'goal_time', 0.0):
            if not self._cmd_timeout_warned:
                self._cmd_timeout_warned = True
                self.get_logger().warning(
                    f'cmd_timeout {timeout:g} s is ignored: it must exceed '
                    f'constraints.goal_time ({self._action.goal_time:g} s)')
            return 0.0
        self._cmd_timeout_warned = False
        return timeout

    # ------------------------------------------------------------------ interfaces

    def _create_interfaces(self):
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        # No QoS event handlers on the publishers and on the /joint_states subscription:
        # each is one more entity the executor walks on every wait (seen in profiles). A
        # best-effort volatile subscription is compatible with every publisher; a subscriber
        # incompatible with a reliable publisher warns on its side (rclpy's default).
        quiet = PublisherEventCallbacks(use_default_callbacks=False)
        self._command_pub = self.create_publisher(Float64MultiArray, self.command_topic, 10,
                                                  event_callbacks=quiet)
        self._command_msg = Float64MultiArray()
        self._commanding = False     # an effort went out since the last zero
        self._command_check = CommandControllerCheck(   # the effort controller's joints
            self, self._command_pub, self.joints, self.command_controller,
            self.check_command_controller)
        self._state_msgs = [JointState(name=list(self.joints)) for _ in range(4)]
        self._reference_pub, self._feedback_pub, self._error_pub, self._output_pub = (
            self.create_publisher(JointState, f'~/{name}', 10, event_callbacks=quiet)
            for name in ('reference', 'feedback', 'error', 'output'))
        self._status_pub = self.create_publisher(String, '~/status', latched,
                                                 event_callbacks=quiet)
        self._goal_pub = self.create_publisher(Bool, '~/goal_reached', latched,
                                               event_callbacks=quiet)
        self._saturation_pub = self.create_publisher(UInt64, '~/saturation_count', latched,
                                                     event_callbacks=quiet)
        # Best effort hears both reliable and best-effort publishers.
        self._state_sub = self.create_subscription(
            JointState, 'joint_states', self._on_joint_states, qos_profile_sensor_data,
            event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False))
        self._trajectory_sub = self.create_subscription(
            JointTrajectory, '~/joint_trajectory', self._on_trajectory, 10)
        if self.control_mode == 'timer':
            self.create_timer(1.0 / self.control_rate, self._on_timer)
        self._action = follow_joint_trajectory.attach(self)   # ~/follow_joint_trajectory
        self._topic_tolerances = TopicTrajectoryTolerances(self)   # on topic trajectories
        speed_scaling.attach(self)                          # ~/speed_scaling_input
        self._diagnostics = ControllerDiagnostics(self)     # /diagnostics
        self._cartesian = CartesianTopics(self)     # ~/target_pose, ~/tool_pose

    def spin_on_state(self, executor, running=None):
        """The controller executable's loop in on_state mode, instead of `executor`: wait
        on the /joint_states and trajectory subscriptions alone, in a wait set made once
        (rclpy's executor builds one from every entity of the node for each message, ≈ 0.15
        ms of Python per state here), run the callbacks of what arrived, in arrival order
        per topic, and let `executor` serve the rest (parameter services) every
        SERVICE_PERIOD. Returns when `running()` turns false (a stop request) or the
        context shuts down, or at once if this rclpy lacks the wait-set binding (the
        executor then does all the work)."""
        try:
            from rclpy.impl.implementation_singleton import rclpy_implementation
            wait_set = rclpy_implementation.WaitSet(2, 0, 0, 0, 0, 0, self.context.handle)
        except (ImportError, AttributeError, TypeError):
            return
        topics = ((self._state_sub, JointState, self._on_joint_states),
                  (self._trajectory_sub, JointTrajectory, self._on_trajectory))
        serve_at = time.monotonic() + SERVICE_PERIOD
        running = running or self.context.ok
        while running() and self.context.ok():
            timeout = serve_at - time.monotonic()
            try:
                if timeout <= 0.0:
                    serve_at += SERVICE_PERIOD * (1 + int(-timeout / SERVICE_PERIOD))
                    executor.spin_once(timeout_sec=0.0)
                else:
                    self._wait_and_take(wait_set, topics, round(timeout * 1e9))
            except Exception:  # noqa: B902 - rclpy's RCLError on a context shut down meanwhile
                if self.context.ok():
                    raise
                return                    # another thread shut the context down

    @staticmethod
    def _wait_and_take(wait_set, topics, timeout_ns):
        (state_sub, _, _), (trajectory_sub, _, _) = topics
        with state_sub.handle, trajectory_sub.handle:
            wait_set.clear_entities()
            wait_set.add_subscription(state_sub.handle)
            wait_set.add_subscription(trajectory_sub.handle)
            wait_set.wait(timeout_ns)
            for subscription, msg_type, callback in topics:
                taken = subscription.handle.take_message(msg_type, False)
                while taken is not None:
                    callback(taken[0])
                    taken = subscription.handle.take_message(msg_type, False)

    def _now(self):
        return self.get_clock().now().nanoseconds * 1e-9

    def _warn(self, text):
        self.get_logger().warning(text, throttle_duration_sec=THROTTLE)

    # ------------------------------------------------------------------ callbacks

    @guarded('joint_states', control=True)
    def _on_joint_states(self, msg):
        """Map by name; ignore other joints; a malformed message is dropped as a whole."""
        updates = self._known_names_updates(msg)
        if updates is None:
            updates = self._joint_updates(msg)
            if not updates:
                return
            targets, positions, velocities = (np.array(column) for column in zip(*updates))
        else:
            targets, positions, velocities = updates
            if not len(targets):
                return
        now = self._now()
        stamp = now
        if self.control_mode == 'on_state':
            raw = seconds(msg.header.stamp)
            if self._repeats_answered_state(raw, targets, positions, velocities):
                return
            stamp = self._state_stamp(raw, now)
            if stamp is None:
                return
            if (self._ready and self.state_timeout > 0.0
                    and now - self._received.max() > self.state_timeout):
                self._stale = True      # states resumed after a gap: re-sync below
        self._q[targets] = positions
        self._qd[targets] = velocities
        self._received[targets] = now
        if self.control_mode == 'on_state':
            self._control_cycle(stamp, now)

    def _known_names_updates(self, msg):
        """The fast path of _joint_updates for a name list seen before whose values are all
        well-formed: (controller indices, q, q̇) arrays; None means take the full path."""
        names = msg.name
        cached = self._names
        if cached is None or names != cached[0]:
            self._names = cached = self._name_mapping(names)
            if cached is None:
                return None
        _, sources, targets = cached
        count = len(names)
        if len(msg.position) != count or len(msg.velocity) != count:
            return None
        positions = np.asarray(msg.position, dtype=float)[sources]
        velocities = np.asarray(msg.velocity, dtype=float)[sources]
        # NaN fails the comparison too: one vectorised check for finite and within range.
        if not ((np.abs(positions) <= MAX_ABS_STATE).all()
                and (np.abs(velocities) <= MAX_ABS_STATE).all()):
            return None
        return targets, positions, velocities

    def _name_mapping(self, names):
        """(names, message indices, controller indices) of a name list without duplicates,
        else None (the full path then reports the duplicate)."""
        names = list(names)
        if len(set(names)) != len(names):
            return None
        pairs = [(k, self._index[name]) for k, name in enumerate(names) if name in self._index]
        sources = np.array([k for k, _ in pairs], dtype=np.intp)
        targets = np.array([i for _, i in pairs], dtype=np.intp)
        return names, sources, targets

    def _joint_updates(self, msg):
        """[(index, q, q̇)] of the controlled joints in `msg`, or None if it is malformed."""
        count = len(msg.name)
        for field in ('position', 'velocity'):
            if len(getattr(msg, field)) != count:
                self._warn(f'joint_states.{field}: {len(getattr(msg, field))} values for '
                           f'{count} names; message dropped')
                return None
        updates = []
        seen = set()
        for k, (name, position, velocity) in enumerate(zip(msg.name, msg.position,
                                                           msg.velocity)):
            if name in seen:
                self._warn(f'joint_states.name[{k}]: duplicate name {name!r}; message dropped')
                return None
            seen.add(name)
            i = self._index.get(name)
            if i is None:
                continue
            for field, value in (('position', position), ('velocity', velocity)):
                if not (math.isfinite(value) and abs(value) <= MAX_ABS_STATE):
                    self._warn(f'joint_states.{field}[{k}] (joint {name!r}): {value} is not a '
                               f'finite value within +-{MAX_ABS_STATE:g}; message dropped')
                    return None
            updates.append((i, position, velocity))
        return updates

    def _repeats_answered_state(self, raw, targets, positions, velocities):
        """on_state: True for a re-publication of the state the last cycle answered (same
        non-zero stamp, same values; a lock-step simulator re-sends a state it is waiting on).
        Answering it again would send a second command for one state, and a lock-step plant
        would take that one as the answer to its next state: every later command would then
        be applied one cycle late. raw: the message's header stamp [s]."""
        if not (self._ready and raw > 0.0 and raw == self._last_raw):
            return False
        if not (np.array_equal(self._q[targets], positions)
                and np.array_equal(self._qd[targets], velocities)):
            return False          # another publisher's joints with the same stamp
        self.get_logger().debug(f'joint_states at {raw:.4f} s again (already answered): '
                                'not answered twice')
        return True

    def _state_stamp(self, raw, now):
        """on_state: the time the cycle samples the reference at (the message stamp `raw`
        [s], or the node clock for stamp 0), or None if the message is to be dropped."""
        stamp = raw if raw > 0.0 else now
        if now > 0.0 and stamp > now + FUTURE_LIMIT:
            self._warn(f'joint_states.header.stamp {stamp:.3f} s is more than {FUTURE_LIMIT:g} '
                       f's ahead of the node clock ({now:.3f} s); message dropped')
            return None
        last = self._last_stamp
        # A stamped publisher sending stamp 0 restarted at simulated time 0 (its /clock may
        # not have reached us yet); the node clock going back means the same.
        restarted = (raw <= 0.0 < self._last_raw) or now < self._last_now
        if last is not None and (stamp < last or restarted):
            if last - stamp <= CLOCK_RESET and not restarted:
                self._warn(f'joint_states.header.stamp went backwards ({stamp:.4f} s after '
                           f'{last:.4f} s); message dropped')
                return None
            self.get_logger().warning(
                f'joint_states.header.stamp {raw:.4f} s after {last:.4f} s (publisher or clock '
                'restarted?): re-synchronising')
            self._stale = True
        self._last_stamp, self._last_now, self._last_raw = stamp, now, raw
        return stamp

    @guarded('control cycle', control=True)
    def _on_timer(self):
        now = self._now()
        self._control_cycle(now, now)

    @guarded('joint_trajectory')
    def _on_trajectory(self, msg):
        if not self._ready:
            self._warn('joint_trajectory rejected: not all controlled joints seen on '
                       '/joint_states yet')
            return
        refusal = self.trajectory_refusal()
        if refusal is not None:
            self._warn(f'joint_trajectory rejected: {refusal}')
            return
        now = self._now()
        try:
            command, note = self.feasibility.accept(TrajectoryCommand.from_message(msg), now)
        except TrajectoryRejected as error:
            self.get_logger().warning(f'joint_trajectory rejected: {error}')
            return
        duration = command.points[-1].time_from_start if command.points else 0.0
        self.get_logger().info(f'joint_trajectory accepted: {len(msg.points)} points, '
                               f'{duration:g} s' + (f' ({note})' if note else ''))
        self._goal_reached = None
        self._action.preempt('preempted by a trajectory on ~/joint_trajectory')
        self._topic_tolerances.start(command, now)     # path tolerance, goal_time (JTC)

    # ------------------------------------------------------------------ the control cycle

    @measured
    def _control_cycle(self, t, clock_now):
        """t: the time the reference is sampled at; clock_now: for the state timeout."""
        if not self._ready and not self._start_holding(t):
            return
        if self.state_timeout > 0.0 and clock_now - self._received.min() > self.state_timeout:
            stale = [self.joints[i] for i in np.flatnonzero(
                clock_now - self._received > self.state_timeout)]
            if not self._stale:
                self.get_logger().warning(
                    f'no /joint_states for {stale} within state_timeout '
                    f'{self.state_timeout:g} s: commanding zero effort until they return')
                self._action.preempt(f'aborted: no /joint_states for {stale} within '
                                     'state_timeout')
            self._stale = True
            self._publish_command(np.zeros(self.model.n))
            self._set_status('state_timeout')
            return
        if self._stale or t < self._last_t:
            self._resync(t)
        self._last_t = t
        self._take_new_law(t)
        if self.cmd_timeout > 0.0 and self.sampler.command_timed_out(
                t, self._effective_cmd_timeout()):
            self._command_timed_out(t)
        reference = self.sampler.sample(t)
        if self._continuous:                # the wrapped error: q_d within half a turn of q
            reference = replace(reference, positions=self.sampler.near(reference.positions,
                                                                       self._q))
        tau = self.law.effort(self._q, self._qd, reference.positions, reference.velocities,
                              reference.accelerations)
        if reference.effort is not None:    # the points' effort feed-forward
            tau = tau + reference.effort
        if not np.all(np.isfinite(tau)):
            self.get_logger().error('non-finite effort computed; commanding zero effort',
                                    throttle_duration_sec=THROTTLE)
            tau = np.zeros(self.model.n)
        tau = self._saturate(tau)
        if self._rate_limit is not None:    # effort_rate_limit, after the effort limits
            tau = self._rate_limit.limit(tau, t)
        self._publish_command(tau)          # first: the reaction latency ends here
        self.identification.record(t, self._q, self._qd, tau, (
            reference.positions, reference.velocities, reference.accelerations))
        self._update_status(t)
        self._action.after_cycle(t, reference, self._q, self._qd)
        self._topic_tolerances.after_cycle(t, reference, self._q, self._qd)
        if self.publish_state and self._state_due(t):
            self._publish_state(reference, tau)

    def _state_due(self, t):
        """Diagnostics at most state_publish_rate (of the cycle time t); time going back
        restarts the count."""
        if t - self._last_state_t >= self._state_period or t < self._last_state_t:
            self._last_state_t = t
            return True
        return False

    def _resync(self, t):
        """After a state timeout or a clock going back: hold the measured position (any
        trajectory is abandoned), so the reference never jumps to an old one."""
        self._stale = False
        self.sampler.hold(self._q.copy(), t)
        self._restarted()
        self._goal_reached = None
        self._action.preempt('aborted: /joint_states lost or time went back; holding the '
                             'measured position')
        self.get_logger().warning('/joint_states back (or time went back): holding the '
                                  'measured position; send a new trajectory to move')

    def _restarted(self):
        """Holding from the measured state (first cycle, re-synchronised): a Cartesian law
        at the measured tool pose; the rate limit starts from the first effort (a ramp from
        a zero effort would let the arm fall)."""
        if isinstance(self.law, control_laws.CartesianLaw):
            self.law.hold(self._q)
        if self._rate_limit is not None:
            self._rate_limit.reset()

    def _command_timed_out(self, t):
        """cmd_timeout after the last point (JTC): stop from the measured state."""
        text = (f'cmd_timeout: no new trajectory {self.cmd_timeout:g} s after the last point; '
                + ('decelerating to rest from' if self.sampler.max_deceleration_on_cancel
                   is not None else 'holding') + ' the measured position')
        self.sampler.stop(t, self._q.copy(), self._qd.copy())
        self.get_logger().warning(text)
        self._goal_reached = None
        self._action.preempt(f'aborted: {text}', GOAL_TOLERANCE_VIOLATED)

    def _take_new_law(self, t):
        ready = self._swap.take()
        if ready is not None:
            law, self.effort_limits, settings = ready
            self._use_law(law, settings, t)
            self.get_logger().info(
                f'new gains/effort limits/payload in effect (payload '
                f'{self.law.model.payload.mass:g} kg)')

    def _use_law(self, law, settings, t):
        """`law` in effect from the cycle at time t (control_laws.switched: no jump)."""
        old, old_name = self.law, self._law_name
        self.law, self.law_settings = law, settings
        self._law_name = settings['control_law']
        if getattr(self, '_ready', False):
            control_laws.switched(self, old, law, old_name, self._law_name, t)
        self._set_rate_limit(settings)

    def _set_rate_limit(self, settings):
        rate = settings['effort_rate_limit']
        self._rate_limit = (None if rate is None else
                            control_laws.EffortRateLimit(rate).carried_from(self._rate_limit))

    def trajectory_refusal(self):
        """Why a joint trajectory (topic or action goal) does not apply now, or None."""
        return control_laws.refusal(self.control_law, 'trajectory')

    def _saturate(self, tau):
        """Clip to the effort limits; count the cycles and joints clipped and warn."""
        limited, clipped = saturate(tau, self.effort_limits)
        if clipped:
            self._saturated_cycles += 1
            self._saturation_pub.publish(UInt64(data=self._saturated_cycles))
            joints = [self.joints[i] for i in np.flatnonzero(limited != tau)]
            self._diagnostics.saturated_joints.update(joints)
            self._warn(f'effort clipped to effort_limits on {joints} '
                       f'({self._saturated_cycles} cycles so far)')
        return limited

    def _start_holding(self, t):
        """Before the first trajectory: hold the position measured once all are seen."""
        if not np.all(np.isfinite(self._received)):
            missing = [self.joints[i] for i in np.flatnonzero(~np.isfinite(self._received))]
            self.get_logger().info(f'waiting for /joint_states of {missing}',
                                   throttle_duration_sec=5.0)
            return False
        self.sampler.hold(self._q.copy(), t)
        self._ready = True
        self._last_t = t
        self._restarted()
        outside = self.sampler.describe_outside(self._q)
        if outside:
            self.get_logger().warning(
                f'all joints seen: holding the measured position, outside the position '
                f'limits: {outside}; only a trajectory that brings it back inside is accepted')
        else:
            self.get_logger().info('all joints seen: holding the measured position')
        return True

    def _update_status(self, t):
        status = self.sampler.status(t)
        self._set_status(status)
        if status in ('finished', 'holding'):
            reached = self.sampler.at_goal(
                self._q, self._qd, t, self.joint_constraints.goal_position(self.goal_tolerance),
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
        if not self._command_check.allows():    # undecided, or another joint order there
            return
        msg = self._command_msg     # built once, refilled (publish serialises it)
        msg.data = doubles(tau)
        self._command_pub.publish(msg)
        self._commanding = self._cycle_published = True

    def _zero_on_exit(self):
        """The node is going away (shutdown, SIGINT, SIGTERM, an exception out of the loop):
        a last zero effort if efforts went out since the last zero, acknowledged by the
        subscribers (at most ZERO_ACK_WAIT) before the publisher is destroyed, because a
        forward_command_controller applies the last command it got for ever."""
        if not getattr(self, '_commanding', False):
            return
        self._commanding = False
        try:
            if not self.context.ok():
                return
            self._publish_command(np.zeros(self.model.n))
            self._commanding = False
            self._command_pub.wait_for_all_acked(Duration(seconds=ZERO_ACK_WAIT))
            self.get_logger().info(f'stopping: zero effort sent on {self._command_pub.topic_name}')
        except Exception as error:  # noqa: B902 - a context shut down meanwhile
            self.get_logger().warning(f'stopping: the last zero effort could not be sent '
                                      f'({type(error).__name__}: {error})')

    def _publish_state(self, reference, tau):
        stamp = self.get_clock().now().to_msg()
        reference_msg, feedback, error, output = self._state_msgs
        # ~/reference: effort carries q̈_d [rad/s² | m/s²] (documented in the README).
        self._fill(reference_msg, stamp, reference.positions, reference.velocities,
                   reference.accelerations)
        self._reference_pub.publish(reference_msg)
        self._fill(feedback, stamp, self._q, self._qd, ())
        self._feedback_pub.publish(feedback)
        self._fill(error, stamp, reference.positions - self._q,
                   reference.velocities - self._qd, ())
        self._error_pub.publish(error)
        self._fill(output, stamp, (), (), tau)
        self._output_pub.publish(output)
        self._action.publish_state(stamp, reference, self._q, self._qd, tau)
        if self._cartesian.wanted:
            self._cartesian.publish_tool_pose(stamp)

    @staticmethod
    def _fill(msg, stamp, position, velocity, effort):
        """Refill a JointState built once with the joint names."""
        msg.header.stamp = stamp
        msg.position = doubles(position)
        msg.velocity = doubles(velocity)
        msg.effort = doubles(effort)


def _own_loop(node):
    """In on_state mode on the wall clock the node's own loop; otherwise the executor
    (with use_sim_time it keeps serving /clock with every state)."""
    if node.control_mode != 'on_state' or node.get_parameter('use_sim_time').value:
        return None
    return node.spin_on_state


def main(args=None):
    """Entry point `controller`: exits 1 with one log line on a bad parameter file."""
    return run(ComputedTorqueController, NODE_NAME, args, own_loop_after_the_model(_own_loop))


if __name__ == '__main__':
    sys.exit(main())
