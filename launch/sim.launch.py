"""Closed-loop simulation: plant_simulator + computed_torque_controller + the demo move, with
robot_state_publisher (and RViz on request) when those packages are installed.

    ros2 launch robot_dynamics sim.launch.py [robot_params_file:=...] [sim_params_file:=...]
                                             [use_sim_time:=true] [namespace:=arm1]
                                             [plant_name:=...] [controller_name:=...]
                                             [rviz:=true] [rviz_config:=...]
                                             [realtime_priority:=80]
                                             [realtime_cpu_affinity:=1]
                                             [realtime_lock_memory:=true]

Any arm runs (robot_params_file:=.../panda.yaml, a URDF robot file, ...). The demo move
is a quintic rest-to-rest profile over move_duration (2 s in config/sim.yaml), sent once
the controller holds its start position: on the PUMA 560 [LEE] §5's (90, 0, 90, 0, 0, 0)
deg -> (45, 30, 0, 45, 60, 90) deg (config/sim_puma560.yaml, the preset's own demo file),
on other arms one derived from the robot file's joint count and limits
(robot_dynamics.nodes.common.demo_plan). With use_sim_time:=true (default) the plant
publishes /clock and runs in lock-step with the controller; with false both run on the
wall clock. robot_state_publisher gets the URDF of the robot file (generated from the DH
model, joints named by its `joints`; or the file's own URDF with robot.source urdf) and
turns /joint_states into TF; RViz shows it with config/sim.rviz. A missing package is
skipped with an info line. sim_params_file may name several files (';'), layered after
the robot file, the demo move derived from it and the robot's own demo file
(sim_<name>.yaml beside it): later files win for each node whatever section (`/**`,
`/**/name`, ...) a value is under (doc/parameters-layering.md); the realtime_* arguments
set the plant's and the controller's real-time options (doc/realtime.md) over the files
when given. plant_name:=... and controller_name:=... rename the nodes; the files' sections
for plant_simulator and computed_torque_controller still apply to them. When the plant
stops (Ctrl-C, or refused at start, e.g. on a ROS domain another simulation uses), the
launch stops the controller and the demo move too.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from robot_dynamics.nodes.common import bringup, demo_plan


def visual_nodes(context, installed=bringup.package_installed):
    """robot_state_publisher and RViz, or an info line for each that is not installed."""
    rviz = bringup.launch_flag(LaunchConfiguration('rviz').perform(context))
    start, skipped = bringup.visual_plan(rviz, installed)
    actions = [LogInfo(msg=line) for line in skipped]
    namespace = LaunchConfiguration('namespace').perform(context)
    sim_time = {'use_sim_time': bringup.launch_flag(
        LaunchConfiguration('use_sim_time').perform(context))}
    if bringup.ROBOT_STATE_PUBLISHER in start:
        actions.append(robot_state_publisher(context, namespace, sim_time))
    if bringup.RVIZ in start:
        actions.append(Node(
            package='rviz2', executable='rviz2', name='rviz2', namespace=namespace,
            output='screen', arguments=['-d', LaunchConfiguration('rviz_config').perform(context)],
            parameters=[sim_time]))
    return actions


def robot_state_publisher(context, namespace, sim_time):
    """The node with the robot file's URDF, or an info line if the file has none."""
    try:
        description = bringup.robot_description(
            LaunchConfiguration('robot_params_file').perform(context))
    except (OSError, ValueError) as error:
        return LogInfo(msg=f'robot_state_publisher not started: {error}')
    return Node(
        package='robot_state_publisher', executable='robot_state_publisher',
        name='robot_state_publisher', namespace=namespace, output='screen',
        parameters=[{'robot_description': ParameterValue(description, value_type=str)},
                    sim_time])


def demo_files(robot_file):
    """The demo move derived from the robot file (a file in the temporary folder, named by
    its content) and the robot's own demo file (sim_<name>.yaml beside it), those that
    exist."""
    derived = demo_plan.write_derived_parameters(robot_file, shared=True)
    return [path for path in (derived, demo_plan.robot_demo_file(robot_file)) if path]


PLANT, CONTROLLER, DEMO = 'plant_simulator', 'computed_torque_controller', 'demo_move'
PLANT_STOPPED = ('the plant stopped: the controller and the demo move stop with it (e.g. '
                 'refused on a ROS domain another simulation uses, they would drive its arm)')


def loop_nodes(context):
    """The plant, the controller and the demo move, each with one parameter file: the
    robot file, then each file of sim_params_file (';'-separated), layered for that node
    (later files win whatever section a value is under; the files' sections for the
    usual names apply to plant_name/controller_name), then the launch arguments' values
    (use_sim_time, publish_clock, the realtime_* given, the demo's controller). After
    the robot file: the demo move derived from it and the robot's own demo file."""
    def argument(configuration):
        return configuration.perform(context)
    namespace = argument(LaunchConfiguration('namespace'))
    use_sim_time = bringup.launch_flag(argument(LaunchConfiguration('use_sim_time')))
    robot_file = argument(LaunchConfiguration('robot_params_file'))
    files = [robot_file] + demo_files(robot_file) + \
        bringup.params_file_list(argument(LaunchConfiguration('sim_params_file')))
    realtime = bringup.realtime_launch_parameters(argument, LaunchConfiguration)
    plant = argument(LaunchConfiguration('plant_name')) or PLANT
    controller = argument(LaunchConfiguration('controller_name')) or CONTROLLER

    def parameters(name, default_name, overrides):
        return bringup.node_parameters(files, name, namespace, default_name, overrides)
    return [
        Node(package='robot_dynamics', executable='plant', name=plant, namespace=namespace,
             output='screen', parameters=parameters(
                 plant, PLANT, {'publish_clock': use_sim_time, **realtime}),
             on_exit=[Shutdown(reason=PLANT_STOPPED)]),
        Node(package='robot_dynamics', executable='controller', name=controller,
             namespace=namespace, output='screen', parameters=parameters(
                 controller, CONTROLLER, {'use_sim_time': use_sim_time, **realtime})),
        Node(package='robot_dynamics', executable='demo_move', name=DEMO,
             namespace=namespace, output='screen', parameters=parameters(
                 DEMO, DEMO, {'use_sim_time': use_sim_time, 'controller': controller})),
    ]


def generate_launch_description():
    config = os.path.join(get_package_share_directory('robot_dynamics'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument(
            'robot_params_file', default_value=os.path.join(config, 'puma560.yaml'),
            description='robot parameter file: joints and the robot block'),
        DeclareLaunchArgument(
            'sim_params_file', default_value=os.path.join(config, 'sim.yaml'),
            description="node settings of the simulation (loaded after the robot file); "
            "several separated by ';', later ones win"),
        *bringup.declare_realtime_arguments(DeclareLaunchArgument, 'plant and controller'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='true',
            description='true: the plant publishes /clock and runs in lock-step'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of all nodes'),
        DeclareLaunchArgument('plant_name', default_value=PLANT,
                              description='name of the plant node (the files\' sections '
                              f'for {PLANT} apply to it)'),
        DeclareLaunchArgument('controller_name', default_value=CONTROLLER,
                              description='name of the controller node (the files\' '
                              f'sections for {CONTROLLER} apply to it)'),
        DeclareLaunchArgument(
            'rviz', default_value='false',
            description='true: start RViz (if rviz2 is installed) with rviz_config'),
        DeclareLaunchArgument(
            'rviz_config', default_value=os.path.join(config, 'sim.rviz'),
            description='RViz configuration (RobotModel + TF, fixed frame base_link)'),
        OpaqueFunction(function=loop_nodes),
        OpaqueFunction(function=visual_nodes),
    ])
