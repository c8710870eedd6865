"""The controller's joint_trajectory_controller-compatible interfaces: the
FollowJointTrajectory action (`follow_joint_trajectory`), ~/query_state (`query_state`),
per-joint constraints (`joint_constraints`), speed scaling (`speed_scaling`). The client
executables' side is robot_dynamics.nodes.common.trajectory_client (its old name
``robot_dynamics.nodes.trajectories.goal_sender`` is that module itself)."""

import sys

from robot_dynamics.nodes.common import trajectory_client

sys.modules[f'{__name__}.goal_sender'] = trajectory_client
