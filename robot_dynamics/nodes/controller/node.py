"""The computed_torque_controller node: its cycle (sample the reference, one control-law
call, clip, publish), interfaces and lifecycle; what it does and where its parts live: the
package's docstring (robot_dynamics.nodes.controller)."""

import math
import time
from dataclasses import replace

import numpy as np
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, qos_profile_sensor_data, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String, UInt64
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.control import saturate
from robot_dynamics.nodes.common.cartesian_topics import CartesianTopics
from robot_dynamics.nodes.common.command_controller import CommandControllerCheck
from robot_dynamics.nodes.common.diagnostics import ControllerDiagnostics, measured
from robot_dynamics.nodes.common.ros_params import (declare_robot, keep_float_types,
                                                   name_unknown_parameters)
from robot_dynamics.nodes.common.runner import own_loop_after_the_model, run
from robot_dynamics.nodes.common.throttled_log import log_throttled
from robot_dynamics.nodes.controller.guard import doubles, guarded, THROTTLE
from robot_dynamics.nodes.controller.law_selection import LawSelection, LawSwap
from robot_dynamics.nodes.controller.loop_delay import WINDOW
from robot_dynamics.nodes.controller.parameters import ControllerParameters
from robot_dynamics.nodes.controller.state_input import JointStateInput
from robot_dynamics.nodes.payload_identification import PayloadIdentification
from robot_dynamics.nodes.trajectories import follow_joint_trajectory, speed_scaling
from robot_dynamics.nodes.trajectories.topic_tolerances import TopicTrajectoryTolerances
from robot_dynamics.parameters.controller import CONTROL_MODES  # noqa: F401
from robot_dynamics.trajectories.sampler import TrajectoryCommand, TrajectoryRejected
from robot_dynamics.trajectories.goal import GOAL_TOLERANCE_VIOLATED

NODE_NAME = 'computed_torque_controller'
SERVICE_PERIOD = 0.01   # s: in spin_on_state, the executor serves the rest this often
AGE_ALPHA = 1.0 / WINDOW   # stamp_joint: the running mean of the states' ages, as the
#                            measured dead time's
                        # (after a cycle; at most twice as long without states)
ZERO_ACK_WAIT = 0.5     # s: at exit, wait at most this for the subscribers to take the zero



class ComputedTorqueController(ControllerParameters, JointStateInput, LawSelection, Node):
    """Subscribes /joint_states and ~/joint_trajectory, publishes efforts and its state.
    Its parameters (controller/parameters.py), state input (state_input.py) and law
    selection (law_selection.py) are mixins."""

    parameter_table = NODE_NAME     # robot_dynamics.parameters.TABLES

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
        if getattr(self, 'superseded_states', 0):
            self.get_logger().info(
                f'{self.superseded_states} /joint_states were superseded by a newer one '
                'before their cycle (the controller fell behind the state stream; each time '
                'it answered the newest)')
        if getattr(self, 'repeated_states', 0):
            self.get_logger().info(
                f'{self.repeated_states} moving /joint_states repeated the previous one value '
                'for value under a newer stamp (a read that found no new state, e.g. behind '
                'joint_state_broadcaster); each was taken at '
                + ('the time its stamp_joint gives' if self._age_mean is not None
                   else 'its first stamp'))
        if getattr(self, 'measure_latency', False):
            estimate = self.loop_delay
            self.get_logger().info(
                f'measure_latency: the dead time at the end {estimate.value * 1e3:.3f} ms; '
                f'{estimate.samples} states echoed a command (and {estimate.inferred} ticks '
                f'without a state before them), {estimate.unmatched} none, '
                f'{estimate.ambiguous} one sent more than once')
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
        self._changed_at = np.full(n, -math.inf)  # ... its state last changed, if moving [s]
        self._frozen = np.zeros(n, dtype=bool)    # moving joints whose state stays the same
        self._ready = False
        self._stale = False          # states timed out (or time went back): re-sync and hold
        self._last_t = -math.inf     # reference time of the last cycle [s]
        self._last_stamp = None      # on_state: stamp of the last accepted /joint_states
        self.superseded_states = 0   # on_state: queued states dropped for a newer one
        self._last_now = -math.inf   # on_state: node clock when it was accepted
        self._last_raw = 0.0         # on_state: its header stamp as sent (0: not stamped)
        self._measured_at = -math.inf   # on_state: stamp of the first message of the state held
        self._repeat_age = 0.0       # on_state: how much older the state is than its stamp [s]
        self._measured = None        # stamp_joint: when the state held was measured [s]
        self._stamp_names = None     # ... the name list its index was found in
        self._stamp_index = None     # ... its index there (None: not in it)
        self._age_mean = None        # ... the running mean of the states' ages [s]
        self.repeated_states = 0     # on_state: moving states repeated under a newer stamp
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
        self._cartesian = CartesianTopics(self)     # ~/target_pose (twist, accel), ~/tool_pose

    def spin_on_state(self, executor, running=None):
        """The controller executable's loop in on_state mode, instead of `executor`: wait
        on the /joint_states and trajectory subscriptions alone, in a wait set made once
        (rclpy's executor builds one from every entity of the node for each message, ≈ 0.15
        ms of Python per state here), run the callbacks of what arrived, in arrival order
        per topic, and let `executor` serve the rest (parameter services, the action
        server, the other topics) once SERVICE_PERIOD has passed: right after the cycle of
        the first state that comes after it, so that the ≈ 0.3-1 ms that serving takes
        falls where the loop waits for its next state anyway (at a fixed time it held up
        the state arriving meanwhile, at 1 kHz up to one in ten, whose effort could then
        miss its controller_manager cycle); with no state coming, SERVICE_PERIOD later at
        the latest. Returns when
        `running()` turns false (a stop request) or the context shuts down, or at once if
        this rclpy lacks the wait-set binding (the executor then does all the work)."""
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
            now = time.monotonic()
            try:
                if now >= serve_at:
                    serve_at = now + SERVICE_PERIOD
                    executor.spin_once(timeout_sec=0.0)
                else:
                    self._wait_and_take(wait_set, topics,
                                        round((serve_at + SERVICE_PERIOD - now) * 1e9))
            except Exception:  # noqa: B902 - rclpy's RCLError on a context shut down meanwhile
                if self.context.ok():
                    raise
                return                    # another thread shut the context down

    def _wait_and_take(self, wait_set, topics, timeout_ns):
        (state_sub, _, _), (trajectory_sub, _, _) = topics
        with state_sub.handle, trajectory_sub.handle:
            wait_set.clear_entities()
            wait_set.add_subscription(state_sub.handle)
            wait_set.add_subscription(trajectory_sub.handle)
            wait_set.wait(timeout_ns)
            for subscription, msg_type, callback in topics:
                waiting = []
                taken = subscription.handle.take_message(msg_type, False)
                while taken is not None:
                    waiting.append(taken[0])
                    taken = subscription.handle.take_message(msg_type, False)
                if subscription is state_sub:
                    waiting = self._newest_states(waiting)
                for msg in waiting:
                    callback(msg)

    def _newest_states(self, waiting):
        """The /joint_states to answer of those waiting, in order: a message is dropped when
        a later one names the same joints (it carries newer values of all of them). After a
        stall the cycle then answers the newest state once instead of every queued one in
        turn, each older than the last; a publisher of only some joints still has its
        newest message answered. Counted in superseded_states."""
        if len(waiting) < 2:
            return waiting
        kept, seen = [], []
        for msg in reversed(waiting):
            names = list(msg.name)
            if names in seen:
                self.superseded_states += 1
                continue
            seen.append(names)
            kept.append(msg)
        return kept[::-1]

    def _now(self):
        return self.get_clock().now().nanoseconds * 1e-9

    def _warn(self, text):
        log_throttled(self, 'warning', text, THROTTLE, depth=2)   # per caller

    # ------------------------------------------------------------------ callbacks

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
            late = np.flatnonzero(clock_now - self._received > self.state_timeout)
            if not self._stale:
                what = self._watchdog_text(late)
                self.get_logger().warning(
                    f'{what} within state_timeout {self.state_timeout:g} s: commanding zero '
                    'effort until they return')
                self._action.preempt(f'aborted: {what} within state_timeout')
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
        q, qd = self._q, self._qd
        delay = self.loop_delay.value if self.measure_latency else self.latency_compensation
        measured = self._measured
        if measured is None:
            measured = t - self.state_age
            acts = measured + delay         # when the effort acts
            horizon = delay + self._repeat_age  # a state sent again is older than its stamp
        else:                               # stamp_joint: the age of this very state
            age = max(clock_now - measured, 0.0)
            mean = self._age_mean = age if self._age_mean is None else (
                self._age_mean + AGE_ALPHA * (age - self._age_mean))
            horizon = max(delay + age - mean, 0.0)
            acts = measured + horizon
        if horizon > 0.0:                   # the state then, accelerating as the reference
            #                                 does over the horizon: its mean acceleration,
            #                                 that of the middle (the end's overshoots q̇ by
            #                                 q⃛_d h²/2, which kd turns into a lag)
            a = self.sampler.accelerations(acts - 0.5 * horizon)
            q, qd = q + (qd + 0.5 * a * horizon) * horizon, qd + a * horizon
        reference = self.sampler.sample(acts)
        if self._continuous:                # the wrapped error: q_d within half a turn of q
            reference = replace(reference, positions=self.sampler.near(reference.positions,
                                                                       q))
        tau = self.law.effort(q, qd, reference.positions, reference.velocities,
                              reference.accelerations)
        if reference.effort is not None:    # the points' effort feed-forward
            tau = tau + reference.effort
        if not np.all(np.isfinite(tau)):
            log_throttled(self, 'error', 'non-finite effort computed; commanding zero effort',
                          THROTTLE)
            tau = np.zeros(self.model.n)
        tau = self._saturate(tau)
        if self._rate_limit is not None:    # effort_rate_limit, after the effort limits
            tau = self._rate_limit.limit(tau, t)
        self._publish_command(tau)          # first: the reaction latency ends here
        if self.measure_latency:
            self.loop_delay.sent(t if self._measured is None else measured,
                                 np.asarray(tau, dtype=float))
        self.identification.record(t, self._q, self._qd, tau, (
            reference.positions, reference.velocities, reference.accelerations))
        self._update_status(t)
        self._action.after_cycle(t, reference, q, qd)
        self._topic_tolerances.after_cycle(t, reference, q, qd)
        if self.publish_state and self._state_due(t):
            self._publish_state(reference, tau, q, qd)

    def _watchdog_text(self, late):
        """What tripped the state watchdog for the joints `late` (indices): 'no
        /joint_states for [...]' and/or '/joint_states of [...] frozen'."""
        silent = [self.joints[i] for i in late if not self._frozen[i]]
        frozen = [self.joints[i] for i in late if self._frozen[i]]
        parts = ([f'no /joint_states for {silent}'] if silent else []) + (
            [f'/joint_states of {frozen} frozen (the same moving state sent again)']
            if frozen else [])
        return ' and '.join(parts)

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

    def _command_timed_out(self, t):
        """cmd_timeout after the last point (JTC): stop from the measured state."""
        text = (f'cmd_timeout: no new trajectory {self.cmd_timeout:g} s after the last point; '
                + ('decelerating to rest from' if self.sampler.max_deceleration_on_cancel
                   is not None else 'holding') + ' the measured position')
        self.sampler.stop(t, self._q.copy(), self._qd.copy())
        self.get_logger().warning(text)
        self._goal_reached = None
        self._action.preempt(f'aborted: {text}', GOAL_TOLERANCE_VIOLATED)

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
            log_throttled(self, 'info', f'waiting for /joint_states of {missing}', 5.0)
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

    def _publish_state(self, reference, tau, q, qd):
        """~/reference, ~/feedback (the measured state), ~/error (the reference minus q,
        qd: the measured state, or the predicted one with latency_compensation), ~/output."""
        stamp = self.get_clock().now().to_msg()
        reference_msg, feedback, error, output = self._state_msgs
        # ~/reference: effort carries q̈_d [rad/s² | m/s²] (documented in the README).
        self._fill(reference_msg, stamp, reference.positions, reference.velocities,
                   reference.accelerations)
        self._reference_pub.publish(reference_msg)
        self._fill(feedback, stamp, self._q, self._qd, ())
        self._feedback_pub.publish(feedback)
        self._fill(error, stamp, reference.positions - q, reference.velocities - qd, ())
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

