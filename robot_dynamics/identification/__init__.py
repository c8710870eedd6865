"""Identification: what the arm's own motion and efforts tell about its dynamics. Pure
numpy (+ scipy, cvxpy and rosbags, imported where used); no ROS.

Modules
-------
`payload` (the load the arm carries: `PayloadEstimator`, `exciting_trajectory`, ...),
`arm` (the whole arm: every link's inertial parameters, rotor inertia and friction;
`arm.identify_arm`, `arm.optimal_excitation`, ...), `recordings` (sensor_msgs/JointState
rosbag2 recordings: `read_joint_states`, `JointStateBagWriter`), `motion_limits` (joint
limits, workspace and floor an identification motion keeps: `first_violation`).

The payload API is importable from the package itself
(``from robot_dynamics.identification import PayloadEstimator``); the whole arm's from
`robot_dynamics.identification.arm`.
"""

from robot_dynamics.identification.payload import (  # noqa: F401 - the payload API
    ExcitationWarning, exciting_trajectory, identify_in_closed_loop, PARAMETER_NAMES,
    payload_from_parameters, payload_parameters, payload_regressor, PayloadEstimate,
    PayloadEstimator, physical_consistency, sampled_reference)

__all__ = ['payload_regressor', 'payload_parameters', 'payload_from_parameters',
           'physical_consistency', 'PayloadEstimator', 'PayloadEstimate',
           'exciting_trajectory', 'ExcitationWarning', 'sampled_reference',
           'identify_in_closed_loop', 'PARAMETER_NAMES']
