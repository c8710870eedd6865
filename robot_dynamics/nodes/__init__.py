"""The ROS 2 adapters: controller and plant nodes, the one-process `sim` entry point.

Thin glue around the core (the math lives in `robot_dynamics/*.py`, without rclpy): parse
parameters and messages, call `robot_dynamics.control` / `robot_dynamics.integration`, publish.
"""
