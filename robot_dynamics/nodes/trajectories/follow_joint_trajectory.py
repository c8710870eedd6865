"""The controller's `~/follow_joint_trajectory` action server
(control_msgs/action/FollowJointTrajectory) and its `~/controller_state` topic
(control_msgs/msg/JointTrajectoryControllerState), with `~/query_state` (query_state.py):
doc/action.md.

control_msgs is optional: without it `attach` returns an interface that does nothing and
the controller runs on its topics alone (one info line says so).

The control loop never waits for the action. rclpy runs an action goal as an executor task
around the execute callback, and a task that awaits something is resumed on every
`spin_once` (a busy executor) until it ends. So no task waits here: an accepted goal is put
in the EXECUTING state and handed to the control cycle; the cycle (or a cancel, a new goal,
a trajectory on the topic) decides its outcome, and only then is the execute callback
scheduled, which sets the terminal state and returns the result at once. Every callback is
short, in the executor that serves the node (timer mode, the one-process `sim`, and the
`on_state` loop, whose `executor.spin_once` every SERVICE_PERIOD serves the action server's
services and tasks like the parameter services).
"""

import threading

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.qos import QoSProfile, ReliabilityPolicy

from robot_dynamics.nodes.trajectories import query_state
from robot_dynamics.nodes.common.ros_params import (ConfigurationError, declare, seconds,
                                                   validated)
from robot_dynamics.nodes.common.throttled_log import log_throttled
from robot_dynamics.trajectories.sampler import (InvalidJoints, TrajectoryCommand,
                                                 TrajectoryRejected)
from robot_dynamics.trajectories.goal import (INVALID_GOAL, joint_tolerances, rejection_code,
                                              resolve_tolerance, SUCCESSFUL, TrajectoryGoalMonitor)

try:
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTrajectoryControllerState
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.impl.implementation_singleton import rclpy_implementation
    UNAVAILABLE = None
except ImportError as error:        # the PyPI-only set-up before control_msgs is built
    FollowJointTrajectory = JointTrajectoryControllerState = None
    UNAVAILABLE = str(error)

ACTION_NAME = 'follow_joint_trajectory'
STATE_TOPIC = 'controller_state'
THROTTLE = 2.0          # s between logged refusals (each client gets its reason)
REQUEST_DEPTH = 256     # goal, cancel and result requests kept: a burst is queued, not lost


def attach(node):
    """The action server and `~/controller_state` of the controller `node` (after its
    interfaces exist), or a stand-in that does nothing when control_msgs is missing."""
    monitor_rate, goal_time = (validated(node, name, declare(node, name))
                               for name in ('action_monitor_rate', 'constraints.goal_time'))
    if UNAVAILABLE is not None:
        node.get_logger().info(f'control_msgs cannot be imported ({UNAVAILABLE}): the '
                               f'~/{ACTION_NAME} action, ~/{query_state.SERVICE_NAME} and '
                               f'~/{STATE_TOPIC} are off; the topics work as before')
        return NoActionInterface()
    interface = FollowJointTrajectoryInterface(node, monitor_rate, goal_time)
    query_state.attach(node)                    # ~/query_state
    return interface


class NoActionInterface:
    """Without control_msgs: the controller's hooks do nothing."""

    def after_cycle(self, t, reference, q, qd):
        pass

    def publish_state(self, stamp, reference, q, qd, tau):
        pass

    def preempt(self, text, code=None):
        pass

    def destroy(self):
        pass


class _ActiveGoal:
    """One accepted goal while it runs."""

    def __init__(self, handle, monitor, point_times, feedback):
        self.handle = handle
        self.monitor = monitor
        self.point_times = point_times        # trajectory time of each point [s]
        self.feedback = feedback              # built once, refilled
        self.last_feedback = -np.inf
        self.canceling = False
        self.stopping = None                  # how a cancel stops the arm (its result says)
        self.note = None                      # how the trajectory was time-scaled, if it was


def _trajectory_field(error):
    """A sampler's rejection, with the field named as in the goal."""
    text = str(error)
    if text.startswith('start_time'):
        text = 'trajectory.header.stamp' + text[len('start_time'):]
    elif text.startswith(('points', 'joint_names')):
        text = 'trajectory.' + text
    return type(error)(text)


def _point(msg, positions=(), velocities=(), accelerations=(), effort=()):
    """Refill a trajectory_msgs/JointTrajectoryPoint."""
    msg.positions = np.asarray(positions, dtype=float).tolist()
    msg.velocities = np.asarray(velocities, dtype=float).tolist()
    msg.accelerations = np.asarray(accelerations, dtype=float).tolist()
    msg.effort = np.asarray(effort, dtype=float).tolist()


class FollowJointTrajectoryInterface:
    """`~/follow_joint_trajectory` and `~/controller_state` of a ComputedTorqueController."""

    def __init__(self, node, monitor_rate, goal_time):
        self.node = node
        self.goal_time = goal_time
        self._feedback_period = 0.99 / monitor_rate     # 1 % short: no due feedback skipped
        self._lock = threading.RLock()
        self._goal = None
        self.last_tolerances = None  # (path, goal, goal_time) of the last accepted goal
        self._note = None            # the time scaling of the goal being installed
        self._results = {}          # goal id -> (code, text) until the execute callback
        self._state_msg = JointTrajectoryControllerState(joint_names=list(node.joints),
                                                         speed_scaling_factor=1.0)
        self._state_pub = node.create_publisher(JointTrajectoryControllerState,
                                                f'~/{STATE_TOPIC}', 10)
        requests = QoSProfile(depth=REQUEST_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        self._server = ActionServer(
            node, FollowJointTrajectory, f'{node.get_name()}/{ACTION_NAME}',
            execute_callback=self._result_of, goal_callback=lambda goal: GoalResponse.ACCEPT,
            handle_accepted_callback=self._on_accepted, cancel_callback=self._on_cancel,
            **{f'{kind}_service_qos_profile': requests for kind in ('goal', 'cancel', 'result')})
        node.add_on_set_parameters_callback(self._on_set_parameters)

    def destroy(self):
        """With the node: rclpy's destroy_node leaves action servers alive, and with them
        the node's own handle and entities."""
        if self._server in self.node.waitables:     # not yet destroyed (managed cleanup)
            self._server.destroy()

    # ------------------------------------------------------------------ goals

    def _on_accepted(self, handle):
        """Validate, install and track a goal; a refused goal ends at once with its reason
        (the running motion is not touched). rclpy's goal callback cannot return a reason,
        so every goal is accepted by the action layer and a refused one is aborted here."""
        now = self.node._now()
        with self._lock:
            try:
                goal = self._install(handle, now)
            except TrajectoryRejected as error:
                code = rejection_code(error)
                log_throttled(self.node, 'warning',   # the client gets every reason
                              f'follow_joint_trajectory goal refused ({code}): {error}',
                              THROTTLE)
                self._end(handle, code, str(error))
                return
            except Exception as error:  # noqa: B902 - a malformed goal must not stop the node
                self.node.get_logger().error(f'follow_joint_trajectory goal refused: '
                                             f'unexpected {type(error).__name__}: {error}')
                self._end(handle, INVALID_GOAL, f'{type(error).__name__}: {error}')
                return
            if self._goal is not None:
                self._end(self._goal.handle, INVALID_GOAL, 'preempted by a new goal')
            self._goal = goal
            goal.note = self._note                  # how it was time-scaled, if it was
            monitor = goal.monitor                  # topic trajectories use them too (JTC)
            self.last_tolerances = (monitor.path, monitor.goal, monitor.goal_time_tolerance)
            self.node._goal_reached = None
            # ACCEPTED -> EXECUTING without scheduling the execute callback: rclpy's public
            # ServerGoalHandle.execute() would start it now. _update_state is private API,
            # the same in Jazzy and Kilted (the tests run on both).
            handle._update_state(rclpy_implementation.GoalEvent.EXECUTE)
        # a first feedback at once: the client knows the goal runs before any outcome
        node = self.node
        goal.last_feedback = node._last_t
        self._publish_feedback(goal, now, node.sampler.sample(now), node._q, node._qd)
        trajectory = handle.request.trajectory
        self.node.get_logger().info(
            f'follow_joint_trajectory goal accepted: {len(trajectory.points)} points, '
            f'{goal.monitor.end_time - goal.monitor.start_time:g} s'
            + (f' ({goal.note})' if goal.note else ''))

    def _install(self, handle, now):
        """The goal as an _ActiveGoal, its trajectory installed in the sampler; raises
        TrajectoryRejected (with the goal's field named) and changes nothing if invalid."""
        node = self.node
        request = handle.request
        state = getattr(node, 'lifecycle_state', 'active')     # controller_managed
        if state != 'active':
            raise TrajectoryRejected(f'the controller is {state} (activate it first)')
        if not node._ready:
            raise TrajectoryRejected('not all controlled joints seen on /joint_states yet')
        refusal = node.trajectory_refusal()     # the control law takes no joint reference
        if refusal is not None:
            raise TrajectoryRejected(refusal)
        multi_dof = request.multi_dof_trajectory
        if multi_dof.joint_names or multi_dof.points:
            raise InvalidJoints(f'multi_dof_trajectory: joints {list(multi_dof.joint_names)}: '
                                'this controller follows single-DOF joints only '
                                f'{list(node.joints)}')
        for field in ('component_path_tolerance', 'component_goal_tolerance'):
            entries = getattr(request, field)
            if entries:
                raise TrajectoryRejected(
                    f'{field}[0] (joint {entries[0].joint_name!r}): component tolerances are '
                    'for multi-DOF joints, which this controller does not have; use '
                    f'{field.replace("component_", "")}')
        if not request.trajectory.points:
            raise TrajectoryRejected('trajectory.points: empty (to stop, cancel the goal)')
        joints = node.joints
        constraints = node.joint_constraints            # constraints.<joint>.* defaults
        path = joint_tolerances(joints, constraints.path_defaults(), request.path_tolerance,
                                'path_tolerance')
        goal = joint_tolerances(
            joints, constraints.goal_defaults(node.goal_tolerance,
                                              node.stopped_velocity_tolerance),
            request.goal_tolerance, 'goal_tolerance')
        goal_time = resolve_tolerance(self.goal_time, seconds(request.goal_time_tolerance),
                                      'goal_time_tolerance')
        command = TrajectoryCommand.from_message(request.trajectory)
        try:
            command, self._note = node.feasibility.accept(command, now)   # maybe slower
        except TrajectoryRejected as error:
            raise _trajectory_field(error) from None
        # in trajectory time, which speed scaling slows down (goal_time_tolerance too, as JTC)
        start = node.sampler.trajectory_start(command.start_time, now)
        point_times = start + np.array([p.time_from_start for p in command.points])
        monitor = TrajectoryGoalMonitor(joints, node.sampler.goal_positions, start,
                                        point_times[-1], path, goal, goal_time,
                                        node.sampler.continuous)
        feedback = FollowJointTrajectory.Feedback(joint_names=list(joints))
        return _ActiveGoal(handle, monitor, point_times, feedback)

    def _on_cancel(self, handle):
        """Cancel the running goal: hold the measured position, or with
        constraints.decelerate_on_cancel bring the reference to rest from where it is; the
        next control cycle ends the goal as canceled (the server marks it canceling after
        this returns)."""
        with self._lock:
            goal = self._goal
            if goal is None or goal.handle is not handle or goal.canceling:
                return CancelResponse.REJECT
            goal.canceling = True
            goal.stopping = self._hold('cancel requested', from_reference=True)
        return CancelResponse.ACCEPT

    def preempt(self, text, code=INVALID_GOAL):
        """A trajectory on the topic (or anything else) replaced the goal's motion."""
        with self._lock:
            if self._goal is not None:
                self._end(self._goal.handle, code, text)
                self._goal = None

    def _hold(self, why, from_reference=False):
        """Stop: hold the measured position at once, or with decelerate_on_cancel
        decelerate to rest from the reference (a cancel: no step in q_d, q̇_d) or from the
        measured state (a violation: the reference is off, as JTC). Returns what it does,
        for the goal's result."""
        node = self.node
        sampler = node.sampler
        if sampler.max_deceleration_on_cancel is None:
            sampler.hold(node._q.copy(), node._last_t)
            how = 'holding the measured position'
        elif from_reference:
            sampler.stop(node._last_t)
            how = 'decelerating to rest from the reference'
        else:
            sampler.stop(node._last_t, node._q.copy(), node._qd.copy())
            how = 'decelerating to rest from the measured state'
        node.get_logger().warning(f'follow_joint_trajectory: {why}; {how}')
        return how

    # ------------------------------------------------------------------ each control cycle

    def after_cycle(self, t, reference, q, qd):
        """Feedback, and the goal's outcome, after the effort of the cycle at t is out."""
        goal = self._goal
        if goal is None:
            return
        with self._lock:
            if goal is not self._goal:
                return
            if goal.canceling:
                if goal.handle.is_cancel_requested:
                    self._end(goal.handle, SUCCESSFUL, f'canceled; {goal.stopping}',
                              canceled=True)
                    self._goal = None
                return
            state_time = None
            if goal.monitor.acceleration is not None:     # q̈ estimated from the states
                node = self.node                          # (in controller time)
                state_time = t if node.control_mode == 'on_state' else node._received.max()
            outcome = goal.monitor.check(self.node.sampler.trajectory_time(t), q, qd,
                                         reference, state_time)
            if outcome is not None:
                text = outcome.text
                if outcome.code != SUCCESSFUL:
                    how = self._hold(text)
                    held = '; holding the position'     # the monitor's words for a hold
                    if text.endswith(held):             # what _hold did instead
                        text = f'{text[:-len(held)]}; {how}'
                else:
                    self.node.sampler.settle()      # no cmd_timeout after success
                    self.node.get_logger().info(f'follow_joint_trajectory: {outcome.text}')
                self._end(goal.handle, outcome.code, text
                          + (f' ({goal.note})' if goal.note else ''))
                self._goal = None
                return
        if t - goal.last_feedback >= self._feedback_period or t < goal.last_feedback:
            goal.last_feedback = t
            self._publish_feedback(goal, t, reference, q, qd)

    def _publish_feedback(self, goal, t, reference, q, qd):
        feedback = goal.feedback
        feedback.header.stamp = self.node.get_clock().now().to_msg()
        _point(feedback.desired, reference.positions, reference.velocities,
               reference.accelerations)
        _point(feedback.actual, q, qd)
        _point(feedback.error, reference.positions - q, reference.velocities - qd)
        if hasattr(feedback, 'index'):      # control_msgs 6 (Kilted); not in Jazzy's 5.8
            ahead = np.flatnonzero(goal.point_times >= self.node.sampler.trajectory_time(t))
            feedback.index = int(ahead[0]) if ahead.size else len(goal.point_times) - 1
        goal.handle.publish_feedback(feedback)

    def publish_state(self, stamp, reference, q, qd, tau):
        """~/controller_state, when the controller publishes its diagnostics."""
        msg = self._state_msg
        msg.header.stamp = stamp
        _point(msg.reference, reference.positions, reference.velocities,
               reference.accelerations)
        _point(msg.feedback, q, qd)
        _point(msg.error, reference.positions - q, reference.velocities - qd)
        _point(msg.output, effort=tau)
        msg.speed_scaling_factor = float(getattr(reference, 'speed_scaling_factor', 1.0))
        self._state_pub.publish(msg)

    # ------------------------------------------------------------------ results

    def _end(self, handle, code, text, canceled=False):
        """Record the outcome and schedule the execute callback, which returns it."""
        self._results[bytes(handle.goal_id.uuid)] = (code, text, canceled)
        if handle.status == GoalStatus.STATUS_ACCEPTED:
            handle.execute()                   # EXECUTING, then the callback runs
        else:
            self._server.notify_execute(handle, self._result_of)

    def _result_of(self, handle):
        """The execute callback: the terminal state and the result of a decided goal."""
        code, text, canceled = self._results.pop(bytes(handle.goal_id.uuid))
        if handle.is_active:
            if canceled and handle.is_cancel_requested:
                handle.canceled()
            elif code == SUCCESSFUL and not canceled:
                handle.succeed()
            else:
                handle.abort()
        return FollowJointTrajectory.Result(error_code=code, error_string=text)

    def _on_set_parameters(self, parameters):
        goal_time = self.goal_time
        for parameter in parameters:
            if parameter.name == 'constraints.goal_time':
                try:
                    goal_time = validated(self.node, parameter.name, parameter.value)
                except (ConfigurationError, TypeError, ValueError) as error:
                    return SetParametersResult(successful=False, reason=str(error))
        self.goal_time = goal_time
        return SetParametersResult(successful=True)
