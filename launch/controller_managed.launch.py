"""The managed computed-torque controller (`controller_managed`, a lifecycle node) alone,
for a real stack, brought up in order: configure once the process is up, activate once
configure has succeeded.

    ros2 launch robot_dynamics controller_managed.launch.py params_file:=/path/to/my_arm.yaml

With `autostart:=false` the node waits unconfigured and an operator (or a lifecycle
manager) brings it up:

    ros2 lifecycle set /computed_torque_controller configure
    ros2 lifecycle set /computed_torque_controller activate

`activate:=false` stops after configure (inactive: listening, commanding nothing). A
failed configure (a bad parameter; the log line names it) leaves the node unconfigured and
nothing is activated. Deactivating later does not re-activate it: the handler reacts to
configuring -> inactive only. States and the effort left on deactivate:
doc/lifecycle-and-diagnostics.md.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, RegisterEventHandler
from launch.conditions import IfCondition
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.parameter_descriptions import ParameterValue
from lifecycle_msgs.msg import Transition


def generate_launch_description():
    config = os.path.join(get_package_share_directory('robot_dynamics'), 'config')
    controller = LifecycleNode(
        package='robot_dynamics', executable='controller_managed',
        name='computed_torque_controller', namespace=LaunchConfiguration('namespace'),
        output='screen',
        remappings=[('robot_description', LaunchConfiguration('robot_description_topic'))],
        parameters=[LaunchConfiguration('params_file'), {'use_sim_time': ParameterValue(
            LaunchConfiguration('use_sim_time'), value_type=bool)}])
    configure = EmitEvent(
        event=ChangeState(lifecycle_node_matcher=matches_action(controller),
                          transition_id=Transition.TRANSITION_CONFIGURE),
        condition=IfCondition(LaunchConfiguration('autostart')))
    activate_when_configured = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=controller, start_state='configuring',
            goal_state='inactive',
            entities=[EmitEvent(event=ChangeState(
                lifecycle_node_matcher=matches_action(controller),
                transition_id=Transition.TRANSITION_ACTIVATE))]),
        condition=IfCondition(LaunchConfiguration('activate')))
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
        DeclareLaunchArgument('autostart', default_value='true',
                              description='configure the controller at start-up'),
        DeclareLaunchArgument('activate', default_value='true',
                              description='activate it once configured (false: stay '
                              'inactive until `ros2 lifecycle set ... activate`)'),
        activate_when_configured,
        controller,
        configure,
    ])
