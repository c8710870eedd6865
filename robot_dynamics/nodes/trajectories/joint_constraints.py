"""The per-joint constraints of ros2_controllers' joint_trajectory_controller (JTC), in its
parameter form: `constraints.<joint>.trajectory` and `constraints.<joint>.goal` for each
controlled joint (doc/action.md, "Parameters").

- `constraints.<joint>.trajectory` [rad | m]: default path tolerance on the position of the
  joint while a FollowJointTrajectory goal runs; 0 (the default) = not checked.
- `constraints.<joint>.goal` [rad | m]: default goal tolerance on its position after the last
  point; 0 (the default) = the scalar `constraints.goal_tolerance` (which `~/goal_reached`
  uses too), so that a JTC parameter file works unchanged and the scalar stays the
  one-value default.

- `constraints.decelerate_on_cancel` (read-only, default false) with
  `constraints.<joint>.max_deceleration_on_cancel` [rad/s² | m/s²] (read-only, default 0):
  a cancel, a tolerance violation, cmd_timeout or an empty trajectory on the topic stops
  every joint at its own constant deceleration instead of holding at once; as in JTC, a
  joint with 0 turns the feature off (one error line names it).

A goal's own `path_tolerance` / `goal_tolerance` entries override these per joint (> 0 sets,
0 keeps, -1 erases: trajectory_goal.resolve_tolerance). Live-tunable: a goal takes the values
in force when it is accepted. Negative values are refused (at start-up: one error line naming
the parameter; `ros2 param set`: the reason names it).
"""

import numpy as np
from rcl_interfaces.msg import SetParametersResult

from robot_dynamics.nodes.common.ros_params import ConfigurationError, declare, validated
from robot_dynamics.trajectories.goal import StateTolerances

KINDS = ('trajectory', 'goal')      # constraints.<joint>.<kind> (the parameter table's)


def parameter_name(joint, kind):
    return f'constraints.{joint}.{kind}'


class JointConstraints:
    """The `constraints.<joint>.*` parameters of a controller node, declared for `joints`;
    `trajectory` and `goal` hold their values (n,) in `joints` order."""

    def __init__(self, node, joints):
        self._node = node
        self.joints = tuple(joints)
        values = {kind: np.zeros(len(self.joints)) for kind in KINDS}
        self._slots = {}        # parameter name -> (kind, joint index)
        for i, joint in enumerate(self.joints):
            for kind in KINDS:
                name = parameter_name(joint, kind)
                self._slots[name] = (kind, i)
                values[kind][i] = validated(node, name, declare(node, name))
        self.trajectory, self.goal = values['trajectory'], values['goal']
        self.max_deceleration_on_cancel = self._declare_deceleration(node)
        node.add_on_set_parameters_callback(self._on_set_parameters)

    def _declare_deceleration(self, node):
        """max_deceleration_on_cancel (n,) when constraints.decelerate_on_cancel is on and
        every joint has one > 0, else None (hold at once)."""
        enabled = validated(node, 'constraints.decelerate_on_cancel',
                            declare(node, 'constraints.decelerate_on_cancel'))
        decel = np.zeros(len(self.joints))
        for i, joint in enumerate(self.joints):
            name = parameter_name(joint, 'max_deceleration_on_cancel')
            decel[i] = validated(node, name, declare(node, name))
        if not enabled:
            return None
        for i, joint in enumerate(self.joints):
            if not decel[i] > 0.0:
                node.get_logger().error(
                    f'{parameter_name(joint, "max_deceleration_on_cancel")}: {decel[i]:g} is '
                    'not > 0; constraints.decelerate_on_cancel is off (holding at once)')
                return None
        return decel

    def goal_position(self, goal_tolerance):
        """The goal position tolerance: `constraints.<joint>.goal` where > 0, else the scalar
        `goal_tolerance`; that float itself when no joint has its own (the fast path of
        JointTrajectorySampler.at_goal)."""
        goal = self.goal
        if not (goal > 0.0).any():
            return goal_tolerance
        return np.where(goal > 0.0, goal, goal_tolerance)

    def path_defaults(self):
        """Default path tolerances of a goal (position only, as JTC)."""
        n = len(self.joints)
        return StateTolerances(self.trajectory.copy(), np.zeros(n), np.zeros(n))

    def goal_defaults(self, goal_tolerance, stopped_velocity_tolerance):
        """Default goal tolerances of a goal: positions as `goal_position`, velocities
        `stopped_velocity_tolerance` for every joint (as JTC)."""
        n = len(self.joints)
        return StateTolerances(np.broadcast_to(self.goal_position(goal_tolerance), n).copy(),
                               np.full(n, float(stopped_velocity_tolerance)), np.zeros(n))

    def _on_set_parameters(self, parameters):
        """All or none: a new array per kind, swapped in whole (the control cycle and the
        action's goal callback read them without a lock)."""
        values = {'trajectory': self.trajectory.copy(), 'goal': self.goal.copy()}
        changed = False
        for parameter in parameters:
            slot = self._slots.get(parameter.name)
            if slot is None:
                continue
            try:
                value = validated(self._node, parameter.name, parameter.value)
            except (ConfigurationError, TypeError, ValueError) as error:
                return SetParametersResult(successful=False, reason=str(error))
            kind, i = slot
            values[kind][i] = value
            changed = True
        if changed:
            self.trajectory, self.goal = values['trajectory'], values['goal']
        return SetParametersResult(successful=True)
