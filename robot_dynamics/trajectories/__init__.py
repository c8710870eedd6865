"""Joint trajectories, pure numpy: the spline maths (`splines`), the joint_trajectory_controller
sampler and its message types (`sampler`), FollowJointTrajectory goal checks (`goal`), speed
scaling (`speed_scaling`), the torque feasibility check (`feasibility`), test profiles
(`profiles`) and the motion limits of excitation trajectories (`motion_limits`).

The submodules are imported where used; importing the package alone loads none of them.
"""
