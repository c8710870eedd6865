"""doc/parameters.md is what the parameter tables say, and the tables are what the nodes
declare: tools/parameter_doc.py writes the page from the tables (robot_dynamics/parameters/,
no node started); this test fails when the committed page differs, and when a node declares
a parameter its table lacks, or with another description, read-only flag, range or
default (built once with a preset in a private rclpy context, every declare_parameter call
recorded)."""

import os
import sys
import warnings

import pytest

from ros_testing import REPO  # noqa: I100 - sets ROS_DOMAIN_ID

sys.path.insert(0, os.path.join(REPO, 'tools'))
import parameter_doc  # noqa: E402

from robot_dynamics import parameters  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
FIX = 'stale: run `PYTHONPATH=. python3 tools/parameter_doc.py` and commit the result'
CONFIG = os.path.join(REPO, 'config')
# (module, class, presets it is built with); the Panda's 7 joints tell per-joint arrays
# from 3- and 6-vectors
NODES = {
    'computed_torque_controller': ('robot_dynamics.nodes.controller',
                                   'ComputedTorqueController', ('panda.yaml',)),
    'plant_simulator': ('robot_dynamics.nodes.plant', 'PlantSimulator', ('panda.yaml',)),
    'demo_move': ('robot_dynamics.nodes.sim', 'DemoMove', ('puma560.yaml', 'sim_puma560.yaml')),
}
RCLPY_PARAMETERS = ('use_sim_time', 'start_type_description_service')


def _record(node_class):
    """A subclass of `node_class` that records each declare_parameter call."""
    class Recording(node_class):
        def declare_parameter(self, name, value=None, descriptor=None, ignore_override=False):
            declared = getattr(self, '_declared', None)
            if declared is None:
                declared = self._declared = []
            declared.append((name, value, descriptor))
            return super().declare_parameter(name, value, descriptor, ignore_override)
    Recording.__name__ = node_class.__name__
    return Recording


def declared(node_name):
    """[(name, default, descriptor)] node `node_name` declares, and its joint count."""
    import importlib

    import rclpy
    module, class_name, presets = NODES[node_name]
    context = rclpy.Context()
    rclpy.init(context=context, args=['parameter_doc', '--ros-args'] + [
        item for name in presets for item in ('--params-file', os.path.join(CONFIG, name))])
    try:
        node_class = getattr(importlib.import_module(module), class_name)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            node = _record(node_class)(context=context)
        try:
            rows = [row for row in node._declared if row[0] not in RCLPY_PARAMETERS]
            return rows, len(node.get_parameter('joints').value or ())
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def differences(node_name):
    """What node `node_name` declares otherwise than its table says (empty: nothing)."""
    rows, n = declared(node_name)
    found = []
    used = set()
    for name, default, descriptor in rows:
        entry = parameters.lookup(node_name, name)
        if entry is None:
            if not name.startswith('robot.'):      # other robot.* keys of a file: passed on
                found.append(f'{name}: declared, not in the table')
            continue
        used.add(entry.name)
        if descriptor.read_only != entry.read_only:
            found.append(f'{name}: read_only {descriptor.read_only}, table {entry.read_only}')
        if parameters.JOINT not in entry.name and descriptor.description != entry.description:
            found.append(f'{name}: description {descriptor.description!r}')
        ranges = list(descriptor.floating_point_range)
        if entry.type == 'double' and (entry.minimum is not None or entry.maximum is not None):
            low = entry.minimum if entry.minimum is not None else -1e12
            high = entry.maximum if entry.maximum is not None else 1e12
            if not ranges or (ranges[0].from_value, ranges[0].to_value) != (low, high):
                found.append(f'{name}: range {ranges}, table [{low}, {high}]')
        elif ranges:
            found.append(f'{name}: range {ranges}, none in the table')
        if entry.default is not parameters.FROM_MODEL:
            expected = entry.default_value(n)
            if default != expected:
                found.append(f'{name}: default {default!r}, table {expected!r}')
    for entry in parameters.table(node_name):
        if entry.name not in used:
            found.append(f'{entry.name}: in the table, not declared')
    return found


@pytest.fixture(scope='module')
def generated():
    return parameter_doc.outputs()


def test_the_committed_page_is_what_the_tables_say(generated):
    path = parameter_doc.PAGE
    with open(path, encoding='utf-8') as stream:
        committed = stream.read()
    if committed != generated[path]:
        old, new = set(committed.splitlines()), set(generated[path].splitlines())
        changed = sorted(new - old)[:5] + ['--- committed, not in the tables:'] + sorted(
            old - new)[:5]
        pytest.fail(f'{os.path.relpath(path, REPO)} {FIX}; differences:\n' + '\n'.join(changed))


@pytest.mark.parametrize('node_name', sorted(NODES))
def test_each_node_declares_what_its_table_says(node_name):
    assert differences(node_name) == []


def test_the_page_lists_each_nodes_parameters_with_default_and_description(generated):
    page = generated[parameter_doc.PAGE]
    # a row from each part of the controller's start-up, the plant and the demo move
    for row in ('| `gains.kp` | double[] | 100.0 per joint | yes | position gains',
                '| `constraints.<joint>.goal` | double | 0.0 | yes |',
                '| `speed_scaling.rate_limit` | double | 2.0 | no |',
                '| `integration_method` | string | `rk4` | no |',
                '| `move_duration` | double |',
                '| `robot.payload.mass` | double | 0.0 | yes |'):
        assert row in page, row
    assert '| `use_sim_time` |' not in page          # rclpy's own


def test_a_renamed_parameter_would_be_caught(monkeypatch):
    """The check compares the node against its table, not the table against itself: a
    node declaring another name is named."""
    from robot_dynamics.nodes import plant
    original = plant.declare

    def renamed(node, name, *args, **kwargs):
        if name == 'integration_step':
            return original(node, 'integration_stepsize', 0.001, 'renamed', True, 1e-6, 1.0)
        return original(node, name, *args, **kwargs)
    monkeypatch.setattr(plant, 'declare', renamed)
    found = differences('plant_simulator')
    assert 'integration_stepsize: declared, not in the table' in found
    assert 'integration_step: in the table, not declared' in found


def test_the_tables_choices_are_the_cores():
    """The tables list the choices of the core's own tuples (they do not import the core,
    which imports them)."""
    from robot_dynamics.simulation import engines, integration
    from robot_dynamics import trajectory
    from robot_dynamics.nodes.common import effort_command
    from robot_dynamics.parameters import controller, plant
    assert plant.COMMAND_MESSAGES == effort_command.COMMAND_MESSAGES
    assert plant.INTEGRATION_METHODS == tuple(integration.METHODS)
    assert plant.ENGINES == tuple(engines.ENGINES)
    assert controller.INTERPOLATION_METHODS == tuple(trajectory.INTERPOLATION_METHODS)


def test_one_message_per_rule_at_start_up_and_live():
    """The table's check names the parameter, the index and the rule."""
    kp = parameters.lookup('computed_torque_controller', 'gains.kp')
    with pytest.raises(parameters.ConfigurationError,
                       match=r'^gains\.kp\[2\]: must be finite and > 0, got -1\.0$'):
        parameters.check(kp, [100.0, 100.0, -1.0], n=3)
    with pytest.raises(parameters.ConfigurationError,
                       match=r'^gains\.kp: expected 3 values \(one per joint\), got 2$'):
        parameters.check(kp, [100.0, 100.0], n=3)
    rate = parameters.lookup('computed_torque_controller', 'control_rate')
    with pytest.raises(parameters.ConfigurationError,
                       match=r'^control_rate: must be finite and >= 0\.1 and <= 10000, '
                             r'got 0\.0$'):
        parameters.check(rate, 0.0)
    law = parameters.lookup('computed_torque_controller', 'control_law')
    with pytest.raises(parameters.ConfigurationError, match=r"^control_law: 'pid' is not one"):
        parameters.check(law, 'pid')
    goal = parameters.lookup('computed_torque_controller', 'constraints.joint_2.goal')
    assert goal.name == 'constraints.<joint>.goal'
    with pytest.raises(parameters.ConfigurationError,
                       match=r'^constraints\.joint_2\.goal: must be finite and >= 0 and '
                             r'<= 1000'):
        parameters.check(goal, -0.5, name='constraints.joint_2.goal')
