"""The computed-torque controller driving an arm through ros2_control: controller_manager
(ros2_control_node) with joint_state_broadcaster and an
effort_controllers/JointGroupEffortController named effort_controller
(config/ros2_control_effort.yaml), robot_state_publisher with the robot's URDF and a
<ros2_control> block (effort command, position and velocity states per joint), and the
controller, which reads /joint_states and publishes on /effort_controller/commands.

    ros2 launch robot_dynamics ros2_control_effort.launch.py \
        [robot_params_file:=...] [controllers_file:=...] [hardware_plugin:=...]

By default the hardware is ros2_control's mock hardware (mock_components/GenericSystem),
which holds the arm where it starts: the effort path and its joint-order check can be
tried without an arm, nothing moves. For a real arm give its hardware plugin (or use your
own robot_description with its <ros2_control> block and start only the controller,
launch/controller.launch.py) and read doc/safety.md, "Under ros2_control", first: the
effort controller keeps applying the last effort when this controller stops, so the
hardware or its controller needs a command timeout. Needs ros2_control and
ros2_controllers (apt install ros-$ROS_DISTRO-ros2-control ros-$ROS_DISTRO-ros2-controllers
robot-state-publisher), none of which this package depends on otherwise. Rolling has no
effort_controllers: use a controllers file with
forward_command_controller/ForwardCommandController and `interface_name: effort`.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.common import bringup

CONTROLLERS = ('joint_state_broadcaster', 'effort_controller')


def nodes(context):
    robot_file = LaunchConfiguration('robot_params_file').perform(context)
    controllers_file = LaunchConfiguration('controllers_file').perform(context)
    model = RobotModel.from_yaml(robot_file)
    joints = joint_names(robot_file, model.n)
    description = bringup.ros2_control_description(
        bringup.robot_description(robot_file), joints, model.position_min,
        model.position_max, LaunchConfiguration('hardware_plugin').perform(context))
    return [
        Node(package='robot_state_publisher', executable='robot_state_publisher',
             name='robot_state_publisher', output='screen',
             parameters=[{'robot_description': description}]),
        # Humble reads robot_description as a parameter, later releases from the topic
        Node(package='controller_manager', executable='ros2_control_node',
             name='controller_manager', output='screen',
             parameters=[controllers_file, {'robot_description': description}],
             remappings=[('~/robot_description', '/robot_description')]),
    ] + [
        Node(package='controller_manager', executable='spawner', name=f'spawner_{name}',
             output='screen', arguments=[name, '--controller-manager', '/controller_manager'])
        for name in CONTROLLERS
    ] + [
        Node(package='robot_dynamics', executable='controller',
             name='computed_torque_controller', output='screen', parameters=[robot_file]),
    ]


def joint_names(params_file, n):
    """The `joints` of a robot parameter file (`/**` section)."""
    import yaml
    with open(params_file, encoding='utf-8') as stream:
        document = yaml.safe_load(stream)
    joints = ((document.get('/**') or {}).get('ros__parameters') or {}).get('joints')
    return list(joints) if joints else [f'joint_{i + 1}' for i in range(n)]


def generate_launch_description():
    config = os.path.join(get_package_share_directory('robot_dynamics'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument(
            'robot_params_file', default_value=os.path.join(config, 'puma560.yaml'),
            description='the robot (joints and robot block) for the controller and the URDF'),
        DeclareLaunchArgument(
            'controllers_file', default_value=os.path.join(config, 'ros2_control_effort.yaml'),
            description='controller_manager parameters: joint_state_broadcaster and '
            'effort_controller over the same joints, in the same order'),
        DeclareLaunchArgument(
            'hardware_plugin', default_value=bringup.MOCK_HARDWARE,
            description='the ros2_control hardware plugin of the arm'),
        OpaqueFunction(function=nodes),
    ])
