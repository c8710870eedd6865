"""The computed-torque controller alone, for a real stack (ros2_control's
joint_state_broadcaster publishing /joint_states and an effort controller listening on
command_topic, default /effort_controller/commands).

    ros2 launch robot_dynamics controller.launch.py params_file:=/path/to/my_arm.yaml
    ros2 launch robot_dynamics controller.launch.py params_file:="my_arm.yaml;gains.yaml"

params_file may name several files (';'): later files win whatever section (`/**`,
`/**/name`, ...) a value is under (doc/parameters-layering.md). node_name:=... renames the
node; the files' sections for computed_torque_controller still apply to it.

With `robot.source: urdf` in the parameter file and neither robot.urdf_file nor a
robot_description parameter, the controller waits for the URDF on robot_description
(transient local, as robot_state_publisher serves it); robot_description_topic remaps it.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robot_dynamics.nodes.common import bringup

NODE_NAME = 'computed_torque_controller'


def controller_node(context):
    """The controller with one parameter file: the files of params_file layered for it,
    then use_sim_time."""
    def argument(configuration):
        return configuration.perform(context)
    namespace = argument(LaunchConfiguration('namespace'))
    name = argument(LaunchConfiguration('node_name')) or NODE_NAME
    files = bringup.params_file_list(argument(LaunchConfiguration('params_file')))
    use_sim_time = bringup.launch_flag(argument(LaunchConfiguration('use_sim_time')))
    topic = argument(LaunchConfiguration('robot_description_topic'))
    return [Node(package='robot_dynamics', executable='controller', name=name,
                 namespace=namespace, output='screen',
                 remappings=[('robot_description', topic)],
                 parameters=bringup.node_parameters(files, name, namespace, NODE_NAME,
                                                    {'use_sim_time': use_sim_time}))]


def generate_launch_description():
    config = os.path.join(get_package_share_directory('robot_dynamics'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument(
            'params_file', default_value=os.path.join(config, 'puma560.yaml'),
            description="parameter file(s): joints, the robot block, gains, command_topic; "
            "several separated by ';', later ones win"),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='use /clock (simulators)'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the controller'),
        DeclareLaunchArgument('node_name', default_value=NODE_NAME,
                              description='name of the controller node (the files\' '
                              f'sections for {NODE_NAME} apply to it)'),
        DeclareLaunchArgument(
            'robot_description_topic', default_value='robot_description',
            description='with robot.source urdf: where the URDF comes from (if the parameter '
            'file gives none)'),
        OpaqueFunction(function=controller_node),
    ])
