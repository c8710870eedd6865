"""Launch files and packaging, checked statically (parsed with ast: every executable, file
and launch argument they reference exists; package.xml declares every third-party import;
setup.py installs what `ros2 launch` needs), the optional robot_state_publisher/RViz
bring-up (which packages start, the robot_description they get, config/sim.rviz), and,
where `launch`/`launch_ros` and a colcon install are available, the actions sim.launch.py
generates and a real launch (skipped cleanly otherwise: neither is on PyPI)."""

import ast
import glob
import importlib
import importlib.util
import math
import os
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest
import yaml

from robot_dynamics.nodes.common import bringup
from robot_dynamics.model.urdf import parse_urdf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH_FILES = sorted(glob.glob(os.path.join(REPO, 'launch', '*.py')))
# rosdep keys of Python modules whose import name differs from the key
ROSDEP_KEYS = {'numpy': 'python3-numpy', 'yaml': 'python3-yaml'}
SIM_LAUNCH = os.path.join(REPO, 'launch', 'sim.launch.py')
MANAGED_LAUNCH = os.path.join(REPO, 'launch', 'controller_managed.launch.py')
UR5 = os.path.join(REPO, 'test', 'data', 'ur5.urdf')
# ros2_control's executables, which only the ros2_control launch files start (they need them)
ROS2_CONTROL = {'controller_manager': {'ros2_control_node', 'spawner'},
                'robot_state_publisher': {'robot_state_publisher'}}
ROS2_CONTROL_LAUNCH = {'ros2_control_effort.launch.py', 'ros2_control_sim.launch.py'}


def parse(path):
    with open(path, encoding='utf-8') as stream:
        return ast.parse(stream.read(), path)


def calls(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, 'attr', None)
            if called == name:
                yield node


def keyword(call, name):
    for kw in call.keywords:
        if kw.arg == name and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return None


def first_string(call):
    if call.args and isinstance(call.args[0], ast.Constant):
        return call.args[0].value
    return None


def declared(path_or_tree):
    """{launch argument: default} a launch file declares: its DeclareLaunchArgument calls,
    and the realtime_* ones (empty) where it calls bringup.declare_realtime_arguments."""
    tree = parse(path_or_tree) if isinstance(path_or_tree, str) else path_or_tree
    defaults = {first_string(c): keyword(c, 'default_value')
                for c in calls(tree, 'DeclareLaunchArgument')}
    if any(True for _ in calls(tree, 'declare_realtime_arguments')):
        defaults.update({name: '' for name in bringup.REALTIME_ARGUMENTS})
    return defaults


def console_scripts():
    """{executable: 'module:function'} from setup.py's entry_points."""
    scripts = {}
    for node in ast.walk(parse(os.path.join(REPO, 'setup.py'))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.count('=') == 1 and ':' in node.value:
            name, target = (part.strip() for part in node.value.split('='))
            scripts[name] = target
    return scripts


def test_there_are_launch_files_named_for_ros2_launch():
    names = [os.path.basename(p) for p in LAUNCH_FILES]
    assert {'sim.launch.py', 'controller.launch.py'} <= set(names)
    assert all(name.endswith('.launch.py') for name in names)


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=os.path.basename)
def test_launch_file_executables_are_console_scripts_or_optional_packages(path):
    """Our nodes are console scripts; other packages only the optional visual ones, which
    the launch file starts only when the ament index has them (bringup.visual_plan), and
    in the ros2_control example ros2_control's own executables (it needs them)."""
    scripts = console_scripts()
    tree = parse(path)
    nodes = list(calls(tree, 'Node')) + list(calls(tree, 'LifecycleNode'))
    assert nodes
    for node in nodes:
        package = keyword(node, 'package')
        if package == 'robot_dynamics':
            assert keyword(node, 'executable') in scripts, keyword(node, 'executable')
        elif package in ROS2_CONTROL and os.path.basename(path) in ROS2_CONTROL_LAUNCH:
            assert keyword(node, 'executable') in ROS2_CONTROL[package]
        else:
            assert package in bringup.OPTIONAL_PACKAGES, package
            assert keyword(node, 'executable') == {'rviz2': 'rviz2'}.get(package, package)


def test_console_scripts_point_at_existing_functions():
    for name, target in console_scripts().items():
        module, function = target.split(':')
        assert callable(getattr(importlib.import_module(module), function)), name


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=os.path.basename)
def test_launch_arguments_used_are_declared(path):
    tree = parse(path)
    declared = {first_string(c) for c in calls(tree, 'DeclareLaunchArgument')}
    used = {first_string(c) for c in calls(tree, 'LaunchConfiguration')}
    assert used and None not in used
    assert used <= declared, used - declared


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=os.path.basename)
def test_config_files_referenced_exist_and_are_installed(path):
    referenced = {node.value for node in ast.walk(parse(path))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value.endswith(('.yaml', '.rviz'))}
    assert referenced
    installed = {os.path.basename(p) for pattern in ('*.yaml', '*.rviz')
                 for p in glob.glob(os.path.join(REPO, 'config', pattern))}
    assert referenced <= installed, referenced - installed


def transition_attribute(call):
    """The name of a ChangeState call's transition_id (Transition.TRANSITION_...)."""
    for kw in call.keywords:
        if kw.arg == 'transition_id' and isinstance(kw.value, ast.Attribute):
            return kw.value.attr
    return None


def test_managed_launch_file_configures_then_activates_the_lifecycle_controller_once():
    """controller_managed.launch.py: the managed executable as a LifecycleNode named as the
    node names itself; configure emitted at start-up (autostart), activate emitted by a
    handler of configuring -> inactive only (a later deactivate is not undone), each only
    where `bringup.lifecycle_plan` asks for it."""
    from robot_dynamics.nodes.managed_controller import NODE_NAME
    tree = parse(MANAGED_LAUNCH)
    (node,) = calls(tree, 'LifecycleNode')
    assert keyword(node, 'executable') == 'controller_managed'
    assert console_scripts()['controller_managed'].startswith(
        'robot_dynamics.nodes.managed_controller:')
    constants = {target.id: assign.value.value for assign in tree.body
                 if isinstance(assign, ast.Assign) and isinstance(assign.value, ast.Constant)
                 for target in assign.targets}
    (argument,) = [c for c in calls(tree, 'DeclareLaunchArgument')
                   if first_string(c) == 'node_name']
    default = next(kw.value for kw in argument.keywords if kw.arg == 'default_value')
    assert constants[default.id] == NODE_NAME   # the name unless node_name:=... renames it
    assert 'namespace' in {kw.arg for kw in node.keywords}   # launch_ros requires it
    handlers = list(calls(tree, 'OnStateTransition'))
    assert len(handlers) == 1
    handler = handlers[0]
    assert keyword(handler, 'start_state') == 'configuring'
    assert keyword(handler, 'goal_state') == 'inactive'
    inside = {transition_attribute(c) for c in calls(handler, 'ChangeState')}
    everywhere = [transition_attribute(c) for c in calls(tree, 'ChangeState')]
    assert inside == {'TRANSITION_ACTIVATE'}
    assert sorted(everywhere) == ['TRANSITION_ACTIVATE', 'TRANSITION_CONFIGURE']
    defaults = declared(tree)
    assert defaults['autostart'] == 'true' and defaults['activate'] == 'true'
    assert list(calls(tree, 'IfCondition')) == []     # the plan decides, not two conditions


@pytest.mark.parametrize('autostart, activate, plan', [
    ('true', 'true', ('configure', 'activate')), ('true', 'false', ('configure',)),
    ('false', 'true', ()), ('False', 'false', ()), ('1', 'yes', ('configure', 'activate')),
])
def test_lifecycle_plan_leaves_every_transition_to_the_user_without_autostart(
        autostart, activate, plan):
    assert bringup.lifecycle_plan(autostart, activate) == plan


@pytest.mark.parametrize('text, files', [
    ('', []), ('a.yaml', ['a.yaml']), ('a.yaml;b.yaml', ['a.yaml', 'b.yaml']),
    (' a.yaml ; b.yaml ;', ['a.yaml', 'b.yaml']), ('a.yaml,b.yaml', ['a.yaml', 'b.yaml']),
])
def test_params_file_list_keeps_the_order(text, files):
    assert bringup.params_file_list(text) == files


def test_realtime_launch_arguments_become_parameters_and_empty_ones_none():
    assert bringup.realtime_parameters('', '', '') == {}
    assert bringup.realtime_parameters('80', '1', 'true') == {
        'realtime.priority': 80, 'realtime.cpu_affinity': [1], 'realtime.lock_memory': True}
    assert bringup.realtime_parameters('', '[0, 1]', '') == {'realtime.cpu_affinity': [0, 1]}
    assert bringup.realtime_parameters('0', '0,1', 'false') == {
        'realtime.priority': 0, 'realtime.cpu_affinity': [0, 1], 'realtime.lock_memory': False}


@pytest.mark.parametrize('arguments, named', [
    (('120', '', ''), 'realtime_priority'), (('high', '', ''), 'realtime_priority'),
    (('', 'x', ''), 'realtime_cpu_affinity'), (('', '1,1', ''), 'realtime_cpu_affinity'),
    (('', '-1', ''), 'realtime_cpu_affinity'), (('', '', 'maybe'), 'realtime_lock_memory'),
])
def test_bad_realtime_launch_arguments_are_named(arguments, named):
    with pytest.raises(ValueError, match=named):
        bringup.realtime_parameters(*arguments)


class _Recorded:
    """A launch class stand-in: keeps its arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration(_Recorded):
    def perform(self, context):
        return context[self.args[0]]


def _fake_launch_modules():
    """Stand-ins for the launch, launch_ros and ament_index_python modules the launch
    files import (neither launch nor launch_ros is on PyPI): enough to load the files and
    call their OpaqueFunction bodies as `ros2 launch` would."""
    import types

    def module(name, **attributes):
        made = types.ModuleType(name)
        made.__dict__.update(attributes)
        return made
    kinds = {name: type(name, (_Recorded,), {}) for name in (
        'LaunchDescription', 'DeclareLaunchArgument', 'EmitEvent', 'OpaqueFunction',
        'RegisterEventHandler', 'LogInfo', 'Shutdown', 'Node', 'LifecycleNode',
        'OnStateTransition', 'ChangeState', 'ParameterValue', 'IfCondition', 'OnProcessIO')}
    return {
        'launch': module('launch', LaunchDescription=kinds['LaunchDescription']),
        'launch.actions': module('launch.actions', **{k: kinds[k] for k in (
            'DeclareLaunchArgument', 'EmitEvent', 'OpaqueFunction', 'RegisterEventHandler',
            'LogInfo', 'Shutdown')}),
        'launch.conditions': module('launch.conditions', IfCondition=kinds['IfCondition']),
        'launch.event_handlers': module('launch.event_handlers',
                                        OnProcessIO=kinds['OnProcessIO']),
        'launch.events': module('launch.events', matches_action=lambda action: action),
        'launch.substitutions': module('launch.substitutions',
                                       LaunchConfiguration=_LaunchConfiguration),
        'launch_ros': module('launch_ros'),
        'launch_ros.actions': module('launch_ros.actions', Node=kinds['Node'],
                                     LifecycleNode=kinds['LifecycleNode']),
        'launch_ros.event_handlers': module('launch_ros.event_handlers',
                                            OnStateTransition=kinds['OnStateTransition']),
        'launch_ros.events': module('launch_ros.events'),
        'launch_ros.events.lifecycle': module('launch_ros.events.lifecycle',
                                              ChangeState=kinds['ChangeState']),
        'launch_ros.parameter_descriptions': module('launch_ros.parameter_descriptions',
                                                    ParameterValue=kinds['ParameterValue']),
        'ament_index_python': module('ament_index_python'),
        'ament_index_python.packages': module(
            'ament_index_python.packages',
            get_package_share_directory=lambda package: os.path.join(REPO)),
    }


@pytest.fixture
def fake_launch(monkeypatch, tmp_path):
    """Load a launch file with the stand-ins; the per-node parameter files it writes go
    to the test's folder."""
    import tempfile
    pytest.importorskip('lifecycle_msgs')
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    for name, module in _fake_launch_modules().items():
        monkeypatch.setitem(sys.modules, name, module)

    def load(path):
        spec = importlib.util.spec_from_file_location('launch_under_test', path)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded
    return load


def managed_context(**given):
    """The launch arguments of controller_managed.launch.py: the declared defaults, then
    `given`."""
    defaults = declared(MANAGED_LAUNCH)
    defaults['params_file'] = os.path.join(REPO, 'config', 'puma560.yaml')
    return {**defaults, **given}


def kinds_of(actions):
    return [type(action).__name__ for action in actions]


def test_managed_launch_with_autostart_false_requests_no_transition(fake_launch):
    """autostart:=false: the node alone, no configure, and no handler that would activate
    it after the user's own configure (then `activate` would fail: "Unknown transition
    requested"), whatever activate says."""
    module = fake_launch(MANAGED_LAUNCH)
    for activate in ('true', 'false'):
        actions = module.controller_actions(managed_context(autostart='false',
                                                            activate=activate))
        assert kinds_of(actions) == ['LifecycleNode']


def test_managed_launch_configures_and_activates_by_default(fake_launch):
    module = fake_launch(MANAGED_LAUNCH)
    actions = module.controller_actions(managed_context())
    assert kinds_of(actions) == ['RegisterEventHandler', 'LifecycleNode', 'EmitEvent']
    handler = actions[0].args[0]
    (activate,) = handler.kwargs['entities']
    assert activate.kwargs['event'].kwargs['transition_id'] == 3      # TRANSITION_ACTIVATE
    assert handler.kwargs['target_lifecycle_node'] is actions[1]
    assert actions[2].kwargs['event'].kwargs['transition_id'] == 1    # TRANSITION_CONFIGURE
    actions = module.controller_actions(managed_context(activate='false'))
    assert kinds_of(actions) == ['LifecycleNode', 'EmitEvent']


def given_parameters(node, name=None):
    """{parameter: value} a launch file's node gets from its `parameters` (files as rcl
    reads them for the node's name, dicts as they are), in order."""
    from robot_dynamics.parameters.layering import layered_parameters, node_fqn
    fqn = node_fqn(name or node.kwargs['name'], node.kwargs.get('namespace', ''))
    values = {}
    for entry in node.kwargs['parameters']:
        values.update(entry if isinstance(entry, dict) else layered_parameters([entry], fqn))
    return values


def test_managed_launch_layers_parameter_files_and_the_realtime_arguments(fake_launch,
                                                                         tmp_path):
    """params_file, then settings_params_file's files, later ones winning whatever their
    sections; use_sim_time and the realtime_* given last; one file for the node."""
    arm, gains, rt = (str(tmp_path / f'{n}.yaml') for n in ('arm', 'gains', 'rt'))
    write(arm, {'/**': {'joints': ['a', 'b'], 'gains': {'kp': [1.0, 1.0]}},
                '/**/computed_torque_controller': {'control_mode': 'on_state',
                                                   'gains': {'kd': [2.0, 2.0]}}})
    write(gains, {'/**': {'gains': {'kd': [5.0, 5.0], 'kp': [3.0, 3.0]}}})
    write(rt, {'computed_torque_controller': {'realtime': {'priority': 10}},
               '/**': {'gains': {'kp': [4.0, 4.0]}}})
    module = fake_launch(MANAGED_LAUNCH)
    (node,) = module.controller_actions(managed_context(
        autostart='false', params_file=arm, settings_params_file=f'{gains};{rt}',
        use_sim_time='true', realtime_priority='80', realtime_cpu_affinity='0,1'))
    assert len(node.kwargs['parameters']) == 1
    assert given_parameters(node) == {
        'joints': ['a', 'b'], 'control_mode': 'on_state', 'gains.kd': [5.0, 5.0],
        'gains.kp': [4.0, 4.0], 'use_sim_time': True, 'realtime.priority': 80,
        'realtime.cpu_affinity': [0, 1]}
    (node,) = module.controller_actions(managed_context(autostart='false', params_file=arm))
    assert given_parameters(node) == {
        'joints': ['a', 'b'], 'control_mode': 'on_state', 'gains.kd': [2.0, 2.0],
        'gains.kp': [1.0, 1.0], 'use_sim_time': False}


def test_managed_launch_node_name_keeps_the_sections_of_the_usual_name(fake_launch,
                                                                        tmp_path):
    arm = str(tmp_path / 'arm.yaml')
    write(arm, {'/**': {'joints': ['a']},
                '/**/computed_torque_controller': {'control_mode': 'on_state'},
                '/**/my_ctrl': {'state_timeout': 0.2},
                'my_ctrl': {'command_topic': 'root_only'},   # /my_ctrl, not /arm1/my_ctrl
                'other': {'command_timeout': 9.0}})
    module = fake_launch(MANAGED_LAUNCH)
    (node,) = module.controller_actions(managed_context(
        autostart='false', params_file=arm, node_name='my_ctrl', namespace='arm1'))
    assert node.kwargs['name'] == 'my_ctrl' and node.kwargs['namespace'] == 'arm1'
    assert given_parameters(node) == {'joints': ['a'], 'control_mode': 'on_state',
                                      'state_timeout': 0.2, 'use_sim_time': False}


def test_sim_launch_layers_files_and_launch_arguments_for_each_node(fake_launch, tmp_path):
    """A /** value of a later sim_params_file wins over config/sim.yaml's node sections;
    the realtime_* given go to plant and controller, use_sim_time and publish_clock where
    they belong; each node gets one file."""
    mine = str(tmp_path / 'mine.yaml')
    write(mine, {'/**': {'gains': {'kp': [150.0] * 6}, 'integration_step': 0.0005}})
    module = fake_launch(SIM_LAUNCH)
    defaults = declared(SIM_LAUNCH)
    sim_yaml = os.path.join(REPO, 'config', 'sim.yaml')
    context = {**defaults, 'robot_params_file': os.path.join(REPO, 'config', 'puma560.yaml'),
               'sim_params_file': f'{sim_yaml};{mine}', 'realtime_priority': '70',
               'realtime_lock_memory': 'true', 'realtime_cpu_affinity': '0,1'}
    nodes = {node.kwargs['name']: node for node in module.loop_nodes(context)}
    assert all(len(node.kwargs['parameters']) == 1 for node in nodes.values())
    plant = given_parameters(nodes['plant_simulator'])
    controller = given_parameters(nodes['computed_torque_controller'])
    demo = given_parameters(nodes['demo_move'])
    realtime = {'realtime.priority': 70, 'realtime.lock_memory': True,
                'realtime.cpu_affinity': [0, 1]}
    assert controller['gains.kp'] == [150.0] * 6          # mine.yaml's /** over sim.yaml
    assert plant['integration_step'] == 0.0005
    assert controller['control_mode'] == 'on_state'       # sim.yaml's node section kept
    assert plant['publish_clock'] is True and 'use_sim_time' not in plant
    assert controller['use_sim_time'] is True and demo['use_sim_time'] is True
    assert realtime.items() <= plant.items() and realtime.items() <= controller.items()
    assert not any(name.startswith('realtime.') for name in demo)
    assert demo['controller'] == 'computed_torque_controller'
    context.update(realtime_priority='', realtime_lock_memory='', realtime_cpu_affinity='')
    nodes = {node.kwargs['name']: node for node in module.loop_nodes(context)}
    assert not any(name.startswith('realtime.')        # the files decide
                   for name in given_parameters(nodes['plant_simulator']))


def test_sim_launch_renamed_nodes_keep_their_settings(fake_launch):
    """controller_name/plant_name: config/sim.yaml's sections for the usual names still
    apply (the controller stays in on_state lock-step), and the demo addresses the
    renamed controller."""
    module = fake_launch(SIM_LAUNCH)
    defaults = declared(SIM_LAUNCH)
    context = {**defaults, 'robot_params_file': os.path.join(REPO, 'config', 'puma560.yaml'),
               'sim_params_file': os.path.join(REPO, 'config', 'sim.yaml'),
               'controller_name': 'my_ctrl', 'plant_name': 'my_plant', 'namespace': 'arm1'}
    nodes = {node.kwargs['name']: node for node in module.loop_nodes(context)}
    assert set(nodes) == {'my_plant', 'my_ctrl', 'demo_move'}
    usual = {node.kwargs['name']: node for node in module.loop_nodes(defaults | {
        'robot_params_file': context['robot_params_file'],
        'sim_params_file': context['sim_params_file']})}
    for renamed, name in (('my_ctrl', 'computed_torque_controller'),
                          ('my_plant', 'plant_simulator')):
        assert given_parameters(nodes[renamed]) == given_parameters(usual[name]), renamed
    assert given_parameters(nodes['my_ctrl'])['control_mode'] == 'on_state'
    assert given_parameters(nodes['demo_move'])['controller'] == 'my_ctrl'


def test_sim_launch_stops_when_the_plant_stops(fake_launch):
    """A plant refused at start (another simulation on the ROS domain) must not leave this
    launch's controller and demo move driving the other simulation's arm: the plant's exit
    shuts the launch down; the controller's and the demo move's do not."""
    module = fake_launch(SIM_LAUNCH)
    defaults = declared(SIM_LAUNCH)
    context = {**defaults, 'robot_params_file': os.path.join(REPO, 'config', 'puma560.yaml'),
               'sim_params_file': os.path.join(REPO, 'config', 'sim.yaml')}
    nodes = {node.kwargs['name']: node for node in module.loop_nodes(context)}
    on_exit = nodes['plant_simulator'].kwargs.get('on_exit') or []
    assert kinds_of(on_exit) == ['Shutdown']
    assert 'plant' in on_exit[0].kwargs['reason']
    for other in ('computed_torque_controller', 'demo_move'):
        assert not nodes[other].kwargs.get('on_exit'), other


def test_controller_launch_layers_several_params_files_and_renames(fake_launch, tmp_path):
    arm, mine = str(tmp_path / 'arm.yaml'), str(tmp_path / 'mine.yaml')
    write(arm, {'/**': {'joints': ['a']},
                '/**/computed_torque_controller': {'gains': {'kp': [1.0]}}})
    write(mine, {'/**': {'gains': {'kp': [2.0]}}})
    module = fake_launch(os.path.join(REPO, 'launch', 'controller.launch.py'))
    defaults = declared(os.path.join(REPO, 'launch', 'controller.launch.py'))
    for name in ('computed_torque_controller', 'ctrl2'):
        (node,) = module.controller_node({**defaults, 'params_file': f'{arm};{mine}',
                                          'node_name': name})
        assert node.kwargs['name'] == name
        assert given_parameters(node) == {'joints': ['a'], 'gains.kp': [2.0],
                                          'use_sim_time': False}


def test_a_launch_file_passes_a_file_rcl_would_refuse_on_as_it_is(fake_launch, tmp_path):
    """The node itself then names the problem in its one line."""
    bad = tmp_path / 'bad.yaml'
    bad.write_text('/**:\n  ros__parameters:\n    kp: [1, 2.0]\n')
    module = fake_launch(MANAGED_LAUNCH)
    (node,) = module.controller_actions(managed_context(autostart='false',
                                                       params_file=str(bad)))
    assert node.kwargs['parameters'] == [str(bad), {'use_sim_time': False}]


def test_a_missing_parameter_file_stops_the_launch_with_one_line(fake_launch, tmp_path):
    """launch_ros would skip it with a warning and start the node without it."""
    from robot_dynamics.parameters.params_file import ParamsFileError
    module = fake_launch(MANAGED_LAUNCH)
    missing = str(tmp_path / 'nowhere.yaml')
    with pytest.raises(ParamsFileError, match=f'params file {missing}: no such file'):
        module.controller_actions(managed_context(autostart='false', params_file=missing))


def write(path, sections):
    """A parameter file of {section: parameters}."""
    with open(path, 'w', encoding='utf-8') as stream:
        yaml.safe_dump({key: {'ros__parameters': value} for key, value in sections.items()},
                       stream)


@pytest.mark.parametrize('path', [SIM_LAUNCH, MANAGED_LAUNCH, os.path.join(
    REPO, 'launch', 'ros2_control_sim.launch.py')], ids=os.path.basename)
def test_launch_files_declare_the_realtime_arguments_empty(path):
    defaults = declared(path)
    for name in bringup.REALTIME_ARGUMENTS:
        assert defaults[name] == '', name
    assert any(True for _ in calls(parse(path), 'declare_realtime_arguments'))


def test_the_realtime_arguments_are_declared_empty_with_their_descriptions():
    made = bringup.declare_realtime_arguments(
        lambda name, **kwargs: (name, kwargs), 'plant and controller')
    assert [name for name, _ in made] == list(bringup.REALTIME_ARGUMENTS)
    for name, kwargs in made:
        assert kwargs['default_value'] == ''
        assert 'of plant and controller' in kwargs['description']
    values = {'realtime_priority': '80', 'realtime_cpu_affinity': '',
              'realtime_lock_memory': 'true'}
    assert bringup.realtime_launch_parameters(lambda v: v, values.get) == {
        'realtime.priority': 80, 'realtime.lock_memory': True}


def test_managed_launch_file_generates_its_actions():
    """Where launch_ros is installed: the launch description builds (imports resolve)."""
    pytest.importorskip('launch')
    pytest.importorskip('launch_ros')
    spec = importlib.util.spec_from_file_location('managed_launch', MANAGED_LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from ament_index_python.packages import get_package_share_directory, PackageNotFoundError
    from launch_ros.actions import LifecycleNode
    try:
        get_package_share_directory('robot_dynamics')
    except PackageNotFoundError:
        pytest.skip('robot_dynamics is not installed in an ament prefix (colcon build)')
    description = module.generate_launch_description()
    assert any(isinstance(entity, LifecycleNode) for entity in description.entities)


def test_sim_launch_file_declares_the_visual_arguments_rviz_off_by_default():
    defaults = declared(SIM_LAUNCH)
    assert {'rviz', 'rviz_config', 'robot_params_file', 'use_sim_time', 'namespace'} <= set(
        defaults)
    assert defaults['rviz'] == 'false'
    tree = parse(SIM_LAUNCH)
    functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    opaque = [kw.value.id for c in calls(tree, 'OpaqueFunction') for kw in c.keywords
              if kw.arg == 'function']
    assert opaque == ['loop_nodes', 'visual_nodes']
    assert {'loop_nodes', 'visual_nodes'} <= functions


def test_sim_rviz_config_shows_robot_model_and_tf_in_base_link():
    with open(os.path.join(REPO, 'config', 'sim.rviz'), encoding='utf-8') as stream:
        config = yaml.safe_load(stream)
    manager = config['Visualization Manager']
    displays = {d['Class']: d for d in manager['Displays']}
    model = displays['rviz_default_plugins/RobotModel']
    assert model['Value'] is True and displays['rviz_default_plugins/TF']['Value'] is True
    topic = model['Description Topic']
    assert topic['Value'].lstrip('/') == 'robot_description'
    assert topic['Durability Policy'] == 'Transient Local'   # as robot_state_publisher
    assert manager['Global Options']['Fixed Frame'] == 'base_link'


def movable_joint_names(urdf_text):
    return [j.name for j in parse_urdf(urdf_text).joints.values()
            if j.type in ('revolute', 'continuous', 'prismatic')]


def test_robot_description_of_a_dh_preset_has_its_joints_and_the_rviz_fixed_frame():
    path = os.path.join(REPO, 'config', 'puma560.yaml')
    with open(path, encoding='utf-8') as stream:
        joints = yaml.safe_load(stream)['/**']['ros__parameters']['joints']
    text = bringup.robot_description(path)
    assert movable_joint_names(text) == joints
    robot = parse_urdf(text)
    children = {j.child for j in robot.joints.values()}
    assert 'base_link' in robot.links and 'base_link' not in children    # the root


def test_robot_description_of_a_urdf_robot_file_is_that_urdf(tmp_path):
    params = tmp_path / 'ur5.yaml'
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'robot': {
        'source': 'urdf', 'urdf_file': UR5, 'base_link': 'base_link', 'tip_link': 'tool0'}}}}))
    with open(UR5, encoding='utf-8') as stream:
        assert bringup.robot_description(str(params)) == stream.read()


@pytest.mark.parametrize('rviz, installed, started', [
    (False, {'robot_state_publisher', 'rviz2'}, ['robot_state_publisher']),
    (True, {'robot_state_publisher', 'rviz2'}, ['robot_state_publisher', 'rviz2']),
    (True, {'rviz2'}, ['rviz2']),
    (True, set(), []),
    (False, set(), []),
])
def test_visual_plan_starts_what_is_asked_for_and_installed_and_names_the_rest(
        rviz, installed, started):
    start, skipped = bringup.visual_plan(rviz, installed.__contains__)
    assert start == started
    wanted = ['robot_state_publisher'] + (['rviz2'] if rviz else [])
    missing = [p for p in wanted if p not in installed]
    assert len(skipped) == len(missing)
    assert all(p in line and 'not installed' in line for p, line in zip(missing, skipped))


def test_package_installed_asks_the_ament_index(tmp_path, monkeypatch):
    pytest.importorskip('ament_index_python')
    marker = tmp_path / 'share' / 'ament_index' / 'resource_index' / 'packages'
    marker.mkdir(parents=True)
    (marker / 'rviz2').write_text('')
    monkeypatch.setenv('AMENT_PREFIX_PATH', str(tmp_path))
    assert bringup.package_installed('rviz2')
    assert not bringup.package_installed('robot_state_publisher')


@pytest.mark.parametrize('text, value', [('true', True), ('False', False), ('1', True),
                                         ('no', False)])
def test_launch_flag_reads_launch_booleans(text, value):
    assert bringup.launch_flag(text) is value


def test_launch_flag_refuses_other_text():
    with pytest.raises(ValueError, match='maybe'):
        bringup.launch_flag('maybe')


def test_sim_params_sections_name_nodes_of_the_sim_launch_file():
    tree = parse(os.path.join(REPO, 'launch', 'sim.launch.py'))
    names = {node.value for assign in tree.body if isinstance(assign, ast.Assign)
             for node in ast.walk(assign.value) if isinstance(node, ast.Constant)}
    with open(os.path.join(REPO, 'config', 'sim.yaml'), encoding='utf-8') as stream:
        sections = set(yaml.safe_load(stream))
    assert all(section.startswith('/**/') for section in sections), sections  # any namespace
    nodes = {section[len('/**/'):] for section in sections}
    assert nodes <= names, nodes - names


def test_setup_installs_launch_config_package_xml_and_marker():
    source = open(os.path.join(REPO, 'setup.py'), encoding='utf-8').read()
    for needed in ("glob('launch/*.launch.py')", "glob('config/*.yaml')",
                   "glob('config/*.rviz')", "'package.xml'",
                   "'resource/' + package_name", 'extras_require'):
        assert needed in source, needed
    assert 'tests_require' not in source
    assert os.path.exists(os.path.join(REPO, 'resource', 'robot_dynamics'))
    cfg = open(os.path.join(REPO, 'setup.cfg'), encoding='utf-8').read()
    assert 'script_dir=$base/lib/robot_dynamics' in cfg
    assert 'install_scripts=$base/lib/robot_dynamics' in cfg


def required_imports():
    """Top-level third-party modules imported outside try/except ImportError."""
    modules = {}
    paths = glob.glob(os.path.join(REPO, 'robot_dynamics', '**', '*.py'), recursive=True)
    for path in paths + LAUNCH_FILES:
        tree = parse(path)
        optional = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try):
                for inner in node.body:
                    optional.update(id(n) for n in ast.walk(inner))
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split('.')[0]
                if top not in sys.stdlib_module_names and top != 'robot_dynamics':
                    modules.setdefault(top, os.path.relpath(path, REPO))
    return modules


def test_package_xml_declares_every_runtime_import():
    root = ElementTree.parse(os.path.join(REPO, 'package.xml')).getroot()
    assert root.get('format') == '3'
    assert root.find('export/build_type').text == 'ament_python'
    runtime = {e.text for tag in ('exec_depend', 'depend') for e in root.findall(tag)}
    missing = {ROSDEP_KEYS.get(m, m): where for m, where in required_imports().items()
               if ROSDEP_KEYS.get(m, m) not in runtime}
    assert not missing, missing


def sim_launch_module():
    spec = importlib.util.spec_from_file_location('sim_launch', SIM_LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('rviz, installed', [
    ('true', {'robot_state_publisher', 'rviz2'}), ('false', {'robot_state_publisher', 'rviz2'}),
    ('true', set()), ('true', {'rviz2'}),
])
def test_sim_launch_visual_actions_are_nodes_of_installed_packages_or_info_lines(
        rviz, installed):
    """The OpaqueFunction of sim.launch.py, evaluated as `ros2 launch` would: Node actions
    for what is installed (robot_description = the robot file's URDF, joints = `joints`,
    namespace and use_sim_time passed on), a LogInfo for each package that is not."""
    launch = pytest.importorskip('launch')
    pytest.importorskip('launch_ros')
    from launch_ros.actions import Node
    from launch_ros.utilities import evaluate_parameters
    context = launch.LaunchContext()
    context.launch_configurations.update({
        'rviz': rviz, 'namespace': 'arm1', 'use_sim_time': 'true', 'rviz_config': '/c/x.rviz',
        'robot_params_file': os.path.join(REPO, 'config', 'puma560.yaml')})
    actions = sim_launch_module().visual_nodes(context, installed=installed.__contains__)
    nodes = {a.node_package: a for a in actions if isinstance(a, Node)}
    infos = [a for a in actions if isinstance(a, launch.actions.LogInfo)]
    expected, skipped = bringup.visual_plan(rviz == 'true', installed.__contains__)
    assert sorted(nodes) == sorted(expected) and len(infos) == len(skipped)
    for node in nodes.values():
        node._perform_substitutions(context)
        assert node.expanded_node_namespace == '/arm1'
        # launch_ros keeps a Node's parameters private; evaluate them as it does itself
        parameters = {}
        for entry in evaluate_parameters(context, node._Node__parameters):
            parameters.update(entry)
        assert parameters['use_sim_time'] is True
        if node.node_package == 'robot_state_publisher':
            assert movable_joint_names(parameters['robot_description']) == [
                f'joint_{i}' for i in range(1, 7)]
        else:
            assert node._Node__arguments == ['-d', '/c/x.rviz']


LAUNCH_SCRIPT = """
import sys
import launch
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
service = launch.LaunchService()
service.include_launch_description(IncludeLaunchDescription(
    PythonLaunchDescriptionSource(sys.argv[1]),
    launch_arguments=[arg.split(':=', 1) for arg in sys.argv[2:]]))
sys.exit(service.run())
"""


def test_sim_launch_file_really_launches_and_the_demo_reaches_its_goal(tmp_path):
    """`ros2 launch robot_dynamics sim.launch.py rviz:=true` as a subprocess (LaunchService
    must own its main thread): the demo reaches its goal; robot_state_publisher and rviz2
    start, or, where they are not installed, are skipped with an info line each."""
    pytest.importorskip('launch')
    pytest.importorskip('launch_ros')
    from ament_index_python.packages import get_package_share_directory, PackageNotFoundError
    try:
        share = get_package_share_directory('robot_dynamics')
    except PackageNotFoundError:
        pytest.skip('robot_dynamics is not installed in an ament prefix (colcon build)')
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import Bool, String

    from ros_testing import RosHarness    # sets this process's ROS_DOMAIN_ID: inherited
    namespace = f'launch_test_{os.getpid()}'
    log = tmp_path / 'launch.log'
    harness = RosHarness()
    with open(log, 'w', encoding='utf-8') as output:
        process = subprocess.Popen(
            [sys.executable, '-c', LAUNCH_SCRIPT, os.path.join(share, 'launch', 'sim.launch.py'),
             f'namespace:={namespace}', 'rviz:=true'], stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        node = harness.add(__import__('rclpy').create_node('launch_probe',
                                                           context=harness.context))
        reached, status = [], []
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        prefix = f'/{namespace}/computed_torque_controller'
        node.create_subscription(Bool, f'{prefix}/goal_reached',
                                 lambda m: reached.append(m.data), latched)
        node.create_subscription(String, f'{prefix}/status',
                                 lambda m: status.append(m.data), latched)
        harness.spin_until(lambda: 'finished' in status and reached and reached[-1]
                           or process.poll() is not None,
                           'the demo move to reach its goal', wall_limit=120.0)
        assert process.poll() is None, log.read_text()
    finally:
        stop(process)
        harness.close()
    text = log.read_text()
    for name in ('plant', 'controller'):                 # Ctrl-C ended them in order
        assert f'[{name}-' in text and 'escalating' not in text, text
        assert re.search(rf'\[{name}-\d+\]: process has finished cleanly', text), text
    for package in bringup.OPTIONAL_PACKAGES:
        started = f'[{package}-' in text
        skipped = f'{package} is not installed: not started' in text
        assert started != skipped, (package, text)
        assert started == bringup.package_installed(package)


def stop(process):
    """SIGINT to the process group, as Ctrl-C in a terminal (launch then leaves the
    signalling of its nodes to the terminal), then SIGKILL to the group if needed."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30.0)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize('robot, own_demo', [('puma560.yaml', 'sim_puma560.yaml'),
                                             ('panda.yaml', None)])
def test_sim_launch_layers_the_derived_move_and_the_robots_own_demo_file(
        fake_launch, monkeypatch, tmp_path, robot, own_demo):
    """Any arm through sim.launch.py: each node gets one file layered from the robot file,
    the start pose and move derived from it, then the robot's own demo file if it has one,
    then the node settings (in that order: later files win); the move has the arm's joint
    count, and the PUMA's own demo file wins over the derived move."""
    import tempfile
    from robot_dynamics.parameters.layering import layered_parameters
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    module = fake_launch(SIM_LAUNCH)
    defaults = declared(SIM_LAUNCH)
    config = os.path.join(REPO, 'config')
    context = {**defaults, 'robot_params_file': os.path.join(config, robot),
               'sim_params_file': os.path.join(config, 'sim.yaml')}
    nodes = module.loop_nodes(context)
    def first_line(path):
        with open(path, encoding='utf-8') as stream:
            return stream.readline()
    derived = [path for path in (os.path.join(str(tmp_path), name)
                                 for name in os.listdir(tmp_path))
               if first_line(path).startswith('# the demo move derived from')]
    assert len(derived) == 1
    expected = [os.path.join(config, robot), derived[0]] + (
        [os.path.join(config, own_demo)] if own_demo else []) + [
        os.path.join(config, 'sim.yaml')]
    joints = 7 if robot == 'panda.yaml' else 6
    for node in nodes:
        name = node.kwargs['name']
        (layered,) = node.kwargs['parameters']
        header = first_line(layered)
        assert f'from {"; ".join(expected)} (later files win)' in header, (name, header)
        values = layered_parameters([layered], '/' + name)
        if name == 'demo_move':
            assert len(values['start_positions']) == len(values['goal_positions']) == joints
        if name == 'plant_simulator':
            assert len(values['initial_positions']) == joints
    with open(derived[0], encoding='utf-8') as stream:
        move = yaml.safe_load(stream)['/**']['ros__parameters']
    if own_demo:        # [LEE]'s start pose (90, 0, 90, 0, 0, 0) deg wins over the derived
        demo = layered_parameters(
            [p for n in nodes if n.kwargs['name'] == 'demo_move'
             for p in n.kwargs['parameters']], '/demo_move')
        assert demo['start_positions'] == pytest.approx([math.pi / 2, 0, math.pi / 2, 0, 0, 0])
        assert move['initial_positions'] != demo['start_positions']
