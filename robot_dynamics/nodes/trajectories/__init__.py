"""The controller's joint_trajectory_controller-compatible interfaces: the
FollowJointTrajectory action (`follow_joint_trajectory`), ~/query_state (`query_state`),
per-joint constraints (`joint_constraints`), speed scaling (`speed_scaling`); and the goal
sender the client executables use (`goal_sender`)."""
