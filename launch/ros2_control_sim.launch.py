"""The simulated arm behind a real ros2_control stack: plant_simulator as the hardware of
controller_manager through topic_based_ros2_control, and the computed-torque controller
driving it through joint_state_broadcaster and an effort_controllers/
JointGroupEffortController, then the demo move.

    ros2 launch robot_dynamics ros2_control_sim.launch.py [robot_params_file:=...]
        [sim_params_file:=...] [update_rate:=1000] [demo:=true]
        [realtime_priority:=80] [realtime_cpu_affinity:=1] [realtime_lock_memory:=true]

Started: robot_state_publisher with the robot's URDF and a <ros2_control> block
(topic_based_ros2_control/TopicBasedSystem; per joint an effort command interface and
position, velocity and effort state interfaces; one joint more, hung on the root link, whose
position carries the time each state was measured: the plant's and the controller's
`stamp_joint`; robot_dynamics.nodes.common.ros2_control_sim), or, where
robot_state_publisher is not installed, this package's robot_description publisher
(controller_manager reads the robot from the /robot_description topic); controller_manager
(ros2_control_node) at update_rate with joint_state_broadcaster and effort_controller
spawned over the robot's joints; the plant, free-running on the wall clock at 1 kHz, taking
sensor_msgs/JointState commands (command_message: joint_state) on the plugin's
joint_commands_topic and publishing its state on the plugin's joint_states_topic; the
controller (on_state: one cycle per /joint_states of the broadcaster; command_topic
/effort_controller/commands); the demo move, once the plant has its first effort command
(demo:=false: none). Any arm: a DH preset's URDF is generated from the model, joints named
by `joints`; a URDF robot file's own URDF is used. Files as in sim.launch.py: the robot
file, the derived demo move, the robot's own demo file (config/sim_<name>.yaml), then
sim_params_file (default config/ros2_control_sim.yaml; several separated by ';'). The
realtime_* arguments set the plant's and the controller's real-time options
(doc/realtime.md) over the files; with a priority set (there or in the files),
controller_manager's every thread runs 10 below it (`chrt -f`; its executor takes the
controller's efforts: without it the loop tracked worse), then its update loop sets its own
SCHED_FIFO 50 (`thread_priority`); where the system refuses SCHED_FIFO, it runs without
(one line says so). Without a priority, its update loop alone takes 50 where it may.

Needs ros2_control, ros2_controllers (effort_controllers, joint_state_broadcaster) and
topic_based_ros2_control (apt install ros-$ROS_DISTRO-ros2-control
ros-$ROS_DISTRO-ros2-controllers ros-$ROS_DISTRO-topic-based-ros2-control), none of which
this package depends on otherwise. When the plant stops, the launch stops.
"""

import os
import warnings

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, LogInfo, OpaqueFunction,
                            RegisterEventHandler, Shutdown)
from launch.event_handlers import OnProcessIO
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from robot_dynamics.nodes.common import bringup, demo_plan, ros2_control_sim
from robot_dynamics.parameters.layering import layered_parameters

PLANT, CONTROLLER, DEMO = 'plant_simulator', 'computed_torque_controller', 'demo_move'
RELEASED = b'brakes released'   # the plant's line when the first effort command arrives


def when_released(actions):
    """An OnProcessIO callback: `actions` once, at the plant's first 'brakes released'
    line (its log goes to stderr; stdout too, for a console configured so)."""
    started = []

    def on_output(event):
        if started or RELEASED not in event.text:
            return None
        started.append(True)
        return actions
    return on_output


def loop_files(robot_file, sim_files):
    """The robot file, the demo move derived from it and the robot's own demo file, then
    the node settings."""
    derived = demo_plan.write_derived_parameters(robot_file, shared=True)
    return [robot_file] + [path for path in (derived, demo_plan.robot_demo_file(robot_file))
                           if path] + bringup.params_file_list(sim_files)


def arm(files):
    """(joints, initial positions, stamp_joint) of the plant the files configure."""
    import numpy as np
    from robot_dynamics.model import RobotModel
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = RobotModel.from_yaml(files[0])
    values = layered_parameters(files, '/' + PLANT)
    joints = list(values.get('joints') or model.joint_names
                  or [f'joint_{i + 1}' for i in range(model.n)])
    initial = values.get('initial_positions')
    if initial is None:
        initial = np.clip(0.0, model.position_min, model.position_max).tolist()
    return joints, [float(v) for v in initial], values.get('stamp_joint') or ''


def nodes(context):
    def argument(configuration):
        return configuration.perform(context)
    robot_file = argument(LaunchConfiguration('robot_params_file'))
    files = loop_files(robot_file, argument(LaunchConfiguration('sim_params_file')))
    joints, initial, stamp_joint = arm(files)
    urdf = ros2_control_sim.description(bringup.robot_description(robot_file), joints,
                                        initial, stamp_joint=stamp_joint)
    controllers = argument(LaunchConfiguration('controllers_file')) or \
        ros2_control_sim.controllers_file(
            joints, int(argument(LaunchConfiguration('update_rate'))))
    wall = {'use_sim_time': False}
    realtime = bringup.realtime_launch_parameters(argument, LaunchConfiguration)
    manager = ros2_control_sim.manager_prefix(ros2_control_sim.manager_priority(
        [realtime.get('realtime.priority', layered_parameters(files, '/' + name).get(
            'realtime.priority')) for name in (PLANT, CONTROLLER)]))

    def parameters(name, overrides):
        return bringup.node_parameters(files, name, '', name, overrides)
    actions = []
    if bringup.package_installed(bringup.ROBOT_STATE_PUBLISHER):
        actions.append(Node(
            package='robot_state_publisher', executable='robot_state_publisher',
            name='robot_state_publisher', output='screen',
            parameters=[{'robot_description': ParameterValue(urdf, value_type=str)}]))
    else:
        actions += [LogInfo(msg='robot_state_publisher is not installed: the URDF is served '
                            'by robot_dynamics robot_description (no TF)'),
                    Node(package='robot_dynamics', executable='robot_description',
                         name='robot_description_publisher', output='screen',
                         parameters=[{'robot_description': ParameterValue(
                             urdf, value_type=str)}])]
    plant = Node(package='robot_dynamics', executable='plant', name=PLANT, output='screen',
                 parameters=parameters(PLANT, {
                     'publish_clock': False, 'command_message': 'joint_state',
                     'command_topic': ros2_control_sim.COMMANDS_TOPIC, **wall, **realtime}),
                 remappings=[('joint_states', ros2_control_sim.STATES_TOPIC)],
                 on_exit=[Shutdown(reason='the plant stopped')])
    actions += [
        Node(package='controller_manager', executable='ros2_control_node',
             name='controller_manager', output='screen', parameters=[controllers],
             remappings=[('~/robot_description', '/robot_description')],
             **({'prefix': manager, 'exec_name': 'ros2_control_node'} if manager else {})),
        Node(package='controller_manager', executable='spawner', name='spawner',
             output='screen', arguments=list(ros2_control_sim.CONTROLLERS) + [
                 '--controller-manager', '/controller_manager']),   # controller_manager
        #      gives the controllers its parameter file (effort_controller's joints)
        plant,
        Node(package='robot_dynamics', executable='controller', name=CONTROLLER,
             output='screen', parameters=parameters(CONTROLLER, {**wall, **realtime})),
    ]
    if bringup.launch_flag(argument(LaunchConfiguration('demo'))):
        # once the plant has its first effort command: the controller says it holds the
        # arm before its efforts have crossed the stack (discovery of the plugin's
        # publisher), and a move sent then would run while the arm is still on its brakes
        demo = Node(package='robot_dynamics', executable='demo_move', name=DEMO,
                    output='screen',
                    parameters=parameters(DEMO, {**wall, 'controller': CONTROLLER}))
        on_output = when_released([demo])
        actions.append(RegisterEventHandler(OnProcessIO(
            target_action=plant, on_stdout=on_output, on_stderr=on_output)))
    return actions


def generate_launch_description():
    config = os.path.join(get_package_share_directory('robot_dynamics'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument(
            'robot_params_file', default_value=os.path.join(config, 'puma560.yaml'),
            description='robot parameter file: joints and the robot block (DH or URDF)'),
        DeclareLaunchArgument(
            'sim_params_file', default_value=os.path.join(config, 'ros2_control_sim.yaml'),
            description="node settings (loaded after the robot file and its demo move); "
            "several separated by ';', later ones win"),
        DeclareLaunchArgument('update_rate', default_value='1000',
                              description="controller_manager's update rate [Hz]"),
        DeclareLaunchArgument(
            'controllers_file', default_value='',
            description='controller_manager parameters instead of the generated ones '
            '(joint_state_broadcaster and effort_controller over the robot\'s joints)'),
        DeclareLaunchArgument('demo', default_value='true',
                              description='true: send the demo move once the controller holds'),
        *bringup.declare_realtime_arguments(DeclareLaunchArgument, 'plant and controller'),
        OpaqueFunction(function=nodes),
    ])
