"""robot_description_publisher: serves the URDF of parameter `robot_description` on the
`robot_description` topic (std_msgs/String, reliable, transient local: every later
subscriber gets it), as robot_state_publisher serves it, without computing TF.

launch/ros2_control_sim.launch.py starts it where robot_state_publisher is not installed:
controller_manager takes the robot (with its <ros2_control> block) only from that topic.

    ros2 run robot_dynamics robot_description --ros-args -p robot_description:="$(cat arm.urdf)"
"""

import sys

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from robot_dynamics.nodes.common.ros_params import as_string, ConfigurationError, declare
from robot_dynamics.nodes.common.runner import run

NODE_NAME = 'robot_description_publisher'


class RobotDescriptionPublisher(Node):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        try:
            text = as_string('robot_description', declare(
                self, 'robot_description', '', 'URDF text (XML) to serve on the '
                'robot_description topic (transient local)', read_only=True))
        except ConfigurationError:
            self.destroy_node()
            raise
        if '<robot' not in text:
            self.destroy_node()
            raise ConfigurationError('robot_description: not a URDF (no <robot> element)')
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._publisher = self.create_publisher(String, 'robot_description', qos)
        self._publisher.publish(String(data=text))
        self.get_logger().info(f'serving the URDF ({len(text)} characters) on '
                               f'{self._publisher.topic_name}')


def main(args=None):
    """Entry point `robot_description`."""
    return run(RobotDescriptionPublisher, NODE_NAME, args)


if __name__ == '__main__':
    sys.exit(main())
