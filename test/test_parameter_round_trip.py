"""The controller's parameters as ros2cli handles them: `ros2 param set` of a list that
mixes integers and floats (it arrives as a string: the rejection says so), of an
all-integer list (the parameter stays a list of floats), and `ros2 param dump` of a running
controller, which must load back with --params-file (unset parameters dump as null)."""

import os
import signal
import subprocess
import sys

import pytest
import yaml

from ros_testing import (call_service, integers, PUMA, REPO, RESEND, RosHarness,  # noqa: I100
                         string)   # (sets the domain id first)
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
from rclpy.node import Node
from rclpy.parameter import PARAMETER_SEPARATOR_STRING, parameter_value_to_python

from robot_dynamics.nodes.controller import ComputedTorqueController, NODE_NAME
from robot_dynamics.parameters.params_file import check_params_file

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
CONTROLLER = '/' + NODE_NAME


class ParamClient(Node):
    """What ros2cli's `param set` and `param dump` call: the node's parameter services."""

    def __init__(self, context):
        super().__init__('param_client', context=context)
        self.set = self.create_client(SetParameters, f'{CONTROLLER}/set_parameters')
        self.list = self.create_client(ListParameters, f'{CONTROLLER}/list_parameters')
        self.get = self.create_client(GetParameters, f'{CONTROLLER}/get_parameters')

    def ready(self):
        return all(c.service_is_ready() for c in (self.set, self.list, self.get))


@pytest.fixture
def running():
    harness = RosHarness(PUMA)
    controller = harness.add(ComputedTorqueController(context=harness.context))
    client = harness.add(ParamClient(harness.context))
    harness.spin_until(client.ready, 'the parameter services')
    yield harness, controller, client
    harness.close()


def call(harness, client, request):
    return call_service(harness, client, request, f'the {type(request).__name__} response',
                        resend_after=RESEND)


def test_a_list_mixing_integers_and_floats_arrives_as_a_string_and_the_rejection_says_so(
        running):
    """`ros2 param set /computed_torque_controller gains.kp "[150, 150.5, ...]"`: ros2cli
    finds no one type for the list and sends the text as a string."""
    harness, controller, client = running
    text = '[150, 150.5, 150, 150, 150, 150]'
    (result,) = call(harness, client.set, SetParameters.Request(
        parameters=[string('gains.kp', text)])).results
    assert not result.successful
    assert 'gains.kp' in result.reason and repr(text) in result.reason
    assert 'mixes integers and floats arrives as a string' in result.reason
    assert controller.get_parameter('gains.kp').type_ == controller.get_parameter(
        'gains.kd').type_    # unchanged: still a list of floats


def test_an_all_integer_list_keeps_the_declared_float_type(running):
    harness, controller, client = running
    (result,) = call(harness, client.set, SetParameters.Request(
        parameters=[integers('gains.kp', [150] * 6)])).results
    assert result.successful, result.reason
    (value,) = call(harness, client.get, GetParameters.Request(names=['gains.kp'])).values
    assert value.type == ParameterType.PARAMETER_DOUBLE_ARRAY
    assert list(value.double_array_value) == [150.0] * 6
    harness.spin_until(lambda: list(controller._target[1]) == [150.0] * 6, 'the new gains')


def dump(harness, client):
    """`ros2 param dump /computed_torque_controller`, as ros2cli writes it: every listed
    name's value (None when unset), nested on the dots, yaml.dump(default_flow_style=False)."""
    names = sorted(call(harness, client.list, ListParameters.Request()).result.names)
    values = call(harness, client.get, GetParameters.Request(names=names)).values
    parameters = {}
    for name, value in zip(names, values):
        *groups, leaf = name.split(PARAMETER_SEPARATOR_STRING)
        target = parameters
        for group in groups:
            target = target.setdefault(group, {})
        target[leaf] = parameter_value_to_python(value)
    return yaml.dump({CONTROLLER: {'ros__parameters': parameters}}, default_flow_style=False)


def test_a_dump_of_a_running_controller_loads_back_with_params_file(running, tmp_path):
    harness, controller, client = running
    call(harness, client.set, SetParameters.Request(
        parameters=[integers('gains.kp', [150] * 6)]))
    text = dump(harness, client)
    document = yaml.safe_load(text)
    robot = document[CONTROLLER]['ros__parameters']['robot']
    assert robot['source'] is None and robot['armature'] is None     # unset: dumped as null
    path = tmp_path / 'dump.yaml'
    path.write_text(text)
    check_params_file(str(path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    process = subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.controller', '--ros-args',
         '--params-file', str(path)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in process.stdout:        # until the controller has started, or ended
        lines.append(line)
        if 'waiting for /joint_states' in line:
            process.send_signal(signal.SIGINT)
            break
    out, _ = process.communicate(timeout=60)
    out = ''.join(lines) + out
    assert process.returncode == 0, out
    assert 'waiting for /joint_states' in out and '[ERROR]' not in out, out
    assert 'Traceback' not in out, out


def test_a_dumped_file_builds_the_same_controller(running, tmp_path):
    """In-process: the dump's values, gains included, are those of the running node."""
    harness, controller, client = running
    call(harness, client.set, SetParameters.Request(
        parameters=[integers('gains.kd', [30] * 6)]))
    path = tmp_path / 'dump.yaml'
    path.write_text(dump(harness, client))
    again = RosHarness(str(path))
    try:
        copy = again.add(ComputedTorqueController(context=again.context))
        assert list(copy.law.kd) == [30.0] * 6
        assert list(copy.law.kp) == list(controller.law.kp)
        assert copy.joints == controller.joints
        assert copy.get_parameter('robot.source').type_ == copy.get_parameter(
            'robot.armature').type_ == copy.get_parameter('robot_description').type_
        assert copy.get_parameter('robot.source').value is None      # unset, as dumped
    finally:
        again.close()


def test_a_dumped_file_loads_in_python_too(running, tmp_path):
    """RobotModel.from_yaml reads the dump's node section; its nulls are left out."""
    from robot_dynamics.model import RobotModel
    harness, controller, client = running
    path = tmp_path / 'dump.yaml'
    path.write_text(dump(harness, client))
    model = RobotModel.from_yaml(str(path), NODE_NAME)
    assert model.to_params() == controller.model.to_params()
