"""Parameter names a user gets wrong: a misspelt key in a parameter file's "/**" section is
named with the closest name a node of the package has (a key some other node of the
package declares is not warned); a live `ros2 param set` of a name the node lacks is refused
naming it and the closest name; a `-p` list mixing integers and floats is one line naming
the parameter and the fix, not rclpy's traceback."""

import os
import subprocess
import sys

import pytest

from ros_testing import call_service, doubles, PUMA, REPO, RosHarness  # noqa: I100

from rcl_interfaces.srv import SetParameters  # noqa: E402

from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.common import runner  # noqa: E402
from robot_dynamics.nodes.managed_controller import ManagedComputedTorqueController  # noqa
from robot_dynamics.nodes.plant import PlantSimulator  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
TIMEOUT = 120     # s: a safety net against hangs, not a timing assertion

SHARED_KEYS = """\
/**:
  ros__parameters:
    gains:
      kpp: [150.0, 150.0, 150.0, 150.0, 150.0, 150.0]
    publish_rate: 50.0
    constraints:
      joint_2:
        goal: 0.02
    move_duration: 3.0
    integration_stepp: 0.002
"""


def warnings_of(node):
    """The node's warnings from now on (its logger object is the node's own)."""
    lines = []
    node.get_logger().warning = lambda text, **kwargs: lines.append(text)
    return lines


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(runner, '_WARNED_SHARED', set())


@pytest.mark.parametrize('node_class', [ComputedTorqueController, PlantSimulator])
def test_a_misspelt_shared_key_is_named_with_the_closest_name(tmp_path, node_class):
    shared = tmp_path / 'shared.yaml'
    shared.write_text(SHARED_KEYS)
    argv = ['node', '--ros-args', '--params-file', PUMA, '--params-file', str(shared)]
    harness = RosHarness(PUMA, str(shared))
    try:
        node = harness.add(node_class(context=harness.context))
        lines = warnings_of(node)
        runner.warn_unknown_parameters(node, argv)
        assert len(lines) == 1, lines
        line = lines[0]
        assert str(shared) in line and '"/**"' in line
        assert 'gains.kpp (closest: gains.kp)' in line
        assert 'integration_stepp (closest: integration_step)' in line
        # keys that another node of the package declares are not this node's mistake:
        # publish_rate (the plant), constraints.joint_2.goal (the controller),
        # move_duration (sim's demo move)
        for other in ('publish_rate', 'constraints.joint_2.goal', 'move_duration'):
            assert other + ',' not in line and other + ':' not in line, line
        # once per process: the next node reading the same file does not repeat it
        runner.warn_unknown_parameters(node, argv)
        assert len(lines) == 1
    finally:
        harness.close()


def test_a_misspelt_shared_key_layered_by_a_launch_file_names_the_users_file(tmp_path):
    """A launch file gives the node one layered file in the temporary folder: the warning
    names the user's file the key came from, not that one."""
    from robot_dynamics.parameters.layering import write_layered_file
    shared = tmp_path / 'shared.yaml'
    shared.write_text(SHARED_KEYS)
    merged = write_layered_file([PUMA, str(shared)], '/computed_torque_controller')
    harness = RosHarness(PUMA, str(shared))
    try:
        node = harness.add(ComputedTorqueController(context=harness.context))
        lines = warnings_of(node)
        runner.warn_unknown_parameters(node, ['node', '--ros-args', '--params-file', merged])
        assert len(lines) == 1, lines
        assert f'params file {shared}:' in lines[0] and merged not in lines[0], lines[0]
        assert 'gains.kpp (closest: gains.kp)' in lines[0]
    finally:
        harness.close()
        os.remove(merged)


def test_the_catalogue_knows_each_nodes_names_and_per_joint_patterns():
    assert runner.declared_by_the_package('gains.kp')                  # controller
    assert runner.declared_by_the_package('integration_step')          # plant
    assert runner.declared_by_the_package('start_positions')           # sim's demo move
    assert runner.declared_by_the_package('constraints.panda_joint4.trajectory')
    assert not runner.declared_by_the_package('constraints.a.b.trajectory')
    assert not runner.declared_by_the_package('gains.kpp')


@pytest.mark.parametrize('node_class', [ComputedTorqueController,
                                        ManagedComputedTorqueController, PlantSimulator])
def test_a_live_set_of_an_unknown_name_is_refused_naming_it(node_class):
    harness = RosHarness(PUMA)
    try:
        node = harness.add(node_class(context=harness.context))
        lines = warnings_of(node)
        client = node.create_client(SetParameters, f'{node.get_fully_qualified_name()}'
                                    '/set_parameters')
        harness.spin_until(client.service_is_ready, 'set_parameters')
        result = call_service(harness, client, SetParameters.Request(parameters=[
            doubles('gains.kpp', [150.0] * 6)]), 'set gains.kpp').results[0]
        assert not result.successful
        assert 'gains.kpp' in result.reason, result.reason
        if node_class is not PlantSimulator:
            assert 'closest: gains.kp' in result.reason, result.reason
        assert len(lines) == 1 and 'gains.kpp' in lines[0], lines
        if node_class is not PlantSimulator:          # a declared one still works
            assert call_service(harness, client, SetParameters.Request(parameters=[
                doubles('gains.kp', [150.0] * 6)]), 'set gains.kp').results[0].successful
    finally:
        harness.close()


def test_a_mixed_integer_and_float_list_on_the_command_line_is_one_line():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    result = subprocess.run(
        [sys.executable, '-m', 'robot_dynamics.nodes.controller', '--ros-args',
         '--params-file', PUMA, '-p', 'gains.kp:=[150, 150.5, 150.0, 150.0, 150.0, 150.0]'],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert 'Traceback' not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert '[ERROR]' in lines[0] and 'gains.kp' in lines[0]
    assert 'gains.kp[0]: 150 is an integer in a list of floats' in lines[0]
    assert 'write 150.0' in lines[0]


@pytest.mark.parametrize('rule, fragment', [
    ('gains.kp:=[150, 150.5]', '[0]: 150 is an integer in a list of floats'),
    ('joints:=[a, 1]', "[1]: 1 is an integer in a list of strings"),
])
def test_the_command_line_check_names_the_parameter(rule, fragment):
    with pytest.raises(runner.ParamsFileError) as error:
        runner.check_command_line_parameters(['x', '--ros-args', '-p', rule])
    assert rule.split(':=')[0] in str(error.value) and fragment in str(error.value)
    for fine in ('gains.kp:=[150.0, 150.5]', 'a:=[1, 2]', 'b:=[4.0e-05, 1.0]', 'c:=x'):
        runner.check_command_line_parameters(['x', '--ros-args', '-p', fine])


def test_the_managed_controller_warns_at_start_while_unconfigured(tmp_path):
    """Its parameters are declared at construction, so a misspelt key is named at once,
    not only at the first configure."""
    import signal
    import time
    from ros_testing import ProcessOutput
    shared = tmp_path / 'shared.yaml'
    shared.write_text(SHARED_KEYS)
    env = dict(os.environ, PYTHONUNBUFFERED='1', PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    process = subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.managed_controller', '--ros-args',
         '--params-file', PUMA, '--params-file', str(shared), '-p', 'control_ratte:=5.0'],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = ProcessOutput(process)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (output.seen('"/**" key') and output.seen('control_ratte')):
            assert process.poll() is None and time.monotonic() < deadline, output.text()
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    text = output.text()
    assert 'gains.kpp (closest: gains.kp)' in text
    assert 'control_ratte (closest: control_rate)' in text
    assert 'configured (inactive)' not in text and 'Traceback' not in text


@pytest.mark.parametrize('name', sorted(n for n in os.listdir(os.path.join(REPO, 'config'))
                                        if n.endswith('.yaml')))
def test_no_shipped_file_has_a_key_that_no_node_declares(name):
    """The warning never fires for the package's own files: every key of every section
    for the package's nodes (robot.* aside: the model checks those) is declared by some
    node of the package. Sections for other nodes (ros2_control's controller_manager and
    controllers in the ros2_control example files) are theirs."""
    from robot_dynamics.parameters.params_file import node_sections, section_applies
    ours = ('/computed_torque_controller', '/plant_simulator', '/demo_move')
    sections = node_sections(os.path.join(REPO, 'config', name))
    assert sections
    for section, keys in sections.items():
        if not any(section_applies(section, node) for node in ours):
            continue
        for key in keys:
            assert (key.startswith('robot.') or key == 'use_sim_time'
                    or runner.declared_by_the_package(key)), f'{name}: {section}: {key}'
