"""The computed-torque controller alone, for a real stack (ros2_control's
joint_state_broadcaster publishing /joint_states and an effort controller listening on
command_topic, default /effort_controller/commands).

    ros2 launch robot_dynamics controller.launch.py params_file:=/path/to/my_arm.yaml

With `robot.source: urdf` in the parameter file and neither robot.urdf_file nor a
robot_description parameter, the controller waits for the URDF on robot_description
(transient local, as robot_state_publisher serves it); robot_description_topic remaps it.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    config = os.path.join(get_package_share_directory('robot_dynamics'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument(
            'params_file', default_value=os.path.join(config, 'puma560.yaml'),
            description='parameter file: joints, the robot block, gains, command_topic'),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='use /clock (simulators)'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the controller'),
        DeclareLaunchArgument(
            'robot_description_topic', default_value='robot_description',
            description='with robot.source urdf: where the URDF comes from (if the parameter '
            'file gives none)'),
        Node(package='robot_dynamics', executable='controller',
             name='computed_torque_controller', namespace=LaunchConfiguration('namespace'),
             output='screen',
             remappings=[('robot_description', LaunchConfiguration('robot_description_topic'))],
             parameters=[LaunchConfiguration('params_file'), {'use_sim_time': ParameterValue(
                 LaunchConfiguration('use_sim_time'), value_type=bool)}]),
    ])
