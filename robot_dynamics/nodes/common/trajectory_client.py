"""The trajectory clients of the executables (`send_trajectory`, `sim`, `identify excite`,
`identify plan --send`): the trajectory_msgs/JointTrajectory of a core TrajectoryCommand,
and the control_msgs/action/FollowJointTrajectory client: find the controller (action
server or topic), send a move as a goal, report its outcome (doc/action.md).

A controller with the action answers every goal: a refused goal ends at once with its
error code and reason and no feedback, an accepted one gets a first feedback at once. So
the sender waits for the first feedback (the goal runs) or the result, whichever comes
first, even with --no-wait; a result without any feedback is a refusal.
"""

import time

from builtin_interfaces.msg import Duration as DurationMsg
import rclpy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics.nodes.common.outputs import duration_fields

try:
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTolerance
    from rclpy.action import ActionClient
    UNAVAILABLE = None
except ImportError as error:
    FollowJointTrajectory = None
    UNAVAILABLE = f'control_msgs cannot be imported: {error}'

ACTION_NAME = 'follow_joint_trajectory'
DISCOVERY_GRACE = 1.0   # s: after the topic's subscriber matched, wait this long for the
#                         action server of the same controller before using the topic
SERVER_GRACE = 0.5      # s: once we see the server, let it see us too (DDS drops a service
#                         response to a client whose reply reader it has not discovered yet)
REFUSED = 3             # exit status: the goal was refused (INVALID_*, OLD_HEADER_TIMESTAMP)
FAILED = 4              # exit status: it ran but did not succeed
STOPPED = 130
CANCEL_WAIT = 2.0       # s to wait for the cancel response after Ctrl-C
REFUSAL_CODES = (-1, -2, -3)     # INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP
NOT_ENDED = 1           # exit status: no response, no server


def duration_message(seconds):
    """builtin_interfaces/Duration of `seconds`."""
    return DurationMsg(**duration_fields(seconds))


def trajectory_message(command):
    """trajectory_msgs/JointTrajectory from a core TrajectoryCommand (stamp 0 = start now)."""
    msg = JointTrajectory()
    msg.joint_names = list(command.joint_names)
    msg.points = [JointTrajectoryPoint(positions=list(p.positions),
                                       velocities=list(p.velocities),
                                       accelerations=list(p.accelerations),
                                       time_from_start=duration_message(p.time_from_start))
                  for p in command.points]
    return msg


def goal_ending_with_the_motion(trajectory):
    """The FollowJointTrajectory goal of `trajectory` with its goal tolerances on position
    and velocity not checked (-1), so that the goal succeeds once the last point's time has
    passed (the motion has ended) even where the controller's model leaves an offset at
    rest; the controller's path tolerances still apply."""
    goal = FollowJointTrajectory.Goal(trajectory=trajectory)
    goal.goal_tolerance = [JointTolerance(name=name, position=-1.0, velocity=-1.0)
                           for name in trajectory.joint_names]
    return goal


def find_controller(client, publisher, timeout, running, spin):
    """'action' once the action server of `client` (None: no action) is there and has had
    time to see us (SERVER_GRACE), 'topic' when only the trajectory topic of `publisher`
    has a subscriber (DISCOVERY_GRACE after it matched), None after `timeout` s or when
    not running(); spin() between the looks."""
    deadline = time.monotonic() + timeout
    topic_seen = server_seen = None
    while time.monotonic() < deadline and running():
        if client is not None and client.server_is_ready():
            server_seen = server_seen or time.monotonic()
            if time.monotonic() - server_seen >= SERVER_GRACE:
                return 'action'
        if publisher.get_subscription_count() > 0:
            topic_seen = topic_seen or time.monotonic()
            if client is None or time.monotonic() - topic_seen >= DISCOVERY_GRACE:
                return 'topic'
        spin()
    return None


def find_server(client, timeout, running, spin):
    """True once the action server of `client` is there and has had time to see us
    (SERVER_GRACE), spinning with spin(); False after `timeout` s or when not running()."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline and running():
        if client.server_is_ready():
            seen = seen or time.monotonic()
            if time.monotonic() - seen >= SERVER_GRACE:
                return True
        spin()
    return False


def follow(client, action_name, goal, timeout, spin_until, running, log):
    """Send `goal` and wait for the end of the motion; the exit status (0 succeeded,
    NOT_ENDED no response within `timeout` s, REFUSED, FAILED (aborted, canceled), STOPPED:
    canceled on a stop request, the arm holds). spin_until(done, timeout=None) spins the
    client's node until done() (False on a stop request or after the timeout); the outcome
    in one line on `log`."""
    feedback = []
    sent = client.send_goal_async(
        goal, feedback_callback=lambda message: feedback.append(True) if not feedback else None)
    if not spin_until(sent.done, timeout):
        if not running():
            return STOPPED
        log.error(f'no response to the goal from {action_name} within {timeout:g} s')
        return NOT_ENDED
    handle = sent.result()
    if not handle.accepted:
        log.error(f'goal rejected by {action_name} (no reason given)')
        return REFUSED
    result = handle.get_result_async()
    if not spin_until(result.done):
        canceling = handle.cancel_goal_async()
        spin_until(canceling.done, CANCEL_WAIT)
        log.warning('stopped: the goal was canceled (the arm holds)')
        return STOPPED
    response = result.result()
    code, text = response.result.error_code, response.result.error_string
    if code in REFUSAL_CODES and not feedback:
        log.error(f'goal refused by {action_name}: {code_name(code)}: {text}')
        return REFUSED
    if response.status == GoalStatus.STATUS_SUCCEEDED and code == 0:
        log.info(f'goal succeeded: the motion ended ({code_name(code)})')
        return 0
    status = {GoalStatus.STATUS_ABORTED: 'aborted',
              GoalStatus.STATUS_CANCELED: 'canceled'}.get(
                  response.status, f'ended with status {response.status}')
    log.error(f'goal {status}: {code_name(code)}: {text}')
    return FAILED


def action_beside(topic):
    """The action of the controller whose trajectory topic is `topic`."""
    return topic.rsplit('/', 1)[0] + '/' + ACTION_NAME if '/' in topic else ACTION_NAME


def code_name(code):
    """'GOAL_TOLERANCE_VIOLATED (-5)' for a result code."""
    names = {getattr(FollowJointTrajectory.Result, name): name for name in (
        'SUCCESSFUL', 'INVALID_GOAL', 'INVALID_JOINTS', 'OLD_HEADER_TIMESTAMP',
        'PATH_TOLERANCE_VIOLATED', 'GOAL_TOLERANCE_VIOLATED')}
    return f'{names.get(code, "unknown code")} ({code})'


class GoalSender:
    """The FollowJointTrajectory client of send_trajectory's TrajectorySender node."""

    def __init__(self, node, action_name):
        self.node = node
        self.action_name = action_name
        self.unavailable = UNAVAILABLE
        self.client = (None if UNAVAILABLE is not None
                       else ActionClient(node, FollowJointTrajectory, action_name))
        self.feedback = []

    def find_controller(self, publisher, timeout, running):
        """'action' once the action server is there, 'topic' when only the topic has a
        subscriber (DISCOVERY_GRACE after it matched), None after `timeout` or a stop."""
        return find_controller(self.client, publisher, timeout, running,
                               lambda: rclpy.spin_once(self.node, timeout_sec=0.05))

    def _spin_until(self, done, timeout=None):
        """Spin until done(); False on a stop request or after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            if not self.node.running() or (deadline is not None
                                           and time.monotonic() > deadline):
                return False
            rclpy.spin_once(self.node, timeout_sec=0.05)
        return True

    def run_goal(self, trajectory, move, timeout, no_wait, goal_tolerance=None):
        """Send the goal (with `goal_tolerance`, control_msgs/JointTolerance per joint,
        when given) and report; returns the exit status."""
        logger = self.node.get_logger()
        goal = FollowJointTrajectory.Goal(trajectory=trajectory)
        if goal_tolerance is not None:
            goal.goal_tolerance = list(goal_tolerance)
        sent = self.client.send_goal_async(goal, feedback_callback=self.feedback.append)
        if not self._spin_until(sent.done, timeout):
            if not self.node.running():
                return STOPPED
            logger.error(f'no response to the goal from {self.action_name} within {timeout} s')
            return 1
        handle = sent.result()
        if not handle.accepted:
            logger.error(f'goal rejected by {self.action_name} (no reason given)')
            return REFUSED
        result = handle.get_result_async()
        waiting = (lambda: result.done() or self.feedback) if no_wait else result.done
        if not self._spin_until(waiting):
            return self._cancel(handle)
        if not result.done():
            logger.info(f'goal accepted and running: {move} on {self.action_name}')
            return 0
        return self._report(result.result(), trajectory, move)

    def _cancel(self, handle):
        """Ctrl-C while the goal runs: cancel it (the arm holds), exit 130."""
        logger = self.node.get_logger()
        canceling = handle.cancel_goal_async()
        deadline = time.monotonic() + CANCEL_WAIT
        while not canceling.done() and time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        logger.warning('stopped: goal cancel ' + ('requested' if canceling.done()
                                                  else 'request not answered'))
        return STOPPED

    def _report(self, response, trajectory, move):
        logger = self.node.get_logger()
        code, text = response.result.error_code, response.result.error_string
        if code in REFUSAL_CODES and not self.feedback:
            logger.error(f'goal refused by {self.action_name}: {code_name(code)}: {text}')
            return REFUSED
        errors = self._final_errors(trajectory)
        status = {GoalStatus.STATUS_SUCCEEDED: 'succeeded', GoalStatus.STATUS_ABORTED:
                  'aborted', GoalStatus.STATUS_CANCELED: 'canceled'}.get(
                      response.status, f'status {response.status}')
        line = f'goal {status}: {code_name(code)}: {text}; {errors}'
        if response.status == GoalStatus.STATUS_SUCCEEDED and code == 0:
            logger.info(f'{move}: {line}')
            return 0
        logger.error(f'{move}: {line}')
        return FAILED

    def _final_errors(self, trajectory):
        """'final error per joint (goal - measured): {...}' from /joint_states now, or from
        the last feedback if there are none."""
        names = list(trajectory.joint_names)
        goal = trajectory.points[-1].positions
        self.node.latest.clear()
        found = self.node.current_positions(names, len(names), 1.0)
        source = 'measured'
        if found is None and self.feedback:
            last = self.feedback[-1].feedback
            measured = dict(zip(last.joint_names, last.actual.positions))
            found = names, [measured.get(n, float('nan')) for n in names]
            source = 'last feedback'
        if found is None:
            return 'final error unknown (no /joint_states, no feedback)'
        errors = {n: float(f'{g - q:.3g}') for n, g, q in zip(names, goal, found[1])}
        return f'final error per joint (goal - {source}) [rad|m]: {errors}'
