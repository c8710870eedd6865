"""The computed-torque controller alone, for a real stack (ros2_control's
joint_state_broadcaster publishing /joint_states and an effort controller listening on
command_topic, default /effort_controller/commands).

    ros2 launch robot_dynamics controller.launch.py params_file:=/path/to/my_arm.yaml
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
        Node(package='robot_dynamics', executable='controller',
             name='computed_torque_controller', namespace=LaunchConfiguration('namespace'),
             output='screen',
             parameters=[LaunchConfiguration('params_file'), {'use_sim_time': ParameterValue(
                 LaunchConfiguration('use_sim_time'), value_type=bool)}]),
    ])
