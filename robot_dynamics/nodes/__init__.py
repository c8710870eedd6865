"""The ROS 2 adapters: the executables' nodes, their parts, and the plumbing they share.

Thin glue around the core (the math lives in `robot_dynamics/*.py`, without rclpy): parse
parameters and messages, call `robot_dynamics.control` / `robot_dynamics.integration`, publish.

Layout:
- the executables, one module each (`python -m robot_dynamics.nodes.<name>`): `controller`
  (computed-torque controller), `managed_controller` (the same as a lifecycle node), `plant`
  (simulated arm), `sim` (plant, controller and demo move in one process), `send_trajectory`,
  `excite` and `identify` (clients of a running controller);
- `trajectories/`: the controller's joint_trajectory_controller-compatible interfaces
  (FollowJointTrajectory action, ~/query_state, per-joint constraints, speed scaling) and the
  clients' goal sender;
- `identification/`: the controller's payload-identification hook and the `identify`
  executable's recording and estimation parts;
- `common/`: what every node shares (parameter declaration and checking, parameter files,
  the runner with its signal handling, real-time options, /diagnostics, measurement noise,
  launch-file helpers, files written atomically).
"""
