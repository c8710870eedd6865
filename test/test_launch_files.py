"""Launch files and packaging, checked statically (parsed with ast: every executable, file
and launch argument they reference exists; package.xml declares every third-party import;
setup.py installs what `ros2 launch` needs) and, where `launch`/`launch_ros` and a colcon
install are available, really launched (skipped cleanly otherwise: neither is on PyPI)."""

import ast
import glob
import importlib
import os
import sys
import threading
import xml.etree.ElementTree as ElementTree

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH_FILES = sorted(glob.glob(os.path.join(REPO, 'launch', '*.py')))
# rosdep keys of Python modules whose import name differs from the key
ROSDEP_KEYS = {'numpy': 'python3-numpy', 'yaml': 'python3-yaml'}


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
def test_launch_file_executables_are_console_scripts_of_this_package(path):
    scripts = console_scripts()
    nodes = list(calls(parse(path), 'Node'))
    assert nodes
    for node in nodes:
        assert keyword(node, 'package') == 'robot_dynamics'
        assert keyword(node, 'executable') in scripts, keyword(node, 'executable')


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
                  and node.value.endswith('.yaml')}
    assert referenced
    installed = {os.path.basename(p) for p in glob.glob(os.path.join(REPO, 'config', '*.yaml'))}
    assert referenced <= installed, referenced - installed


def test_sim_params_sections_name_nodes_of_the_sim_launch_file():
    names = {keyword(c, 'name') for c in calls(parse(os.path.join(
        REPO, 'launch', 'sim.launch.py')), 'Node')}
    with open(os.path.join(REPO, 'config', 'sim.yaml'), encoding='utf-8') as stream:
        sections = set(yaml.safe_load(stream))
    assert sections <= names | {'/**'}, sections - names


def test_setup_installs_launch_config_package_xml_and_marker():
    source = open(os.path.join(REPO, 'setup.py'), encoding='utf-8').read()
    for needed in ("glob('launch/*.launch.py')", "glob('config/*.yaml')", "'package.xml'",
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


def test_sim_launch_file_really_launches_and_the_demo_reaches_its_goal():
    launch = pytest.importorskip('launch')
    pytest.importorskip('launch_ros')
    from ament_index_python.packages import get_package_share_directory, PackageNotFoundError
    try:
        share = get_package_share_directory('robot_dynamics')
    except PackageNotFoundError:
        pytest.skip('robot_dynamics is not installed in an ament prefix (colcon build)')
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import Bool, String

    from ros_testing import RosHarness
    namespace = f'launch_test_{os.getpid()}'
    service = launch.LaunchService()
    service.include_launch_description(IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, 'launch', 'sim.launch.py')),
        launch_arguments={'namespace': namespace}.items()))
    thread = threading.Thread(target=service.run, daemon=True)
    harness = RosHarness()
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
        thread.start()
        harness.spin_until(lambda: 'finished' in status and reached and reached[-1],
                           'the demo move to reach its goal', wall_limit=120.0)
    finally:
        service.shutdown()
        thread.join(timeout=30.0)
        harness.close()
