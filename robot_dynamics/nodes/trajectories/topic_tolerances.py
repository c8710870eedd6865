"""Path tolerance and goal_time on trajectories from the `~/joint_trajectory` topic, as
joint_trajectory_controller (JTC) enforces them without an action goal: the tolerances of
the last accepted FollowJointTrajectory goal, or before any goal the defaults
(`constraints.<joint>.trajectory` on the position while the trajectory runs;
`constraints.<joint>.goal` / `constraints.goal_tolerance` and
`constraints.stopped_velocity_tolerance` after its last point, with `constraints.goal_time`
to reach them). A violation holds the measured position, or with
`constraints.decelerate_on_cancel` decelerates to rest from the measured state, with one
warning line; nobody is told otherwise (there is no goal). Reaching the goal tolerance
ends the watch (cmd_timeout still applies, as in JTC). doc/trajectories.md, "Semantics".
"""

import numpy as np

from robot_dynamics.trajectories.goal import SUCCESSFUL, TrajectoryGoalMonitor


class TopicTrajectoryTolerances:
    """The watch over the controller `node`'s current topic trajectory."""

    def __init__(self, node):
        self.node = node
        self._monitor = None
        self._plan = None           # the sampler plan watched: another plan ends the watch

    def start(self, command, now):
        """A topic trajectory `command` was just accepted at controller time `now`."""
        node = self.node
        sampler = node.sampler
        self._monitor = self._plan = None
        if not command.points:
            return                                  # a stop
        action = node._action
        last = getattr(action, 'last_tolerances', None)
        if last is not None:                        # the last goal's, as JTC
            path, goal, goal_time = last
        else:
            constraints = node.joint_constraints
            path = constraints.path_defaults()
            goal = constraints.goal_defaults(node.goal_tolerance,
                                             node.stopped_velocity_tolerance)
            goal_time = getattr(action, 'goal_time', 0.0)
        checks_path = bool((path.position > 0.0).any() or (path.velocity > 0.0).any()
                           or (path.acceleration > 0.0).any())
        if not checks_path and not goal_time > 0.0:
            return                                  # nothing can be violated
        start = sampler.trajectory_start(command.start_time, now)
        end = start + command.points[-1].time_from_start
        continuous = getattr(sampler, 'continuous', None)   # wrapped errors, if the
        extra = () if continuous is None else (continuous,)  # sampler has continuous joints
        self._monitor = TrajectoryGoalMonitor(node.joints, sampler.goal_positions, start, end,
                                              path, goal, goal_time, *extra)
        self._plan = sampler.plan

    def after_cycle(self, t, reference, q, qd):
        monitor = self._monitor
        if monitor is None:
            return
        node = self.node
        sampler = node.sampler
        if sampler.plan is not self._plan:          # replaced, stopped or held since
            self._monitor = self._plan = None
            return
        state_time = None
        if monitor.acceleration is not None:
            state_time = t if node.control_mode == 'on_state' else node._received.max()
        outcome = monitor.check(sampler.trajectory_time(t), q, qd, reference, state_time)
        if outcome is None:
            return
        self._monitor = self._plan = None
        if outcome.code == SUCCESSFUL:
            return
        text = outcome.text
        if sampler.max_deceleration_on_cancel is None:
            sampler.hold(np.array(q, dtype=float), t)
        else:
            sampler.stop(t, np.array(q, dtype=float), np.array(qd, dtype=float))
            text = text.replace('holding the position',
                                'decelerating to rest from the measured state')
        node._goal_reached = None
        node.get_logger().warning(f'joint_trajectory: {text}')
