"""launch/ros2_control_sim.launch.py without ros2_control (not on PyPI): the <ros2_control>
block it generates for any preset (topic_based_ros2_control's TopicBasedSystem, effort
commands; position, velocity, effort states), the controller_manager file, and that the
nodes it starts meet where the real components would; then the closed loop over DDS with a
stand-in written here for what the real components do with the launch's own files:
TopicBasedSystem (reads the plant's JointState by name, publishes every joint's effort
command as a JointState each cycle, starting from the effort state's initial value),
joint_state_broadcaster (/joint_states) and effort_controllers/JointGroupEffortController
(Float64MultiArray in its `joints` order; an all-NaN or missing command writes nothing; it
keeps the last command)."""

import collections
import math
import os
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
import yaml

from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.common import bringup, ros2_control_sim
from test_launch_files import declared, fake_launch  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, 'config')
LAUNCH = os.path.join(REPO, 'launch', 'ros2_control_sim.launch.py')
UR5 = os.path.join(REPO, 'test', 'data', 'ur5.urdf')
PRESETS = ('puma560.yaml', 'panda.yaml', 'stanford.yaml', 'planar2.yaml', 'sasaki6.yaml')


def urdf_robot_file(tmp_path):
    """A robot file whose model is a URDF (the UR5 of test/data), no `joints`."""
    path = tmp_path / 'ur5_robot.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'robot': {
        'source': 'urdf', 'urdf_file': UR5, 'base_link': 'base_link',
        'tip_link': 'tool0'}}}}))
    return str(path)


def launch_nodes(load, robot_file, installed, monkeypatch, **arguments):
    """The actions of the launch file for `robot_file`, robot_state_publisher `installed`
    or not; {kind or package/executable: action}."""
    module = load(LAUNCH)
    monkeypatch.setattr(bringup, 'package_installed', lambda package: installed)
    defaults = declared(LAUNCH)
    context = {**defaults, 'robot_params_file': robot_file,
               'sim_params_file': os.path.join(CONFIG, 'ros2_control_sim.yaml'), **arguments}
    actions = module.nodes(context)
    found = {}
    for action in actions:
        kind = type(action).__name__
        key = (f"{action.kwargs['package']}/{action.kwargs['executable']}"
               if kind == 'Node' else kind)
        assert key not in found, key
        found[key] = action
    return found


def node_values(node):
    """{parameter: value} a launched node gets (files layered for its name, then dicts)."""
    from robot_dynamics.parameters.layering import layered_parameters
    values = {}
    for entry in node.kwargs['parameters']:
        values.update(entry if isinstance(entry, dict)
                      else layered_parameters([entry], '/' + node.kwargs['name']))
    return values


def description_of(found):
    publisher = found.get('robot_state_publisher/robot_state_publisher') or \
        found['robot_dynamics/robot_description']
    (parameters,) = publisher.kwargs['parameters']
    value = parameters['robot_description']
    return value.args[0] if type(value).__name__ == 'ParameterValue' else value


def hardware_block(urdf):
    robot = ElementTree.fromstring(urdf)
    (block,) = robot.findall('ros2_control')
    params = {p.get('name'): p.text for p in block.findall('hardware/param')}
    return robot, block, params


def controllers_of(found):
    (path,) = found['controller_manager/ros2_control_node'].kwargs['parameters']
    with open(path, encoding='utf-8') as stream:
        return yaml.safe_load(stream)


@pytest.mark.parametrize('preset', PRESETS + ('ur5',))
def test_the_ros2_control_block_and_the_nodes_meet_where_the_real_components_do(
        fake_launch, monkeypatch, tmp_path, preset):
    robot_file = urdf_robot_file(tmp_path) if preset == 'ur5' else os.path.join(CONFIG, preset)
    found = launch_nodes(fake_launch, robot_file, True, monkeypatch)
    plant = node_values(found['robot_dynamics/plant'])
    controller = node_values(found['robot_dynamics/controller'])
    model = RobotModel.from_yaml(robot_file)
    joints = plant.get('joints') or list(model.joint_names)
    assert len(joints) == model.n
    # the URDF: the robot's joints, a TopicBasedSystem over them in the same order
    robot, block, params = hardware_block(description_of(found))
    assert block.find('hardware/plugin').text == 'topic_based_ros2_control/TopicBasedSystem'
    assert float(params['trigger_joint_command_threshold']) < 0.0   # sends every cycle
    listed = block.findall('joint')
    stamp_joint = plant['stamp_joint']
    assert stamp_joint and controller['stamp_joint'] == stamp_joint   # the same name
    assert [j.get('name') for j in listed] == joints + [stamp_joint]
    *listed, stamp_block = listed
    assert set(joints) <= {j.get('name') for j in robot.findall('joint')}
    check_stamp_joint(robot, stamp_block, stamp_joint)
    initial = plant.get('initial_positions')
    for i, joint in enumerate(listed):
        assert [c.get('name') for c in joint.findall('command_interface')] == ['effort']
        states = {s.get('name'): s for s in joint.findall('state_interface')}
        assert list(states) == ['position', 'velocity', 'effort']
        start = float(states['position'].find('param').text)
        if initial is not None:
            assert start == pytest.approx(initial[i])
        else:
            assert model.position_min[i] <= start <= model.position_max[i]
        assert math.isnan(float(states['effort'].find('param').text))   # "no command"
    # the plant takes the plugin's commands and feeds its state topic
    plant_node = found['robot_dynamics/plant']
    assert plant['command_message'] == 'joint_state'
    assert plant['command_topic'] == params['joint_commands_topic']
    assert dict(plant_node.kwargs['remappings']) == {
        'joint_states': params['joint_states_topic']}
    assert plant['publish_clock'] is False and plant['publish_rate'] == 1000.0
    # controller_manager at 1 kHz: the broadcaster and the effort controller on these joints
    document = controllers_of(found)
    manager = document['controller_manager']['ros__parameters']
    assert manager['update_rate'] == 1000
    assert manager['joint_state_broadcaster']['type'] == \
        'joint_state_broadcaster/JointStateBroadcaster'
    assert manager['effort_controller']['type'] == \
        'effort_controllers/JointGroupEffortController'
    assert document['effort_controller']['ros__parameters']['joints'] == joints
    assert found['controller_manager/ros2_control_node'].kwargs['remappings'] == [
        ('~/robot_description', '/robot_description')]
    spawned = found['controller_manager/spawner'].kwargs['arguments']
    assert spawned[:2] == ['joint_state_broadcaster', 'effort_controller']
    # the controller commands that effort controller, one cycle per broadcast state
    assert controller['command_topic'] == '/effort_controller/commands'
    assert controller['control_mode'] == 'on_state'
    assert controller.get('joints', joints) == joints
    assert not controller.get('use_sim_time')
    demo = node_values(demo_after_release(found))
    assert len(demo['goal_positions']) == model.n


def check_stamp_joint(robot, block, name):
    """The stamp joint: in the URDF a continuous joint (ros2_control takes only joints
    the URDF has, and no fixed one) from the root link to a link of its own; in the block
    an effort command interface (the plugin sends a command for every joint of its block)
    and the three state interfaces, the effort starting at NaN ("no command" stays all
    NaN) and the position at 0 ("not measured yet")."""
    (joint,) = [j for j in robot.findall('joint') if j.get('name') == name]
    assert joint.get('type') == 'continuous'
    children = {j.find('child').get('link') for j in robot.findall('joint')}
    roots = [link.get('name') for link in robot.findall('link')
             if link.get('name') not in children]
    assert len(roots) == 1 and joint.find('parent').get('link') == roots[0]
    link = joint.find('child').get('link')
    assert [k.get('name') for k in robot.findall('link')].count(link) == 1
    assert [c.get('name') for c in block.findall('command_interface')] == ['effort']
    states = {s.get('name'): float(s.find('param').text)
              for s in block.findall('state_interface')}
    assert list(states) == ['position', 'velocity', 'effort']
    assert states['position'] == 0.0 and math.isnan(states['effort'])


def test_the_stamp_joint_hangs_on_the_root_of_any_urdf_and_needs_one_root():
    urdf = bringup.robot_description(os.path.join(CONFIG, 'planar2.yaml'))
    with_stamp = ros2_control_sim.description(urdf, ['joint_1', 'joint_2'],
                                              stamp_joint='t')
    robot, block, _ = hardware_block(with_stamp)
    check_stamp_joint(robot, block.findall('joint')[-1], 't')
    assert ros2_control_sim.root_link(urdf) == ros2_control_sim.root_link(with_stamp)
    plain = ros2_control_sim.description(urdf, ['joint_1', 'joint_2'])
    assert 'name="t"' not in plain and len(hardware_block(plain)[1].findall('joint')) == 2
    two_trees = '<robot name="r"><link name="a"/><link name="b"/></robot>'
    with pytest.raises(ValueError, match=r"2 root links \(\['a', 'b'\]\)"):
        ros2_control_sim.description(two_trees, ['j'], stamp_joint='t')


class Event:
    def __init__(self, text):
        self.text = text


def demo_after_release(found):
    """The demo move, started by the handler on the plant's output at its first 'brakes
    released' line and only then (once)."""
    assert 'robot_dynamics/demo_move' not in found
    handler = found['RegisterEventHandler'].args[0]
    assert handler.kwargs['target_action'] is found['robot_dynamics/plant']
    on_stderr = handler.kwargs['on_stderr']
    assert on_stderr(Event(b'[INFO] [plant_simulator]: 6 joints, rk4 at 1 ms')) is None
    (demo,) = on_stderr(Event(b'[INFO] [plant_simulator]: brakes released: effort command '
                              b'received'))
    assert on_stderr(Event(b'brakes released: effort command received')) is None
    assert demo.kwargs['executable'] == 'demo_move'
    return demo


def test_without_robot_state_publisher_the_package_serves_the_urdf(fake_launch, monkeypatch):
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), False,
                         monkeypatch)
    assert 'robot_state_publisher/robot_state_publisher' not in found
    assert 'not installed' in found['LogInfo'].kwargs['msg']
    _, block, _ = hardware_block(description_of(found))
    assert len(block.findall('joint')) == 7             # the arm's six, then the stamp joint


def test_update_rate_controllers_file_and_demo_arguments(fake_launch, monkeypatch, tmp_path):
    mine = tmp_path / 'controllers.yaml'
    mine.write_text('controller_manager:\n  ros__parameters:\n    update_rate: 250\n')
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True,
                         monkeypatch, controllers_file=str(mine), demo='false')
    assert found['controller_manager/ros2_control_node'].kwargs['parameters'] == [str(mine)]
    assert 'robot_dynamics/demo_move' not in found and 'RegisterEventHandler' not in found
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True,
                         monkeypatch, update_rate='500')
    assert controllers_of(found)['controller_manager']['ros__parameters'][
        'update_rate'] == 500


def test_the_realtime_arguments_go_to_the_plant_and_the_controller(fake_launch, monkeypatch):
    """realtime_* launch arguments: the plant's and the controller's realtime.* parameters
    (over the files); empty ones (the default) set nothing; a bad one is named."""
    given = {'realtime_priority': '80', 'realtime_lock_memory': 'true',
             'realtime_cpu_affinity': '1'}
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True,
                         monkeypatch, **given)
    realtime = {'realtime.priority': 80, 'realtime.lock_memory': True,
                'realtime.cpu_affinity': [1]}
    for node in ('robot_dynamics/plant', 'robot_dynamics/controller'):
        assert realtime.items() <= node_values(found[node]).items(), node
    manager = found['controller_manager/ros2_control_node'].kwargs
    assert manager['prefix'] == ros2_control_sim.manager_prefix(70)   # 10 below
    assert manager['exec_name'] == 'ros2_control_node'    # its log lines' label, not 'sh'
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True,
                         monkeypatch)
    assert not any(name.startswith('realtime.')
                   for name in node_values(found['robot_dynamics/plant']))
    assert 'prefix' not in found['controller_manager/ros2_control_node'].kwargs
    with pytest.raises(ValueError, match='realtime_priority'):
        launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True, monkeypatch,
                     realtime_priority='120')


def test_a_priority_in_the_files_raises_the_manager_below_the_lowest_node(fake_launch,
                                                                          monkeypatch,
                                                                          tmp_path):
    settings = tmp_path / 'realtime.yaml'
    settings.write_text(yaml.safe_dump({
        '/**/plant_simulator': {'ros__parameters': {'realtime': {'priority': 85}}},
        '/**/computed_torque_controller': {'ros__parameters': {'realtime.priority': 75}}}))
    files = os.path.join(CONFIG, 'ros2_control_sim.yaml') + ';' + str(settings)
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True,
                         monkeypatch, sim_params_file=files)
    assert found['controller_manager/ros2_control_node'].kwargs['prefix'] == \
        ros2_control_sim.manager_prefix(65)
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True,
                         monkeypatch, sim_params_file=files, realtime_priority='0')
    assert 'prefix' not in found['controller_manager/ros2_control_node'].kwargs


@pytest.mark.parametrize('priorities, expected', [
    ((80, 80), 70), ((None, 0), 0), ((90, 60), 50), ((5, None), 1), ((0, 11), 1)])
def test_the_manager_priority_is_ten_below_the_lowest_node_priority(priorities, expected):
    assert ros2_control_sim.manager_priority(priorities) == expected
    assert (ros2_control_sim.manager_prefix(expected) is None) == (expected == 0)


SCHEDULER = ('import os; print(os.sched_getscheduler(0), '
             'os.sched_getparam(0).sched_priority)')


def run_prefixed(prefix, path=None):
    """The scheduler policy and priority a program started with the launch `prefix` gets
    (and the prefix's stderr); `path`: a folder put first on PATH."""
    import shlex
    import subprocess
    import sys
    environment = dict(os.environ)
    if path is not None:
        environment['PATH'] = f'{path}{os.pathsep}{environment["PATH"]}'
    done = subprocess.run(shlex.split(prefix) + [sys.executable, '-c', SCHEDULER],
                          capture_output=True, text=True, env=environment, timeout=60)
    assert done.returncode == 0, done.stderr
    policy, priority = (int(v) for v in done.stdout.split())
    return policy, priority, done.stderr


def fake_chrt(folder, body):
    chrt = folder / 'chrt'
    chrt.write_text('#!/bin/sh\n' + body)
    chrt.chmod(0o755)
    return folder


def test_a_refused_sched_fifo_starts_the_manager_without_it_saying_so(tmp_path):
    """The system refusing SCHED_FIFO (chrt fails, as without CAP_SYS_NICE or an rtprio
    limit): the program still starts, with the normal scheduler, after one line."""
    policy, _, said = run_prefixed(ros2_control_sim.manager_prefix(70),
                                   fake_chrt(tmp_path, 'echo "chrt: Operation not permitted" '
                                             '>&2; exit 1\n'))
    assert policy == os.SCHED_OTHER
    assert said.strip() == ('controller_manager: SCHED_FIFO priority 70 refused (chrt); '
                            'running without it')


def test_a_permitted_sched_fifo_runs_the_manager_at_that_priority(tmp_path):
    """Where the system permits it (root here), the program runs at SCHED_FIFO 70; chrt is
    handed the program and its arguments unchanged."""
    calls = tmp_path / 'calls'
    policy, _, said = run_prefixed(ros2_control_sim.manager_prefix(70), fake_chrt(
        tmp_path, f'echo "$@" >> {calls}\nshift 2\nexec "$@"\n'))
    assert policy == os.SCHED_OTHER and not said      # the stand-in changes nothing
    first, second = calls.read_text().splitlines()
    assert first == '-f 70 true' and second.startswith('-f 70 ') and second.endswith(
        SCHEDULER)
    import subprocess
    try:
        permitted = subprocess.run(['chrt', '-f', '1', 'true'], capture_output=True,
                                   timeout=60).returncode == 0
    except OSError:
        permitted = False
    if not permitted:
        return              # refused here: the path above is the one this machine takes
    policy, priority, said = run_prefixed(ros2_control_sim.manager_prefix(70))
    assert (policy, priority, said) == (os.SCHED_FIFO, 70, '')


def test_the_description_refuses_a_wrong_number_of_initial_positions():
    with pytest.raises(ValueError, match='initial_positions: 2 values for 3 joints'):
        ros2_control_sim.description('<robot name="r"></robot>', ['a', 'b', 'c'], [0.0, 0.0])


# ------------------------------------------------------------------ the closed loop, DDS

class StandIn:
    """What the real components do, built from the launch's own files: the
    TopicBasedSystem of the <ros2_control> block, joint_state_broadcaster and
    effort_controller, in one node named effort_controller (so that the controller's
    joint-order check finds its `joints`), cycled by a timer. As TopicBasedSystem::read
    (one rclcpp::spin_some a cycle on a SensorDataQoS subscription), each cycle takes the
    oldest of at most 5 queued states, not the newest."""

    def __init__(self, context, urdf, controllers, period):
        from rclpy.node import Node
        from rclpy.parameter import Parameter
        from rclpy.qos import QoSProfile, qos_profile_sensor_data
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        _, block, params = hardware_block(urdf)
        self.block_joints = [j.get('name') for j in block.findall('joint')]
        joints = controllers['effort_controller']['ros__parameters']['joints']
        self.node = Node('effort_controller', context=context, parameter_overrides=[
            Parameter('joints', value=list(joints))])
        n = len(self.block_joints)
        # TopicBasedSystem: commands start at the effort state's initial_value
        self.commands = np.array([float(j.find("state_interface[@name='effort']/param").text)
                                  for j in block.findall('joint')])
        self.position = np.array([float(j.find("state_interface[@name='position']/param")
                                        .text) for j in block.findall('joint')])
        self.velocity, self.effort = np.zeros(n), np.zeros(n)
        self.latest_state = None
        self.queue = collections.deque(maxlen=5)     # SensorDataQoS: keep last 5
        self.queued_at_read = []                     # states waiting at each read
        self.latest_command = None
        self.sent = []
        self.to_block = [self.block_joints.index(name) for name in joints]
        self.JointState = JointState
        self.node.create_subscription(JointState, params['joint_states_topic'],
                                      self._on_state, qos_profile_sensor_data)
        self.node.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                      self._on_command, 10)
        self.broadcast = self.node.create_publisher(JointState, '/joint_states', 10)
        self.hardware = self.node.create_publisher(JointState, params['joint_commands_topic'],
                                                   QoSProfile(depth=1))
        self.node.create_timer(period, self.cycle)

    def _on_state(self, msg):
        self.queue.append(msg)

    def _on_command(self, msg):
        self.latest_command = list(msg.data)

    def cycle(self):
        self.queued_at_read.append(len(self.queue))
        if self.queue:                              # TopicBasedSystem::read, by name
            self.latest_state = self.queue.popleft()
        msg = self.latest_state
        if msg is not None:
            for i, name in enumerate(msg.name):
                if name in self.block_joints:
                    j = self.block_joints.index(name)
                    self.position[j] = msg.position[i]
                    if msg.velocity:
                        self.velocity[j] = msg.velocity[i]
                    if msg.effort:
                        self.effort[j] = msg.effort[i]
        self.broadcast.publish(self.JointState(       # joint_state_broadcaster
            name=self.block_joints, position=self.position.tolist(),
            velocity=self.velocity.tolist(), effort=self.effort.tolist()))
        command = self.latest_command                 # JointGroupEffortController::update
        if command is not None and not all(math.isnan(v) for v in command) \
                and len(command) == len(self.to_block):
            for k, value in enumerate(command):
                self.commands[self.to_block[k]] = value
        sent = self.JointState(name=self.block_joints, effort=self.commands.tolist())
        self.hardware.publish(sent)                   # TopicBasedSystem::write, threshold -1
        self.sent.append(sent)


def test_the_arm_moves_through_the_stand_in_stack_with_the_launch_files(
        fake_launch, monkeypatch):
    """PUMA 560, [LEE]'s move: before the controller runs the stand-in sends "no command"
    (every effort NaN) and the plant stays on its brakes where it started; then the
    controller holds the arm through joint_state_broadcaster and the effort controller,
    the demo move runs, and the plant's own state ends at the goal; the states' times
    reach the controller in the plant's stamp joint."""
    pytest.importorskip('rclpy')
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import Bool, String
    from robot_dynamics.nodes.controller import ComputedTorqueController
    from robot_dynamics.nodes.plant import PlantSimulator
    from robot_dynamics.nodes.sim import DemoMove
    from ros_testing import RosHarness
    found = launch_nodes(fake_launch, os.path.join(CONFIG, 'puma560.yaml'), True,
                         monkeypatch)

    def overrides(key, **changes):
        values = {**node_values(found[key]), **changes}
        return [Parameter(name, value=value) for name, value in values.items()]
    harness = RosHarness()
    try:
        # one Python thread runs every node here: the plant publishes at 250 Hz and the
        # stand-in cycles at 250 Hz instead of the launch's 1 kHz
        plant_node = found['robot_dynamics/plant']
        (remap,) = plant_node.kwargs['remappings']
        plant = harness.add(PlantSimulator(
            context=harness.context, parameter_overrides=overrides(
                'robot_dynamics/plant', publish_rate=250.0),
            cli_args=['--ros-args', '-r', f'{remap[0]}:={remap[1]}']))
        stand_in = StandIn(harness.context, description_of(found), controllers_of(found),
                           0.004)
        harness.add(stand_in.node)
        start = plant.q.copy()
        harness.spin_until(lambda: len(stand_in.sent) > 50 and stand_in.latest_state,
                           'the stand-in sending its first commands')
        assert all(math.isnan(v) for m in stand_in.sent for v in m.effort)
        assert plant.braked and plant._holding
        np.testing.assert_array_equal(plant.q, start)
        controller = harness.add(ComputedTorqueController(
            context=harness.context, parameter_overrides=overrides(
                'robot_dynamics/controller', state_timeout=0.5)))
        demo_node = demo_after_release(found)
        demo = harness.add(DemoMove(context=harness.context, parameter_overrides=[
            Parameter(name, value=value) for name, value in node_values(demo_node).items()]))
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        status, reached = [], []
        probe = harness.add(__import__('rclpy').create_node('probe', context=harness.context))
        probe.create_subscription(String, 'computed_torque_controller/status',
                                  lambda m: status.append(m.data), latched)
        probe.create_subscription(Bool, 'computed_torque_controller/goal_reached',
                                  lambda m: reached.append(m.data), latched)
        harness.spin_until(lambda: 'finished' in status and reached and reached[-1],
                           'the demo move to reach its goal through the stand-in stack')
        assert demo.sent and not plant.braked and not plant.stopped
        np.testing.assert_allclose(plant.q, demo.goal, atol=0.01)     # the plant's own state
        # each state's time came through the broadcaster in the stamp joint: the
        # controller took its age from there (here under a cycle of the stand-in)
        assert controller._measured is not None and 0.0 <= controller._age_mean < 0.5
    finally:
        harness.close()


def test_the_robot_description_executable_serves_the_urdf_to_late_subscribers():
    """Transient local, as robot_state_publisher serves it: a subscriber created after the
    publication still gets the URDF; a text without <robot> is refused naming the
    parameter."""
    pytest.importorskip('rclpy')
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from robot_dynamics.nodes.common.ros_params import ConfigurationError
    from robot_dynamics.nodes.robot_description import RobotDescriptionPublisher
    from ros_testing import RosHarness
    urdf = ros2_control_sim.description(
        bringup.robot_description(os.path.join(CONFIG, 'planar2.yaml')), ['joint_1', 'joint_2'])
    harness = RosHarness()
    try:
        with pytest.raises(ConfigurationError, match='robot_description'):
            RobotDescriptionPublisher(context=harness.context, parameter_overrides=[
                Parameter('robot_description', value='not xml')])
        harness.add(RobotDescriptionPublisher(context=harness.context, parameter_overrides=[
            Parameter('robot_description', value=urdf)]))
        harness.spin_for(10)
        got = []
        probe = harness.add(__import__('rclpy').create_node('late', context=harness.context))
        probe.create_subscription(String, '/robot_description', lambda m: got.append(m.data),
                                  QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                             durability=DurabilityPolicy.TRANSIENT_LOCAL))
        harness.spin_until(lambda: got, 'the URDF')
        assert got == [urdf]
    finally:
        harness.close()
