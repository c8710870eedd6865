"""Controller parameters: live gain changes through the parameter service (what
`ros2 param set` calls) and their effect on the loop, validation with reasons, descriptors,
integer coercion, and a bad parameter file stopping a node with one clear message."""

import os
import subprocess
import sys

import numpy as np
import pytest
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from ros_testing import (call_service, doubles, edited_puma_file, integers, PUMA, REPO, RESEND,
                         RosHarness, SIM)

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'
STEP = 0.05   # rad, reference step on every joint
CYCLE = 0.01  # s, the plant's publish period = control period (config/sim.yaml)


class Operator(Node):
    """`ros2 param set` and a trajectory publisher; records the controller's ~/error."""

    def __init__(self, context):
        super().__init__('operator', context=context)
        self.client = self.create_client(SetParameters, f'{CONTROLLER}/set_parameters')
        self.trajectory = self.create_publisher(JointTrajectory,
                                                f'{CONTROLLER}/joint_trajectory', 10)
        self.errors = []
        self.status = None
        self.create_subscription(JointState, f'{CONTROLLER}/error',
                                 lambda m: self.errors.append(np.array(m.position)), 100)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, f'{CONTROLLER}/status',
                                 lambda m: setattr(self, 'status', m.data), latched)

    def step_to(self, positions):
        """A single point at time_from_start 0: a step of the reference (JTC semantics)."""
        msg = JointTrajectory(joint_names=JOINTS)
        msg.points.append(JointTrajectoryPoint(positions=[float(p) for p in positions]))
        self.trajectory.publish(msg)


@pytest.fixture
def loop():
    harness = RosHarness(PUMA, SIM, ros_args=['-p', 'real_time_factor:=0.0',
                                              '-p', 'integration_step:=0.005'])
    harness.add(PlantSimulator(context=harness.context))
    from rclpy.parameter import Parameter
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
    operator = harness.add(Operator(harness.context))
    harness.spin_until(lambda: operator.client.service_is_ready()
                       and operator.trajectory.get_subscription_count() > 0
                       and operator.status == 'holding', 'the controller holding')
    yield harness, controller, operator
    harness.close()


def set_parameters(harness, operator, *parameters):
    return call_service(harness, operator.client,
                        SetParameters.Request(parameters=list(parameters)),
                        'the set_parameters response', resend_after=RESEND).results


def integrated_absolute_error(harness, operator, target, cycles=100):
    """Σ|e| dt of joint 1 over `cycles` control cycles after a reference step to target."""
    operator.errors.clear()
    operator.step_to(target)
    harness.spin_until(lambda: len(operator.errors) >= cycles + 5, 'the step response')
    e = np.array(operator.errors)
    moving = np.flatnonzero(np.abs(e[:, 0]) > 0.5 * STEP)[0]   # the step's first cycle
    return np.sum(np.abs(e[moving:moving + cycles, 0])) * CYCLE


def test_gain_change_through_parameter_service_changes_the_step_response(loop):
    """Critically damped e(t) = e0 (1 + ωt) e^(−ωt), ω = sqrt(kp): ∫|e| dt = 2 e0 / ω."""
    harness, controller, operator = loop
    q0 = np.radians([90.0, 0.0, 90.0, 0.0, 0.0, 0.0])
    before = integrated_absolute_error(harness, operator, q0 + STEP)
    results = set_parameters(harness, operator, integers('gains.kp', [400] * 6),
                             doubles('gains.kd', [40.0] * 6))
    assert [r.successful for r in results] == [True, True], [r.reason for r in results]
    after = integrated_absolute_error(harness, operator, q0)
    assert before == pytest.approx(2.0 * STEP / 10.0, rel=0.05)
    assert after == pytest.approx(2.0 * STEP / 20.0, rel=0.05)
    np.testing.assert_array_equal(controller.law.kp, np.full(6, 400.0))


@pytest.mark.parametrize('parameter, fragment', [
    (doubles('gains.kp', [100.0] * 5), 'gains.kp: expected 6 values'),
    (doubles('gains.kp', [100.0, 0.0, 100.0, 100.0, 100.0, 100.0]), 'gains.kp[1]'),
    (doubles('gains.kd', [20.0, 20.0, -1.0, 20.0, 20.0, 20.0]), 'gains.kd[2]'),
    (doubles('gains.kd', [20.0, 20.0, 20.0, float('nan'), 20.0, 20.0]), 'gains.kd[3]'),
    (ParameterMsg(name='gains.kp', value=ParameterValue(
        type=ParameterType.PARAMETER_STRING, string_value='150')), 'gains.kp'),
    (doubles('robot.mass', [1.0] * 6), 'read-only'),
    (ParameterMsg(name='compensate_gravity', value=ParameterValue(
        type=ParameterType.PARAMETER_BOOL, bool_value=False)), 'read-only'),
])
def test_invalid_parameter_updates_are_rejected_with_a_reason(loop, parameter, fragment):
    harness, controller, operator = loop
    kp, kd = controller.law.kp.copy(), controller.law.kd.copy()
    (result,) = set_parameters(harness, operator, parameter)
    assert not result.successful
    assert fragment in result.reason
    harness.spin_for(10)
    np.testing.assert_array_equal(controller.law.kp, kp)
    np.testing.assert_array_equal(controller.law.kd, kd)


def test_every_parameter_has_a_description_and_the_model_is_read_only(loop):
    _, controller, _ = loop
    names = [n for n in controller._parameters if n != 'use_sim_time']
    for descriptor in controller.describe_parameters(names):
        assert descriptor.description, descriptor.name
        payload = descriptor.name.startswith('robot.payload.')   # live (doc/safety.md)
        if descriptor.name.startswith('robot.') and not payload or descriptor.name in (
                'joints', 'control_mode', 'command_topic', 'control_rate'):
            assert descriptor.read_only, descriptor.name
    live = {d.name for d in controller.describe_parameters(names) if not d.read_only}
    assert {'gains.kp', 'gains.kd'} <= live


def run_node(executable, params_file):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.run(
        [sys.executable, '-m', f'robot_dynamics.nodes.{executable}', '--ros-args',
         '--params-file', params_file], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60)


@pytest.mark.parametrize('executable', ['controller', 'plant'])
def test_bad_parameter_file_stops_node_with_one_message_naming_parameter_and_index(
        tmp_path, executable):
    def negative_mass(params):
        params['robot']['mass'][2] = -4.8
    result = run_node(executable, edited_puma_file(tmp_path, negative_mass))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, result.stderr
    assert 'robot.mass[2]' in errors[0]
    assert 'Traceback' not in result.stderr


@pytest.mark.parametrize('edit, fragment', [
    (lambda p: p.update(joints=['a', 'b']), 'joints: 2 names'),
    (lambda p: p['robot'].update(inertia=p['robot']['inertia'][:-1]), 'robot.inertia'),
    (lambda p: p['robot'].update(colour='red'), 'robot.colour'),
    (lambda p: p.update(gains={'kp': [100.0] * 5}), 'gains.kp'),
    (lambda p: p.update(control_rate=-5.0), 'control_rate'),
])
def test_bad_controller_parameters_are_named_at_start_up(tmp_path, edit, fragment):
    result = run_node('controller', edited_puma_file(tmp_path, edit))
    assert result.returncode == 1
    assert fragment in result.stderr
    assert 'Traceback' not in result.stderr


def test_integer_gains_and_rates_in_the_parameter_file_are_accepted():
    harness = RosHarness(PUMA, ros_args=['-p', 'gains.kp:=[150, 150, 150, 150, 150, 150]',
                                         '-p', 'control_rate:=50'])
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        np.testing.assert_array_equal(controller.law.kp, np.full(6, 150.0))
        assert controller.control_rate == 50.0
    finally:
        harness.close()
