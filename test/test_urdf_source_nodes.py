"""`robot.source: urdf` in the nodes, over DDS: the controller and the plant build the UR5
(test/data/ur5.urdf) from the robot_description parameter, the transient-local
robot_description topic (published before they start) or a file, name the joints as the
URDF does, and close the loop (hold, then move to a goal); bad URDFs give one clear error."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
import yaml

from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.nodes.common.ros_params import ConfigurationError
from ros_testing import REPO, RosHarness

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
UR5 = os.path.join(REPO, 'test', 'data', 'ur5.urdf')
UR5_JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
              'wrist_2_joint', 'wrist_3_joint')
Q0 = [0.0, -1.2, 1.0, -1.0, -1.5, 0.3]        # rad; gravity loads joints 2 and 3
GOAL = [0.3, -1.0, 0.8, -1.2, -1.3, 0.5]
COMMANDS = 'effort_controller/commands'
CONTROLLER = '/computed_torque_controller'
CHAIN = [Parameter('robot.source', value='urdf'), Parameter('robot.base_link', value='base_link'),
         Parameter('robot.tip_link', value='tool0')]
PLANT = [Parameter('publish_clock', value=True), Parameter('real_time_factor', value=0.0),
         Parameter('integration_step', value=0.002), Parameter('command_topic', value=COMMANDS),
         Parameter('initial_positions', value=Q0)]
CONTROL = [Parameter('use_sim_time', value=True), Parameter('control_mode', value='on_state'),
           Parameter('command_topic', value=COMMANDS), Parameter('state_timeout', value=0.5)]
DESCRIPTION_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)


def ur5_text():
    with open(UR5, encoding='utf-8') as stream:
        return stream.read()


class Operator(Node):
    """Publishes robot_description (latched) and trajectories; records what the controller
    says and every effort command with whether the controller had a model at the time."""

    def __init__(self, context, controller=None):
        super().__init__('operator', context=context)
        self.controller = controller
        self.description = self.create_publisher(String, 'robot_description', DESCRIPTION_QOS)
        self.trajectory = self.create_publisher(JointTrajectory,
                                                f'{CONTROLLER}/joint_trajectory', 10)
        self.status, self.reached, self.commands = None, None, []
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, f'{CONTROLLER}/status',
                                 lambda m: setattr(self, 'status', m.data), latched)
        self.create_subscription(Bool, f'{CONTROLLER}/goal_reached',
                                 lambda m: setattr(self, 'reached', m.data), latched)
        self.create_subscription(Float64MultiArray, COMMANDS, self._on_command, 100)

    def _on_command(self, msg):
        model = getattr(self.controller, 'model', None)
        self.commands.append((model is not None, list(msg.data)))

    def move_to(self, goal, seconds=1.0):
        msg = JointTrajectory(joint_names=list(UR5_JOINTS))
        point = JointTrajectoryPoint(positions=[float(g) for g in goal],
                                     velocities=[0.0] * len(goal))
        point.time_from_start.sec = int(seconds)
        point.time_from_start.nanosec = int(round((seconds % 1.0) * 1e9))
        msg.points.append(point)
        self.trajectory.publish(msg)


@pytest.fixture
def harness():
    harness = RosHarness()
    yield harness
    harness.close()


def start_nodes(harness, source_parameters):
    plant = harness.add(PlantSimulator(context=harness.context,
                                       parameter_overrides=source_parameters + PLANT))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=source_parameters + CONTROL))
    return plant, controller


def hold_then_move(harness, plant, controller, operator):
    """The loop holds the start pose, then reaches a goal; returns the hold drift [rad]."""
    harness.spin_until(lambda: operator.status == 'holding'
                       and operator.trajectory.get_subscription_count() > 0,
                       'the controller holding the UR5')
    held = len(operator.commands)
    harness.spin_until(lambda: len(operator.commands) >= held + 50, '50 holding cycles')
    drift = float(np.max(np.abs(plant.q - Q0)))
    operator.reached = None
    operator.move_to(GOAL)
    harness.spin_until(lambda: operator.reached, 'the UR5 to reach its goal')
    np.testing.assert_allclose(plant.q, GOAL, atol=controller.goal_tolerance)
    return drift


def assert_ur5_model(node):
    assert node.model is not None and node.model.source == 'urdf'
    assert node.model.n == 6
    assert tuple(node.joints) == UR5_JOINTS == tuple(node.model.joint_names)


def test_nodes_take_the_urdf_from_the_robot_description_parameter_and_close_the_loop(
        harness):
    source = CHAIN + [Parameter('robot_description', value=ur5_text())]
    plant, controller = start_nodes(harness, source)
    operator = harness.add(Operator(harness.context, controller))
    for node in (plant, controller):
        assert_ur5_model(node)
    np.testing.assert_array_equal(controller.effort_limits, [150.0] * 3 + [28.0] * 3)
    assert hold_then_move(harness, plant, controller, operator) < 1e-3


def test_nodes_wait_for_the_latched_robot_description_topic_then_close_the_loop(harness):
    operator = harness.add(Operator(harness.context))
    operator.description.publish(String(data=ur5_text()))   # before the nodes exist
    plant, controller = start_nodes(harness, CHAIN)
    operator.controller = controller
    assert plant.model is None and controller.model is None   # waiting, not blocking
    harness.spin_until(lambda: plant.model is not None and controller.model is not None,
                       'the models from robot_description')
    for node in (plant, controller):
        assert_ur5_model(node)
    assert hold_then_move(harness, plant, controller, operator) < 1e-3
    assert operator.commands and all(had_model for had_model, _ in operator.commands)


def test_invalid_description_on_the_topic_is_reported_and_the_wait_goes_on(harness):
    operator = harness.add(Operator(harness.context))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=CHAIN + CONTROL))
    listener = controller._robot_description_listener
    harness.spin_until(lambda: operator.description.get_subscription_count() > 0,
                       'the controller subscribing robot_description')
    operator.description.publish(String(data='<robot name="x"><link name="a"/>'))
    harness.spin_until(lambda: listener.last_error is not None, 'the description rejected')
    assert controller.model is None
    assert 'URDF' in listener.last_error
    operator.description.publish(String(data=ur5_text()))
    harness.spin_until(lambda: controller.model is not None, 'the valid description')
    assert_ur5_model(controller)


def test_payload_set_while_waiting_for_the_description_is_in_the_model(harness):
    operator = harness.add(Operator(harness.context))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=CHAIN + CONTROL))
    result, = controller.set_parameters([Parameter('robot.payload.mass', value=2.5)])
    assert result.successful
    operator.description.publish(String(data=ur5_text()))
    harness.spin_until(lambda: controller.model is not None, 'the model')
    assert controller.model.payload.mass == 2.5


def test_bad_node_parameter_after_the_topic_description_ends_the_spin_with_its_name(harness):
    operator = harness.add(Operator(harness.context))
    operator.description.publish(String(data=ur5_text()))
    harness.add(ComputedTorqueController(context=harness.context, parameter_overrides=(
        CHAIN + CONTROL + [Parameter('gains.kp', value=[100.0] * 5)])))
    with pytest.raises(ConfigurationError, match='gains.kp'):
        harness.spin_until(lambda: False, 'the start-up error', wall_limit=30.0)


def write_params(tmp_path, robot, **node_parameters):
    document = {'/**': {'ros__parameters': {'robot': robot}},
                'plant_simulator': {'ros__parameters': {p.name: p.value for p in PLANT}},
                'computed_torque_controller': {'ros__parameters': {
                    p.name: p.value for p in CONTROL if p.name != 'use_sim_time'}}}
    document['/**']['ros__parameters'].update(node_parameters)
    path = tmp_path / 'ur5.yaml'
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_nodes_read_the_urdf_file_named_in_the_parameter_file_and_close_the_loop(tmp_path):
    """The whole robot is `source`, `urdf_file`, `base_link`, `tip_link`: no DH, no joints."""
    params = write_params(tmp_path, {'source': 'urdf', 'urdf_file': UR5,
                                     'base_link': 'base_link', 'tip_link': 'tool0'})
    harness = RosHarness(params)
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        controller = harness.add(ComputedTorqueController(
            context=harness.context, parameter_overrides=[Parameter('use_sim_time',
                                                                    value=True)]))
        operator = harness.add(Operator(harness.context, controller))
        for node in (plant, controller):
            assert_ur5_model(node)
        assert hold_then_move(harness, plant, controller, operator) < 1e-3
    finally:
        harness.close()


def test_joints_that_differ_from_the_urdf_chain_are_refused(harness):
    with pytest.raises(ConfigurationError, match='differ from the URDF'):
        ComputedTorqueController(context=harness.context, parameter_overrides=CHAIN + [
            Parameter('robot_description', value=ur5_text()),
            Parameter('joints', value=list(reversed(UR5_JOINTS)))])


def test_robot_description_and_urdf_file_together_are_refused(harness):
    with pytest.raises(ConfigurationError, match='give one'):
        PlantSimulator(context=harness.context, parameter_overrides=CHAIN + [
            Parameter('robot_description', value=ur5_text()),
            Parameter('robot.urdf_file', value=UR5)])


def run_node(executable, params_file):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.run(
        [sys.executable, '-m', f'robot_dynamics.nodes.{executable}', '--ros-args',
         '--params-file', params_file], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60)


FLOATING = """<robot name="drone">
  <link name="world"/><link name="body"/><link name="arm"/>
  <joint name="free" type="floating"><parent link="world"/><child link="body"/></joint>
  <joint name="j1" type="revolute"><parent link="body"/><child link="arm"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
</robot>
"""


@pytest.mark.parametrize('executable', ['controller', 'plant'])
@pytest.mark.parametrize('urdf, fragment', [
    (FLOATING, 'floating'),
    (None, 'cannot read'),
])
def test_unusable_urdf_file_stops_the_node_with_one_error_line(
        tmp_path, executable, urdf, fragment):
    path = tmp_path / 'robot.urdf'
    if urdf is not None:
        path.write_text(urdf)
    result = run_node(executable, write_params(tmp_path, {'source': 'urdf',
                                                          'urdf_file': str(path)}))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, result.stderr
    assert fragment in errors[0]
    assert 'Traceback' not in result.stderr


def test_sim_entry_point_runs_the_demo_on_a_urdf_robot_file(tmp_path):
    """`sim --params-file` with a URDF robot (no joints list): the demo move takes the
    controller's joints, the CSV columns carry the URDF joint names, the arm reaches the
    goal derived from the URDF's limits (all symmetric about 0, all wider than 2 rad: each
    joint starts at 0 and moves 0.5 rad, up and down in turn)."""
    params = tmp_path / 'ur5.yaml'
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'robot': {
        'source': 'urdf', 'urdf_file': UR5, 'base_link': 'base_link', 'tip_link': 'tool0'}}}}))
    table = tmp_path / 'run.csv'
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    result = subprocess.run(
        [sys.executable, '-m', 'robot_dynamics.nodes.sim', '--params-file', str(params),
         '--duration', '2.5', '--integration-step', '0.002', '--csv', str(table)], cwd=REPO,
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with open(table, encoding='utf-8', newline='') as stream:
        rows = list(csv.reader(stream))
    assert rows[0][1:7] == [f'q_{name}' for name in UR5_JOINTS]
    final = np.array(rows[-1][1:7], dtype=float)
    np.testing.assert_allclose(final, [0.5, -0.5, 0.5, -0.5, 0.5, -0.5], atol=1e-3)
