"""The managed computed-torque controller (`controller_managed`, a lifecycle node) alone,
for a real stack, brought up in order: configure once the process is up, activate once
configure has succeeded.

    ros2 launch robot_dynamics controller_managed.launch.py params_file:=/path/to/my_arm.yaml

Parameter files layer: `params_file` (the arm: joints, robot block) first, then each file
of `settings_params_file` (e.g. gains, realtime.*; several separated by ';'; params_file
may name several too), later ones winning whatever section (`/**`, `/**/name`, ...) a
value is under (doc/parameters-layering.md); `realtime_priority`, `realtime_cpu_affinity`
and `realtime_lock_memory` set the real-time options (doc/realtime.md) over all of them
when given. node_name:=... renames the node (then `ros2 lifecycle set /<node_name> ...`);
the files' sections for computed_torque_controller still apply to it.

With `autostart:=false` the launch file requests no transition: the node waits
unconfigured and an operator (or a lifecycle manager) brings it up:

    ros2 lifecycle set /computed_torque_controller configure
    ros2 lifecycle set /computed_torque_controller activate

`activate:=false` (with autostart) stops after configure (inactive: listening,
commanding nothing). A failed configure (a bad parameter; the log line names it) leaves
the node unconfigured and nothing is activated. Deactivating later does not re-activate
it: the handler reacts to configuring -> inactive only, and exists only when the launch
file itself configures. States and the effort left on deactivate:
doc/lifecycle-and-diagnostics.md.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition

from robot_dynamics.nodes.common import bringup

NODE_NAME = 'computed_torque_controller'


def controller_actions(context):
    """The node with its layered parameter files, and the transitions
    `bringup.lifecycle_plan` asks for (none with autostart:=false)."""
    def argument(name):
        return name.perform(context)
    plan = bringup.lifecycle_plan(argument(LaunchConfiguration('autostart')),
                                  argument(LaunchConfiguration('activate')))
    namespace = argument(LaunchConfiguration('namespace'))
    name = argument(LaunchConfiguration('node_name')) or NODE_NAME
    files = bringup.params_file_list(argument(LaunchConfiguration('params_file')))
    files += bringup.params_file_list(argument(LaunchConfiguration('settings_params_file')))
    overrides = {'use_sim_time': bringup.launch_flag(
        argument(LaunchConfiguration('use_sim_time')))}
    overrides.update(bringup.realtime_launch_parameters(argument, LaunchConfiguration))
    parameters = bringup.node_parameters(files, name, namespace, NODE_NAME, overrides)
    controller = LifecycleNode(
        package='robot_dynamics', executable='controller_managed', name=name,
        namespace=namespace, output='screen',
        remappings=[('robot_description',
                     argument(LaunchConfiguration('robot_description_topic')))],
        parameters=parameters)
    actions = []
    if 'activate' in plan:
        actions.append(RegisterEventHandler(OnStateTransition(
            target_lifecycle_node=controller, start_state='configuring',
            goal_state='inactive',
            entities=[EmitEvent(event=ChangeState(
                lifecycle_node_matcher=matches_action(controller),
                transition_id=Transition.TRANSITION_ACTIVATE))])))
    actions.append(controller)
    if 'configure' in plan:
        actions.append(EmitEvent(event=ChangeState(
            lifecycle_node_matcher=matches_action(controller),
            transition_id=Transition.TRANSITION_CONFIGURE)))
    return actions


def generate_launch_description():
    config = os.path.join(get_package_share_directory('robot_dynamics'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument(
            'params_file', default_value=os.path.join(config, 'puma560.yaml'),
            description="parameter file(s): joints, the robot block, gains, command_topic; "
            "several separated by ';', later ones win"),
        DeclareLaunchArgument(
            'settings_params_file', default_value='',
            description="more parameter files, loaded after params_file (later ones win), "
            "separated by ';': e.g. gains, realtime.*; empty: none"),
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
        DeclareLaunchArgument('autostart', default_value='true',
                              description='configure the controller at start-up (false: '
                              'no transition at all; `ros2 lifecycle set ... configure`, '
                              'then `activate`)'),
        DeclareLaunchArgument('activate', default_value='true',
                              description='with autostart: activate it once configured '
                              '(false: stay inactive until `ros2 lifecycle set ... '
                              'activate`)'),
        *bringup.declare_realtime_arguments(DeclareLaunchArgument),
        OpaqueFunction(function=controller_actions),
    ])
