"""The ros2_control example, checked without ros2_control (not on PyPI):
config/ros2_control_effort.yaml (PUMA 560) and config/ros2_control_effort_panda.yaml name
joint_state_broadcaster and an effort_controllers/JointGroupEffortController whose `joints`
are the robot preset's `joints`, in order; the controller built from that preset publishes
its efforts where that effort controller takes them (`/<name>/commands`,
std_msgs/Float64MultiArray, forward_command_controller's `~/commands`), asks that
controller for its joints, and reads /joint_states, which joint_state_broadcaster
publishes; launch/ros2_control_effort.launch.py starts those pieces, and the <ros2_control>
block it generates gives each joint an effort command and position and velocity states."""

import ast
import os
import xml.etree.ElementTree as ElementTree

import pytest
import yaml

from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.common import bringup

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, 'config')
LAUNCH = os.path.join(REPO, 'launch', 'ros2_control_effort.launch.py')
PAIRS = {'ros2_control_effort.yaml': 'puma560.yaml',
         'ros2_control_effort_panda.yaml': 'panda.yaml'}
# ros2_controllers' names (effort_controllers up to Kilted; its doc/userdoc.rst)
BROADCASTER = 'joint_state_broadcaster/JointStateBroadcaster'
EFFORT = 'effort_controllers/JointGroupEffortController'


def load(name):
    with open(os.path.join(CONFIG, name), encoding='utf-8') as stream:
        return yaml.safe_load(stream)


def preset_joints(name):
    return load(name)['/**']['ros__parameters']['joints']


def effort_controllers(document):
    """{name: joints} of the effort controllers the controller_manager section declares."""
    manager = document['controller_manager']['ros__parameters']
    names = [key for key, value in manager.items()
             if isinstance(value, dict) and value.get('type') == EFFORT]
    return {name: document[name]['ros__parameters']['joints'] for name in names}


@pytest.mark.parametrize('controllers, preset', sorted(PAIRS.items()))
def test_the_effort_controller_takes_the_presets_joints_in_order(controllers, preset):
    document = load(controllers)
    manager = document['controller_manager']['ros__parameters']
    assert manager['joint_state_broadcaster']['type'] == BROADCASTER
    assert manager['update_rate'] > 0
    assert effort_controllers(document) == {'effort_controller': preset_joints(preset)}


@pytest.mark.parametrize('controllers, preset', sorted(PAIRS.items()))
def test_the_controller_publishes_where_the_effort_controller_listens(controllers, preset):
    rclpy = pytest.importorskip('rclpy')
    from std_msgs.msg import Float64MultiArray
    from robot_dynamics.nodes.controller import ComputedTorqueController
    (name,) = effort_controllers(load(controllers))
    context = rclpy.Context()
    rclpy.init(context=context, args=['test', '--ros-args', '--params-file',
                                      os.path.join(CONFIG, preset)])
    try:
        node = ComputedTorqueController(context=context)
        try:
            publisher = node._command_pub
            assert publisher.topic_name == f'/{name}/commands'
            assert publisher.msg_type is Float64MultiArray
            assert node._command_check.controller == f'/{name}'
            assert list(node.joints) == preset_joints(preset)
            assert node._state_sub.topic_name == '/joint_states'   # the broadcaster's
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def test_the_launch_file_starts_the_pieces_with_these_files():
    with open(LAUNCH, encoding='utf-8') as stream:
        tree = ast.parse(stream.read())
    strings = {node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert {'ros2_control_node', 'spawner', 'robot_state_publisher', 'controller',
            'puma560.yaml', 'ros2_control_effort.yaml', 'joint_state_broadcaster',
            'effort_controller'} <= strings


@pytest.mark.parametrize('preset', sorted(PAIRS.values()))
def test_the_generated_ros2_control_block(preset):
    path = os.path.join(CONFIG, preset)
    model = RobotModel.from_yaml(path)
    joints = preset_joints(preset)
    urdf = bringup.ros2_control_description(bringup.robot_description(path), joints,
                                            model.position_min, model.position_max)
    robot = ElementTree.fromstring(urdf)
    (block,) = robot.findall('ros2_control')
    assert block.find('hardware/plugin').text == bringup.MOCK_HARDWARE
    urdf_joints = {j.get('name') for j in robot.findall('joint')}
    listed = block.findall('joint')
    assert [j.get('name') for j in listed] == joints and set(joints) <= urdf_joints
    for i, joint in enumerate(listed):
        assert [c.get('name') for c in joint.findall('command_interface')] == ['effort']
        assert [s.get('name') for s in joint.findall('state_interface')] == ['position',
                                                                            'velocity']
        start = float(joint.find("state_interface[@name='position']/param").text)
        assert model.position_min[i] <= start <= model.position_max[i]
