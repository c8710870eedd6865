"""`sim`: plant + controller + the demo move in one process (one executor), for machines
without `ros2 launch`; also the `demo` executable (the demo move alone) used by
launch/sim.launch.py.

Any arm the package models runs: a preset (`--robot panda`) or any robot file
(`--params-file`, DH or URDF). On the PUMA 560 the demo move is [LEE] §5's
(90, 0, 90, 0, 0, 0)° → (45, 30, 0, 45, 60, 90)° (config/sim_puma560.yaml, the preset's
own demo file); on other arms it is derived from the arm's joint count and limits
(robot_dynamics.nodes.common.demo_plan). [LEE] gives no profile or duration; ours is the
quintic rest-to-rest profile (robot_dynamics.profiles.quintic) over 2 s, sent as one
JointTrajectory whose points carry exact positions, velocities and accelerations (so the
controller's quintic segments reproduce the profile exactly).

    python -m robot_dynamics.nodes.sim --duration 5     # ends by itself, prints a summary
    python -m robot_dynamics.nodes.sim --duration 5 --robot panda
    python -m robot_dynamics.nodes.sim --duration 3 --csv run.csv --plot run.png
    python -m robot_dynamics.nodes.sim --duration 5 --ros-args -p state_timeout:=0.2
    python -m robot_dynamics.nodes.sim --duration 5 --robot panda \
        --control-law gravity_compensation --push 0 5 0 --push-duration 0.1

--control-law runs the controller with another control law (doc/control-laws.md):
joint_impedance follows the demo move, cartesian_impedance moves the tool 5 cm up through
~/target_pose, gravity_compensation lets the arm float; --push FX FY FZ pushes the tip
through the plant's ~/external_wrench (robot_dynamics.nodes.common.law_demo).

The parameter files, layered per node (`parameter_files`; a later file wins, whatever
section a value is under, doc/parameters-layering.md): the shipped node settings
config/sim.yaml (defaults), the robot file, the demo move derived from it (a temporary
file), the robot's own demo file (sim_<name>.yaml beside the robot file <name>.yaml, if
there is one: config/sim_puma560.yaml), --sim-params-file (instead of config/sim.yaml),
the --ros-args --params-file files. rcl gets one file with a section per node
(`layering.write_nodes_file`). A wrong value is named with the file it came from; a key
no node has, with the closest name (as the node executables do).

`--ros-args` ends the sim options; its `-p name:=value` (or `-p node:name:=value` for one
node) wins over the parameter files; a `-p` that no node has is named in a warning.
Another process publishing on a topic the simulation listens to (e.g. a robot's
/joint_states on the same ROS_DOMAIN_ID) is named in one warning per topic: its messages
would reach the simulation. A second simulation on the ROS domain is refused in one line
(two simulations on one domain drive each other's controllers): one of this machine by
the domain's lock file (`runner.lock_domain`, held for the run; two started at the same
moment included), one elsewhere (a /clock or /joint_states publisher outside this
process) by DOMAIN_CHECK_WAIT s of DDS discovery before the start. A robot file whose
mass matrix is singular (a link moving no mass: `model_checks`) is refused by the plant
before the run, naming the link.

Ctrl-C (or SIGTERM) ends the run (with or without --duration): the tracking summary,
--csv and --plot are still written for the run so far; exit status 128 + the signal (130
for Ctrl-C) and one line. With --csv or --plot the summary is over the recorded cycles
(the CSV's rows).

--csv writes the run (time, per joint q, q_ref, error, effort) as recorded from the
controller's ~/feedback, ~/reference, ~/error and ~/output; --plot draws reference vs
measured position and the tracking error per joint (needs matplotlib: the `plot` extra);
--plot-layout overview draws all joints in two panels instead (the README's figure).
"""

import argparse
import csv
import functools
import glob
import math
import os
import signal
import sys
import time

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.nodes.common import control_laws, demo_plan
from robot_dynamics.nodes.common.law_demo import LawDemo
from robot_dynamics.parameters.layering import EVERY_NODE, node_fqn, write_nodes_file
from robot_dynamics.parameters.params_file import (check_params_files, error_source,
                                                   node_name_of, node_sections,
                                                   ParamsFileError)
from robot_dynamics.nodes.common.runner import (domain_in_use_message, lock_domain,
                                              ros_session, StartRefused,
                                              warn_unknown_parameters)
from robot_dynamics.nodes.common.ros_params import (closest_name, ConfigurationError, declare,
                                                   validated)
from robot_dynamics.nodes.common.throttled_log import log_throttled
from robot_dynamics.nodes.common.trajectory_client import trajectory_message
from robot_dynamics.trajectories.profiles import sample_profile

LEE_START_DEG = (90.0, 0.0, 90.0, 0.0, 0.0, 0.0)
LEE_GOAL_DEG = (45.0, 30.0, 0.0, 45.0, 60.0, 90.0)
MOVE_DURATION = 2.0      # s, quintic
MOVE_POINTS = 20         # trajectory points (exact q, q̇, q̈ of the profile at each)
# --csv/--plot: the controller's state topics, recorded per control cycle (same stamp)
RECORDED_TOPICS = ('feedback', 'reference', 'error', 'output')    # q, q_ref, error, effort
RECORD_DEPTH = 1000
CSV_QUANTITIES = ('q', 'q_ref', 'error', 'effort')
PLOT_LAYOUTS = ('joints', 'overview')
FOREIGN_CHECK_PERIOD = 1.0   # wall s between looks for other processes' publishers
DOMAIN_CHECK_WAIT = 1.0      # wall s of DDS discovery before the start: another simulation?
SIMULATION_TOPICS = ('/clock', '/joint_states')   # published by a simulation (or a robot)
SIM_NODES = ('plant_simulator', 'computed_torque_controller', 'demo_move')  # with parameters


def config_path(name):
    """config/<name> of the installed package, or of this source tree."""
    try:
        from ament_index_python.packages import get_package_share_directory
        path = os.path.join(get_package_share_directory('robot_dynamics'), 'config', name)
        if os.path.exists(path):
            return path
    except Exception:  # not installed in an ament prefix: use the source tree
        pass
    return os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, 'config', name)


def is_robot_file(path):
    """Whether the parameter file at `path` has a robot block (robot.joint_types of a DH
    arm, or robot.source) under "/**": a robot, not node settings (config/sim*.yaml) or
    another program's file (config/ros2_control_effort*.yaml)."""
    return any(name in ('robot.joint_types', 'robot.source')
               for name in node_sections(path).get(EVERY_NODE, ()))


def robot_presets():
    """The robot presets of config/ by name ('puma560', 'panda', ...): the files with a
    robot block (`is_robot_file`), not a robot's own demo file (sim_<name>.yaml)."""
    folder = os.path.dirname(config_path('puma560.yaml'))
    return sorted(os.path.splitext(os.path.basename(path))[0]
                  for path in glob.glob(os.path.join(folder, '*.yaml'))
                  if not os.path.basename(path).startswith('sim') and is_robot_file(path))


def parameter_files(args, user_files=()):
    """(robot file, the files in layering order, the derived file to remove afterwards or
    None), a later file winning: the shipped node settings config/sim.yaml (defaults for
    what no other file sets), the robot file, the demo move derived from it, the robot's
    own demo file (if any), --sim-params-file (a user's node settings, instead of
    config/sim.yaml), then `user_files` (the --ros-args --params-file files, in order)."""
    robot_file = args.params_file or config_path(f'{args.robot or "puma560"}.yaml')
    derived = demo_plan.write_derived_parameters(robot_file)
    own_demo = demo_plan.robot_demo_file(robot_file)
    files = ([] if args.sim_params_file else [config_path('sim.yaml')]) + [robot_file] \
        + [path for path in (derived, own_demo) if path] \
        + ([args.sim_params_file] if args.sim_params_file else []) + list(user_files)
    return robot_file, files, derived


class DemoMove(Node):
    """Sends the demo move once the controller holds its start position (~/status). Without
    a `joints` parameter (robot.source urdf) it takes the controller's, from ~/reference.
    `start_positions` and `goal_positions` have no default: `sim` and sim.launch.py give
    them (derived from the robot, or the robot's own demo file)."""

    parameter_table = 'demo_move'     # robot_dynamics.parameters.TABLES

    def __init__(self, **kwargs):
        super().__init__('demo_move', **kwargs)
        self.joints = tuple(declare(self, 'joints') or ())
        controller = validated(self, 'controller', declare(self, 'controller'))
        start = declare(self, 'start_positions')
        goal = declare(self, 'goal_positions')
        for name, value in (('start_positions', start), ('goal_positions', goal)):
            if value is None:
                raise ConfigurationError(
                    f'{name}: not given (sim and launch/sim.launch.py derive the demo move '
                    'from the robot file; the demo_move node alone needs start_positions '
                    'and goal_positions, one value per joint)')
        n = len(self.joints) if self.joints else (
            len(start) if isinstance(start, (list, tuple)) else 0)
        self.start = np.array(validated(self, 'start_positions', start, n))
        self.goal = np.array(validated(self, 'goal_positions', goal, n))
        self.duration = validated(self, 'move_duration',
                                  declare(self, 'move_duration', MOVE_DURATION))
        self.sent = False
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._publisher = self.create_publisher(JointTrajectory,
                                                f'{controller}/joint_trajectory', 10)
        self.create_subscription(String, f'{controller}/status', self._on_status, latched)
        self._reference = None if self.joints else self.create_subscription(
            JointState, f'{controller}/reference', self._on_reference, 10)
        self._holding = False
        self.create_timer(0.05, self._maybe_send)

    def _on_reference(self, msg):
        if self.joints:
            return
        if len(msg.name) != len(self.goal):
            log_throttled(self, 'error',
                          f'goal_positions: {len(self.goal)} values, the controller has '
                          f'{len(msg.name)} joints', 10.0)
            return
        self.joints = tuple(msg.name)
        self.get_logger().info(f'joints from the controller: {list(self.joints)}')

    def _on_status(self, msg):
        self._holding = msg.data == 'holding'
        self._maybe_send()

    def _maybe_send(self):
        if self.sent or not self._holding or not self.joints \
                or self._publisher.get_subscription_count() == 0:
            return
        command = sample_profile('quintic', self.start, self.goal, self.duration, MOVE_POINTS,
                                 self.joints)
        self._publisher.publish(trajectory_message(command))
        self.sent = True
        self.get_logger().info(
            f'sent the demo move to {self.goal.round(4).tolist()} (rad | m), quintic over '
            f'{self.duration:g} s')


class TrackingSummary(Node):
    """Max and RMS of the controller's ~/error position, per joint, while it is moving;
    with `record`, also every control cycle's q, q_ref, error and effort (`table`)."""

    def __init__(self, controller='computed_torque_controller', record=False, **kwargs):
        super().__init__('tracking_summary', **kwargs)
        self.max = None
        self.sum_squares = None
        self.count = 0
        self.names = []
        self.recording = record
        self.move = None      # (start, goal, duration) of the demo move, for the plot title
        self.records = {}     # stamp [ns] -> {'feedback' | 'reference' | ...: values}
        self.create_subscription(JointState, f'{controller}/error', self._on_error,
                                 RECORD_DEPTH)
        for topic in RECORDED_TOPICS if record else ():
            if topic != 'error':     # heard by _on_error
                self.create_subscription(JointState, f'{controller}/{topic}',
                                         functools.partial(self._record, topic),
                                         RECORD_DEPTH)

    def _record(self, topic, msg):
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        values = msg.effort if topic == 'output' else msg.position
        self.records.setdefault(stamp, {})[topic] = np.array(values, dtype=float)

    def table(self):
        """(t [s], q, q_ref, error, effort) of the control cycles heard on all four topics,
        in time order; each array (cycles, n)."""
        stamps = sorted(k for k, v in self.records.items() if len(v) == len(RECORDED_TOPICS))
        t = np.array(stamps, dtype=float) * 1e-9
        n = len(self.names)
        columns = [np.array([self.records[k][topic] for k in stamps]).reshape(len(stamps), n)
                   for topic in RECORDED_TOPICS]
        return (t, *columns)

    def _on_error(self, msg):
        e = np.abs(np.array(msg.position))
        if self.max is None:
            self.names = list(msg.name)
            self.max = np.zeros_like(e)
            self.sum_squares = np.zeros_like(e)
        self.max = np.maximum(self.max, e)
        self.sum_squares += e * e
        self.count += 1
        if self.recording:
            self._record('error', msg)

    def rms(self):
        return np.sqrt(self.sum_squares / max(self.count, 1))

    def statistics(self):
        """(cycles, max |e|, RMS) per joint as `report` prints them: recording, over the
        cycles of `table` (the rows of --csv: a run stopped between a cycle's ~/error and
        its other topics has that cycle in neither), else over every ~/error heard."""
        if self.recording and self.max is not None:
            t, _, _, error, _ = self.table()
            if len(t):
                e = np.abs(error)
                return len(t), e.max(axis=0), np.sqrt(np.mean(e * e, axis=0))
        return self.count, self.max, self.rms()

    def report(self):
        if self.max is None:
            return 'no tracking error received'
        count, peaks, rms_values = self.statistics()
        width = max([10] + [len(name) for name in self.names])
        lines = [f'tracking error over {count} control cycles (rad or m):',
                 f'{"joint":>{width}} {"max |e|":>12} {"RMS":>12}']
        for name, peak, rms in zip(self.names, peaks, rms_values):
            lines.append(f'{name:>{width}} {peak:12.3e} {rms:12.3e}')
        lines.append(f'{"all":>{width}} {float(np.max(peaks)):12.3e}')
        return '\n'.join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='sim', description='Closed-loop demo on any arm: plant + computed-torque '
        'controller + a demo move, one process, simulated time (the PUMA 560 with [LEE] §5\'s '
        'move by default).')
    robot = parser.add_mutually_exclusive_group()
    robot.add_argument('--robot', choices=robot_presets(), default=None,
                       help='a robot preset of config/ (default: puma560)')
    robot.add_argument('--params-file', default=None,
                       help='robot parameter file, DH or URDF (default: config/puma560.yaml)')
    parser.add_argument('--sim-params-file', default=None,
                        help='node settings instead of config/sim.yaml (which comes first, '
                        'as defaults), layered after the robot file, the derived demo move '
                        'and the robot\'s own demo file; --ros-args --params-file files '
                        'come last')
    parser.add_argument('--duration', type=float, default=None,
                        help='stop after this many simulated seconds (default: run until '
                        'Ctrl-C); either way a tracking summary is printed')
    parser.add_argument('--control-rate', type=float, default=None,
                        help='plant /joint_states rate = control rate [Hz] (default 100)')
    parser.add_argument('--integration-step', type=float, default=None,
                        help='plant integration step [s] (default 0.001)')
    parser.add_argument('--move-duration', type=float, default=None,
                        help='duration of the quintic demo move [s] (default: the parameter '
                        f'files\' move_duration, {MOVE_DURATION:g} in config/sim.yaml)')
    parser.add_argument('--real-time-factor', type=float, default=None,
                        help='simulated s per wall s at most; 0 = as fast as possible '
                        '(default 1, or 0 with --duration)')
    parser.add_argument('--control-law', choices=control_laws.LAWS, default=None,
                        help='the controller\'s control_law (default: computed_torque): '
                        'joint_impedance follows the demo move, cartesian_impedance moves '
                        'the tool 5 cm up, gravity_compensation lets the arm float')
    parser.add_argument('--push', type=float, nargs=3, metavar=('FX', 'FY', 'FZ'),
                        default=None, help='a force on the tip [N, base frame] through the '
                        f"plant's ~/external_wrench from {0.5:g} s of simulated time")
    parser.add_argument('--push-duration', type=float, default=None,
                        help='release the push after this many seconds (default: never)')
    parser.add_argument('--csv', metavar='PATH', default=None,
                        help='write the run as CSV: time [s], per joint q, q_ref, error '
                        '[rad | m] and effort [N m | N], one row per control cycle')
    parser.add_argument('--plot', metavar='PATH', default=None,
                        help='draw reference vs measured position and the tracking error per '
                        'joint into an image (PNG, SVG, PDF by extension; needs matplotlib)')
    parser.add_argument('--plot-layout', choices=PLOT_LAYOUTS, default='joints',
                        help='joints: a row of two plots per joint (default); overview: all '
                        'joints in two panels, positions and tracking errors')
    parser.add_argument('ros_args', nargs=argparse.REMAINDER,
                        help='--ros-args ... passed to rclpy (-p values win over the '
                        'parameter files)')
    argv = list(argv)
    ros = []
    for marker in ('--ros-args', '--'):          # argparse's REMAINDER misses a leading '--x'
        if marker in argv:
            at = argv.index(marker)
            argv, ros = argv[:at], argv[at:] + ros
            break
    args = parser.parse_args(argv)
    args.ros_args = list(args.ros_args) + ros
    return args


def parameter_items(ros_args):
    """[(node name or None, parameter, value)] of the ``-p`` / ``--param`` items of
    `ros_args` (after ``--ros-args``), values read as rcl reads them (YAML); ``-p
    node:name:=value`` names the node."""
    from robot_dynamics.parameters.params_file import command_line_items
    items = []
    for node, name, value, _ in command_line_items(ros_args):
        if isinstance(value, list) and {type(v) for v in value} == {int, float}:
            value = [float(v) for v in value]      # as a list of doubles
        items.append((node, name, value))
    return items


def command_line_overrides(items, node_name):
    """The `parameter_items` for node `node_name` as Parameters."""
    return [Parameter(name, value=value) for node, name, value in items
            if node in (None, node_name)]


def build_nodes(args, context=None):
    """(plant, controller, demo, summary) with the sim settings; raises ConfigurationError.
    The command line's ``-p`` values (`args.ros_args`) are given to each node as overrides,
    so they win over config/sim.yaml's node sections (rcl would apply those in the order
    the files name the nodes, which may put the file last)."""
    items = parameter_items(['--ros-args', *getattr(args, 'ros_args', ())])
    plant_overrides = []
    if args.control_rate is not None:
        plant_overrides.append(Parameter('publish_rate', value=float(args.control_rate)))
    if args.integration_step is not None:
        plant_overrides.append(Parameter('integration_step', value=args.integration_step))
    rtf = args.real_time_factor
    if rtf is None:
        rtf = 0.0 if args.duration is not None else 1.0
    plant_overrides.append(Parameter('real_time_factor', value=float(rtf)))
    sim_time = [Parameter('use_sim_time', value=True)]
    rcl_args = getattr(args, 'source_args', None) or getattr(args, 'rcl_args', None) \
        or ['--ros-args', *getattr(args, 'ros_args', ())]   # the files as the user gave them
    nodes = []

    def add(node_class, name, overrides):
        try:
            nodes.append(node_class(context=context, parameter_overrides=overrides
                                    + command_line_overrides(items, name)))
        except ConfigurationError as error:     # named with the file the value came from
            source = error_source(rcl_args, name, error)
            raise ConfigurationError(f'{error} ({name}{source.replace(" (", ", ")}'
                                     if source else str(error)) from None
    try:
        add(PlantSimulator, 'plant_simulator', plant_overrides)
        law = getattr(args, 'control_law', None)
        add(ComputedTorqueController, 'computed_torque_controller', sim_time + (
            [Parameter('control_law', value=law)] if law else []))
        add(DemoMove, 'demo_move', sim_time + ([] if getattr(args, 'move_duration', None)
                                              is None else [Parameter(
                                                  'move_duration',
                                                  value=float(args.move_duration))]))
        law = nodes[1].control_law
        if law not in control_laws.JOINT_REFERENCE_LAWS:
            nodes[-1].sent = True           # no joint move under this law
        nodes.append(TrackingSummary(context=context, record=bool(
            getattr(args, 'csv', None) or getattr(args, 'plot', None))))
        push = getattr(args, 'push', None)
        if law != 'computed_torque' or push is not None:
            nodes[-1].law_demo = LawDemo(law, push, getattr(args, 'push_duration', None),
                                         context=context, parameter_overrides=sim_time)
        refuse_timer_in_lockstep(*nodes[:2])
    except Exception:
        for node in nodes:
            node.destroy_node()
        raise
    warn_unknown(nodes, items, rcl_args)
    return tuple(nodes)


def warn_unknown(nodes, items, args):
    """The warnings the node executables give, for the simulation's nodes: a parameter
    file key in a section for a node that the node lacks, a "/**" key no node of the
    package has (`runner.warn_unknown_parameters`, from the files as given in `args`), and
    a `-p` that no node of the simulation has (or, `-p node:name`, not that node); each
    with the closest name."""
    files_only = [a for i, a in enumerate(args)
                  if not (a in ('-p', '--param') or (i and args[i - 1] in ('-p', '--param')))]
    for node in nodes[:len(SIM_NODES)]:
        if getattr(node, 'model', True) is not None:     # its parameters are declared
            warn_unknown_parameters(node, files_only)
    for node, name, _ in items:
        owners = [n for n in nodes[:len(SIM_NODES)] if node in (None, n.get_name())]
        if any(n.has_parameter(name) for n in owners):
            continue
        known = [known for n in owners for known in n._parameters]
        closest = closest_name(name, known)
        nodes[0].get_logger().warning(
            f'-p {node + ":" if node else ""}{name}: '
            + (f'node {node} has no such parameter' if node else
               'no node of the simulation (plant_simulator, computed_torque_controller, '
               'demo_move) has this parameter')
            + (f' (closest: {closest})' if closest else '') + '; ignored')


def refuse_timer_in_lockstep(plant, controller):
    """ConfigurationError for control_mode timer with a lock-step plant: the plant
    advances its clock only when a command answers its state, and a timer on that clock
    waits for the clock to advance; neither would ever move."""
    if getattr(controller, 'control_mode', None) == 'timer' \
            and getattr(plant, 'publish_clock', False) and getattr(plant, 'lockstep', False):
        raise ConfigurationError(
            'control_mode: timer cannot run in lock-step (the plant advances /clock only '
            'when a command answers its state; a timer on that clock would wait for ever): '
            'use control_mode on_state, or run the plant\'s clock free: --real-time-factor 1 '
            '--ros-args -p plant_simulator:lockstep:=false')


def other_simulations(context, wait=None, running=None):
    """The SIMULATION_TOPICS that processes on this ROS domain already publish (another
    simulation, or a robot), after up to `wait` wall s of discovery (default
    DOMAIN_CHECK_WAIT; less if found)."""
    wait = DOMAIN_CHECK_WAIT if wait is None else wait
    if os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE', '').upper() == 'OFF' or wait <= 0:
        return []            # nothing outside this process can be seen, or be disturbed
    probe = Node('sim_domain_check', context=context, start_parameter_services=False,
                 enable_rosout=False)
    try:
        deadline = time.monotonic() + wait
        while True:
            found = [topic for topic in SIMULATION_TOPICS if probe.count_publishers(topic)]
            if found or time.monotonic() >= deadline or (running and not running()):
                return found
            time.sleep(0.02)
    finally:
        probe.destroy_node()


def foreign_publishers(nodes):
    """{topic: count} of publishers outside `nodes` on the topics the nodes subscribe to
    (another process on the same ROS domain whose messages would reach the simulation)."""
    own, subscribed = {}, set()
    for node in nodes:
        for publisher in node.publishers:
            own[publisher.topic_name] = own.get(publisher.topic_name, 0) + 1
        subscribed.update(subscription.topic_name for subscription in node.subscriptions)
    subscribed.discard('/parameter_events')
    counts = {topic: nodes[0].count_publishers(topic) - own.get(topic, 0)
              for topic in sorted(subscribed)}
    return {topic: count for topic, count in counts.items() if count > 0}


def _warn_foreign(node, nodes, warned):
    for topic, count in foreign_publishers(nodes).items():
        if topic not in warned:
            warned.add(topic)
            node.get_logger().warning(
                f'{topic}: {count} publisher{"s" if count > 1 else ""} outside this simulation '
                f'(another process on ROS_DOMAIN_ID {os.environ.get("ROS_DOMAIN_ID", "0")}): '
                'its messages reach the simulation; give it a ROS_DOMAIN_ID of its own, or '
                'set ROS_AUTOMATIC_DISCOVERY_RANGE=OFF to keep the simulation to itself')


def run(args, context=None, wall_limit=None, running=None):
    """Spin the nodes until `args.duration` simulated seconds (or Ctrl-C: `running()`
    turns false, or `wall_limit` wall seconds); returns (summary node, plant node), both
    already destroyed."""
    plant, controller, demo, summary = build_nodes(args, context)
    summary.move = (demo.start, demo.goal, demo.duration)
    start = time.monotonic()
    nodes = (plant, controller, demo, summary) + tuple(
        node for node in [getattr(summary, 'law_demo', None)] if node is not None)
    executor = SingleThreadedExecutor(context=context)
    for node in nodes:
        executor.add_node(node)
    warned, checked = set(), start
    try:
        while rclpy.ok(context=context) and not plant.stopped and (
                running is None or running()):
            if args.duration is not None and plant.sim_time >= args.duration:
                break
            now = time.monotonic()
            if wall_limit is not None and now - start > wall_limit:
                break
            if now - checked >= FOREIGN_CHECK_PERIOD:
                checked = now
                _warn_foreign(plant, nodes, warned)
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass                  # Ctrl-C: the run so far is still summarised and written
    finally:
        executor.shutdown()
        for node in nodes:
            node.destroy_node()
    return summary, plant


def write_csv(path, names, t, q, q_ref, error, effort):
    """One row per control cycle: time, then q, q_ref, error, effort for every joint."""
    header = ['time'] + [f'{quantity}_{name}' for quantity in CSV_QUANTITIES for name in names]
    with open(path, 'w', newline='', encoding='utf-8') as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        for row in zip(t, q, q_ref, error, effort):
            writer.writerow([float(row[0])] + [float(v) for block in row[1:] for v in block])


def matplotlib_figure():
    """matplotlib's Figure class (no pyplot, no display needed), or None if not installed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def plot_description(robot_file, joint_types, move):
    """(title, unit per joint) of the --plot figure: which robot and which move it shows.
    `move` = (start, goal, duration) of the demo move, None if unknown; `joint_types`
    None if unknown (units 'rad | m')."""
    units = (['m' if kind == 'prismatic' else 'rad' for kind in joint_types]
             if joint_types else None)
    title = os.path.basename(robot_file)
    if move is not None and units is not None:
        start, goal, duration = move

        def pose(values):
            return '(' + ', '.join(f'{v:.3g} m' if unit == 'm' else f'{math.degrees(v):.4g}°'
                                   for v, unit in zip(values, units)) + ')'
        lee = (len(start) == len(LEE_START_DEG)
               and np.allclose(np.degrees(start), LEE_START_DEG)
               and np.allclose(np.degrees(goal), LEE_GOAL_DEG))
        title += (f': {"[LEE] §5 move" if lee else "move"} {pose(start)} → {pose(goal)}, '
                  f'quintic over {duration:g} s')
    return title, units or ['rad | m'] * (len(joint_types) if joint_types else 0)


def write_plot(path, names, t, q, q_ref, error, title=None, units=None):
    """Per joint: reference and measured position (left), tracking error q_ref - q (right).
    `title`: what the run shows (robot, move); `units`: per joint 'rad' or 'm' (default
    'rad | m'). Returns the matplotlib Figure."""
    n = len(names)
    units = list(units) if units else ['rad | m'] * n
    figure = matplotlib_figure()(figsize=(10.0, 1.6 + 1.7 * n), layout='constrained')
    axes = figure.subplots(n, 2, sharex=True, squeeze=False)
    for i, name in enumerate(names):
        position, tracking = axes[i]
        position.plot(t, q_ref[:, i], color='0.75', linewidth=4.0, label='reference')
        position.plot(t, q[:, i], color='tab:blue', linewidth=1.2, label='measured')
        position.set_ylabel(f'{name}\n[{units[i]}]')
        tracking.plot(t, error[:, i], color='tab:red')
        tracking.axhline(0.0, color='0.8', linewidth=0.8)
        tracking.ticklabel_format(axis='y', style='sci', scilimits=(-2, 2))
        tracking.set_ylabel(f'[{units[i]}]')
    common = units[0] if len(set(units)) == 1 else 'rad | m'
    axes[0, 0].set_title(f'position: reference and measured [{common}]')
    axes[0, 0].legend(loc='best', fontsize='small')
    axes[0, 1].set_title(f'tracking error q_ref - q [{common}]')
    for axis in axes[-1]:
        axis.set_xlabel('time [s]')
    if title:
        figure.suptitle(title)
    figure.savefig(path, dpi=80)
    return figure


def write_overview_plot(path, names, t, q, q_ref, error, title=None, units=None):
    """All joints in two panels: reference (thick, light) and measured (thin) position
    (left), tracking error q_ref - q in thousandths of the joint's unit, mrad or mm
    (right); one colour per joint. `title`, `units` as for `write_plot`. Sized to be read
    at a web page's width (1000 px). Returns the matplotlib Figure."""
    n = len(names)
    units = list(units) if units else ['rad | m'] * n
    common = units[0] if len(set(units)) == 1 else 'rad | m'
    milli = {'rad': 'mrad', 'm': 'mm'}.get(common, 'mrad | mm')
    figure = matplotlib_figure()(figsize=(10.0, 4.0), layout='constrained')
    position, tracking = figure.subplots(1, 2, sharex=True)
    colours = [f'C{i % 10}' for i in range(n)]
    for i, name in enumerate(names):
        position.plot(t, q_ref[:, i], color=colours[i], alpha=0.3, linewidth=5.0)
        position.plot(t, q[:, i], color=colours[i], linewidth=1.3)
        tracking.plot(t, 1e3 * error[:, i], color=colours[i], linewidth=1.3, label=name)
    tracking.axhline(0.0, color='0.7', linewidth=0.8)
    position.set_ylabel(f'joint position [{common}]')
    tracking.set_ylabel(f'tracking error q_ref − q [{milli}]')
    position.set_title('reference and measured position')
    tracking.set_title('tracking error')
    for axis in (position, tracking):
        axis.set_xlabel('time [s]')
        axis.grid(True, color='0.92')
    # legend proxies: empty lines drawn in the reference's and the measurement's styles
    proxies = (position.plot([], [], color='0.5', alpha=0.4, linewidth=5.0)
               + position.plot([], [], color='0.2', linewidth=1.3))
    position.legend(handles=proxies,
                    labels=['reference', 'measured'], loc='best', fontsize='medium')
    tracking.legend(loc='center left', bbox_to_anchor=(1.01, 0.5), fontsize='medium',
                    frameon=False)
    if title:
        figure.suptitle(title)
    figure.savefig(path, dpi=100)
    return figure


def output_problem(path, plot=False):
    """Why `path` cannot be written (None if it can): checked before the run. A missing
    folder is no problem if it can be made (`write_outputs` makes it)."""
    directory = os.path.dirname(os.path.abspath(path))
    existing = directory
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f'{existing} is not a directory'
    if os.path.isdir(path):
        return 'is a directory'
    if not os.access(existing, os.W_OK):
        return f'directory {existing} is not writable'
    if plot:
        extension = os.path.splitext(path)[1].lstrip('.').lower()
        formats = matplotlib_figure()().canvas.get_supported_filetypes()
        if extension not in formats:
            return (f'unknown image format {extension!r} (use one of '
                    f'{", ".join(sorted(formats))})')
    return None


def write_outputs(args, summary, plant=None):
    """--csv and --plot from the recorded run; False (after one message) if nothing was
    recorded. `plant` (its model) gives the plot its units."""
    t, q, q_ref, error, effort = summary.table()
    if not len(t):
        print('no control cycles recorded: no --csv/--plot output written', file=sys.stderr)
        return False
    for path in (args.csv, args.plot):
        if path:       # a missing folder is made, as `identify` does
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if args.csv:
        write_csv(args.csv, summary.names, t, q, q_ref, error, effort)
        print(f'wrote {len(t)} control cycles to {args.csv}')
    if args.plot:
        model = getattr(plant, 'model', None)
        title, units = plot_description(args.params_file or config_path('puma560.yaml'),
                                        model.joint_types if model else None, summary.move)
        draw = write_overview_plot if getattr(args, 'plot_layout', 'joints') == 'overview' \
            else write_plot
        draw(args.plot, summary.names, t, q, q_ref, error, title, units)
        print(f'wrote {args.plot}')
    return True


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.plot and matplotlib_figure() is None:
        print("error: --plot needs matplotlib (pip install matplotlib, or the package's "
              "'plot' extra; apt: python3-matplotlib)", file=sys.stderr)
        return 1
    for option, value in (('--duration', args.duration), ('--control-rate', args.control_rate),
                          ('--integration-step', args.integration_step),
                          ('--move-duration', args.move_duration)):
        if value is not None and not (value > 0.0 and math.isfinite(value)):
            print(f'error: {option}: must be a number > 0, got {value:g}', file=sys.stderr)
            return 1
    for option, path in (('--csv', args.csv), ('--plot', args.plot)):
        problem = path and output_problem(path, option == '--plot')
        if problem:        # said now, not after the run
            print(f'error: {option} {path}: {problem}', file=sys.stderr)
            return 1
    ros_args = [a for a in args.ros_args if a != '--']
    if ros_args and ros_args[0] == '--ros-args':
        ros_args = ros_args[1:]
    user_files, ros_args = split_params_files(ros_args)
    args.ros_args = ros_args
    derived = merged = None
    try:
        # the user's files checked first (a missing file is named as given), then all
        check_params_files(['--ros-args', *params_file_arguments(user_files)])
        args.params_file, files, derived = parameter_files(args, user_files)
        args.source_args = ['--ros-args', *params_file_arguments(files), *ros_args]
        check_params_files(args.source_args)
        merged = write_nodes_file(files, node_sections_for(ros_args), header=(
            'parameters of the simulation\'s nodes from ' + '; '.join(files)
            + ' (later files win)'))
        args.rcl_args = ['--ros-args', *params_file_arguments([merged] if merged else []),
                         *ros_args]
        return _main(args)
    except ParamsFileError as error:
        rclpy.logging.get_logger('sim').error(str(error))
        return 1
    finally:
        for path in (derived, merged):
            if path:
                os.remove(path)


def split_params_files(ros_args):
    """(the --params-file paths, the other arguments) of the arguments after --ros-args."""
    files, rest, skip = [], [], False
    for i, arg in enumerate(ros_args):
        if skip:
            skip = False
        elif arg == '--params-file' and i + 1 < len(ros_args):
            files.append(ros_args[i + 1])
            skip = True
        else:
            rest.append(arg)
    return files, rest


def params_file_arguments(paths):
    return [a for path in paths for a in ('--params-file', path)]


def node_sections_for(ros_args):
    """[(fully qualified name, [usual name])] of the simulation's nodes under the remap
    rules of `ros_args` (the sections for a node's usual name still apply)."""
    nodes = []
    for name in SIM_NODES:
        namespace, renamed = node_name_of(name, ['--ros-args', *ros_args])
        fqn, usual = node_fqn(renamed, namespace), node_fqn(name, namespace)
        nodes.append((fqn, [usual] if usual != fqn else []))
    return nodes


def _main(args):
    """The run, once the parameter files are layered (`args.rcl_args`: one section per
    node, later files winning)."""
    logger = rclpy.logging.get_logger('sim')
    try:
        lock = lock_domain()       # held for the run: a simulation starting at this moment
    except StartRefused as error:  # on the same domain is refused, as this one would be
        logger.error(str(error))
        return 1
    try:
        return _run_locked(args, logger)
    finally:
        if lock is not None:
            lock.close()


def _run_locked(args, logger):
    try:
        with ros_session(['sim', *args.rcl_args]) as stop:
            topics = other_simulations(None, running=stop.running)
            if topics and stop.running():
                logger.error(domain_in_use_message(topics))
                return 1
            if not stop.running():           # stopped during the look at the domain
                return interrupted(None, stop)
            try:
                summary, plant = run(args, running=stop.running)
            except ConfigurationError as error:
                logger.error(f'bad parameter: {error}')
                return 1
            except (KeyboardInterrupt, ExternalShutdownException):
                return interrupted(None, stop)
    except ParamsFileError as error:
        logger.error(str(error))
        return 1
    print(f'simulated {plant.sim_time:.3f} s')      # also after Ctrl-C
    print(summary.report())
    law_demo = getattr(summary, 'law_demo', None)
    if law_demo is not None and law_demo.report():
        print(law_demo.report())
    if (args.csv or args.plot) and not write_outputs(args, summary, plant):
        return 1
    if stop.requested:
        return interrupted(plant, stop)
    return 2 if plant.stopped else 0


def interrupted(plant, stop):
    """The one line and the exit status (128 + the signal: 130 for Ctrl-C) of a run
    ended by Ctrl-C or SIGTERM."""
    signum = getattr(stop, 'signum', None) or signal.SIGINT
    when = f' at {plant.sim_time:.3f} s of simulated time' if plant is not None else \
        ' before the simulation began'
    print(f'sim: stopped by {signal.Signals(signum).name}{when}', file=sys.stderr,
          flush=True)
    return 128 + int(signum)


def demo_main(args=None):
    """Entry point `demo_move`: the demo move alone (launch/sim.launch.py)."""
    try:
        return _demo(args)
    except ParamsFileError as error:
        rclpy.logging.get_logger('demo_move').error(str(error))
        return 1


def _demo(args):
    with ros_session(args) as stop:
        try:
            node = DemoMove()
        except ConfigurationError as error:
            rclpy.logging.get_logger('demo_move').error(
                f'bad parameter: {error}'
                f'{error_source(sys.argv if args is None else args, "demo_move", error)}')
            return 1
        try:
            while rclpy.ok() and not node.sent and stop.running():
                rclpy.spin_once(node, timeout_sec=0.1)
            if stop.running():
                rclpy.spin_once(node, timeout_sec=0.5)   # let the reliable message go out
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            node.destroy_node()
    return 0


if __name__ == '__main__':
    sys.exit(main())
