"""`identify plan`: the optimised excitation from a robot file alone, for any controller
(robot_dynamics.nodes.identify has the usage; doc/identification.md the recipe).

The motion is `identify excite`'s (robot_dynamics.identification.arm.optimal_excitation:
a rest-to-rest finite Fourier series inside the joints' position, velocity and acceleration
bounds with margins, optimised for the condition number of the weighted base regressor),
planned from --start, else the parameter files' ``initial_positions``, else the middle of
each joint's range (with --send: where /joint_states says the arm is). With --floor or
--keep-out the optimiser also keeps every link origin and the tool frame --clearance away
from them (robot_dynamics.motion_limits). The points, every 1/--rate s, are checked against
the exact limits before anything is written or sent; a violation is one line naming the
joint or the point of a link, the time and the limit (exit status 2).

--output writes the points as a trajectory_msgs/JointTrajectory in YAML, the message's
fields as ``ros2 topic echo`` (rosidl_runtime_py's message_to_yaml) writes them; --send
ACTION sends them as a control_msgs/action/FollowJointTrajectory goal
(robot_dynamics.nodes.identify.send) while /joint_states is recorded into
--record DIR.
"""

import argparse
import math
import os
import sys
import time
from typing import NamedTuple

import numpy as np
import yaml

from robot_dynamics.identification.arm import optimal_excitation
from robot_dynamics.nodes.common.outputs import duration_fields, write_file
from robot_dynamics.nodes.identify.common import BAD_INPUT, InputError
from robot_dynamics.nodes.identify.prior import layered_parameters, prior_model
from robot_dynamics.identification.motion_limits import (first_violation, link_point_names,
                                                         start_clearance, Workspace,
                                                         workspace_violation)

CLEARANCE = 0.05           # m the optimiser keeps from the floor and the keep-out boxes
RATE = 100.0               # Hz of the trajectory points
START_KEY = 'initial_positions'


class PlanError(ValueError):
    """A plan that cannot be made or would break a limit: one line, exit status `status`
    (2; 1 for a missing library)."""

    def __init__(self, text, status=BAD_INPUT):
        super().__init__(text)
        self.status = status


class Plan(NamedTuple):
    joints: tuple
    t: np.ndarray            # (K,) s from the start
    q: np.ndarray            # (K, n) positions, velocities, accelerations
    qd: np.ndarray
    qdd: np.ndarray
    excitation: object       # the identification.arm.Excitation
    seconds: float           # planning time
    notes: list              # what the planner changed (one line each)


# ---------------------------------------------------------------------- the command line


def _positive(text):
    value = float(text)
    if not (math.isfinite(value) and value > 0.0):
        raise argparse.ArgumentTypeError(f'must be finite and > 0, got {text}')
    return value


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f'must be finite, got {text}')
    return value


def _nonnegative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f'must be >= 0, got {text}')
    return value


def add_arguments(commands, controller, iterations):
    """The `plan` subcommand's parser in `commands` (identify's subparsers)."""
    plan = commands.add_parser(
        'plan', help='plan the optimised excitation from a robot file alone: write it as '
        'a trajectory_msgs/JointTrajectory YAML file and/or send it to any '
        'FollowJointTrajectory action server, recording /joint_states')
    plan.add_argument('--params-file', nargs='+', required=True, dest='params_files',
                      metavar='P', action='extend',
                      help="the robot's parameter files (model, joints, limits), layered in "
                      'order (repeat the option or give several files)')
    plan.add_argument('--node', default=controller.lstrip('/'),
                      help='the node section of the parameter files read after "/**" '
                      f'(default: {controller.lstrip("/")})')
    plan.add_argument('--duration', type=_positive, default=30.0,
                      help='length of the motion [s] (default: 30)')
    plan.add_argument('--rate', type=_positive, default=RATE,
                      help=f'trajectory points per second (default: {RATE:g})')
    plan.add_argument('--seed', type=int, default=0, help='seed of the optimisation')
    plan.add_argument('--iterations', type=_nonnegative_int, default=iterations,
                      help='iterations of the optimisation after the best of 8 random '
                      f'draws (default: {iterations}; 0: that draw, planned in a second)')
    plan.add_argument('--start', type=_finite, nargs='+', metavar='Q',
                      help='start (and end) position, one per joint [rad | m] (default: '
                      f'the files\' {START_KEY}, else mid-range; with --send: where the '
                      'arm is)')
    plan.add_argument('--floor', type=_finite, default=None, metavar='Z',
                      help='floor height [m, base frame, z up]: every link origin and the '
                      'tool frame stay at z >= Z')
    plan.add_argument('--keep-out', type=_finite, nargs=6, action='append', default=[],
                      dest='keep_out', metavar=('XMIN', 'YMIN', 'ZMIN', 'XMAX', 'YMAX', 'ZMAX'),
                      help='a box [m, base frame] no link origin nor the tool frame enters '
                      '(repeat for more)')
    plan.add_argument('--clearance', type=float, default=CLEARANCE,
                      help='distance [m] the planner keeps from the floor and the boxes '
                      f'(the check is exact; default: {CLEARANCE:g})')
    plan.add_argument('--output', metavar='PLAN.yaml', default=None,
                      help='write the trajectory_msgs/JointTrajectory as YAML')
    plan.add_argument('--send', metavar='ACTION', default=None,
                      help='send it to this control_msgs/action/FollowJointTrajectory '
                      'server, e.g. /joint_trajectory_controller/follow_joint_trajectory')
    plan.add_argument('--record', metavar='DIR', default=None,
                      help='with --send: record /joint_states during the motion into this '
                      'rosbag2 folder (must not exist)')
    plan.add_argument('--joint-states-topic', default='/joint_states', dest='states_topic')
    plan.add_argument('--timeout', type=_positive, default=10.0,
                      help='with --send: seconds to wait for /joint_states and the action '
                      'server (default: 10)')
    return plan


def check_arguments(options):
    """Cross-argument checks; PlanError with one line."""
    if options.output is None and options.send is None:
        raise PlanError('nothing to do: give --output PLAN.yaml, --send ACTION or both')
    if options.record is not None and options.send is None:
        raise PlanError('--record: only with --send (the recording is made during the motion)')
    for name in ('output', 'record'):
        path = getattr(options, name)
        if name == 'record' and path is not None and os.path.exists(path):
            raise PlanError(f'--record: {path} exists already; give a new folder name')
        if name == 'output' and path is not None and os.path.isdir(path):
            raise PlanError(f'--output: {path} is a folder; give a file name')
    if not (math.isfinite(options.clearance) and options.clearance >= 0.0):
        raise PlanError(f'--clearance: must be finite and >= 0, got {options.clearance}')
    boxes = []
    for box in options.keep_out:
        low, high = np.array(box[:3]), np.array(box[3:])
        if not np.all(low < high):
            raise PlanError(f'--keep-out {" ".join(f"{v:g}" for v in box)}: the min corner '
                            '(first three) must be below the max corner (last three) on '
                            'every axis')
        boxes.append((low, high))
    return Workspace(options.floor, tuple(boxes))


# ---------------------------------------------------------------------- the plan


def robot(options):
    """(model, joint names, other parameters) from the parameter files; PlanError."""
    try:
        model, joints, _ = prior_model(options.params_files, options.node)
        _, others = layered_parameters(options.params_files, options.node)
    except InputError as error:
        raise PlanError(str(error)) from None
    return model, joints, others


def default_start(model, others):
    """(start, where it comes from): the files' initial_positions, else mid-range (0 for
    a joint without limits)."""
    given = others.get(START_KEY)
    if given is not None:
        try:
            start = np.array(given, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise PlanError(f'{START_KEY}: expected {model.n} numbers, got {given!r}') from None
        if start.shape != (model.n,) or not np.all(np.isfinite(start)):
            raise PlanError(f'{START_KEY}: expected {model.n} finite numbers, got {given!r}')
        return start, f'the parameter files\' {START_KEY}'
    low, high = model.position_min, model.position_max
    middle = np.where(np.isfinite(low) & np.isfinite(high), 0.5 * (low + high), 0.0)
    middle = np.where(np.isfinite(low) & ~np.isfinite(high), low, middle)
    middle = np.where(~np.isfinite(low) & np.isfinite(high), high, middle)
    return middle, 'the middle of the joint ranges'


def make_plan(model, joints, start, workspace, options):
    """The checked Plan from `start`; PlanError (one line) when it cannot be made or breaks
    a limit."""
    n = model.n
    start = np.asarray(start, dtype=float).reshape(-1)
    if start.shape != (n,):
        raise PlanError(f'--start: expected {n} values (one per joint {list(joints)}), got '
                        f'{start.size}')
    at_rest = np.zeros((1, n))
    violation = first_violation(model, joints, [0.0], start[None, :], at_rest, at_rest,
                                workspace)
    if violation is not None:
        raise PlanError(f'the start {_rounded(start)}: {violation.text}; choose another '
                        '--start')
    notes, constraint = [], None
    if not workspace.empty:
        clearance = start_clearance(model, start, workspace, options.clearance)
        named = set(link_point_names(model, joints))
        closer = sorted({name for row in clearance for name, c in zip(
            _all_point_names(model, joints), row) if c < options.clearance and name in named})
        if closer:
            notes.append(f'closer than twice --clearance {options.clearance:g} m to the floor '
                         'or a box at the start, kept half as far from it as there: '
                         f'{", ".join(closer)}')
        constraint = lambda q: workspace_violation(model, q, workspace, clearance)  # noqa: E731
    began = time.monotonic()
    try:
        excitation = optimal_excitation(model, options.duration, start, seed=options.seed,
                                        iterations=options.iterations, constraint=constraint)
    except ValueError as error:
        raise PlanError(f'no excitation from {_rounded(start)}: {error}') from None
    except ImportError as error:            # scipy: one line saying what to pip install
        raise PlanError(str(error), status=1) from None
    seconds = time.monotonic() - began
    t, q, qd, qdd = excitation.points(1.0 / options.rate)
    # at rest at both ends exactly, not to rounding (1e-16): a joint_trajectory_controller
    # refuses a last point faster than 1.2e-7 (unless allow_nonzero_velocity_at_trajectory_end)
    q[0] = q[-1] = start
    qd[0] = qd[-1] = qdd[0] = qdd[-1] = 0.0
    violation = first_violation(model, joints, t, q, qd, qdd, workspace)
    if violation is not None:
        raise PlanError(f'the planned motion: {violation.text}')
    return Plan(tuple(joints), t, q, qd, qdd, excitation, seconds, notes)


def _all_point_names(model, joints):
    """Names of the 2n points workspace_violation measures (origins, then link ends; the
    last is the tool frame)."""
    return ([f'link {i + 1} ({j}) origin' for i, j in enumerate(joints)]
            + [f'link {i + 1} ({j}) end' for i, j in enumerate(joints[:-1])] + ['tool frame'])


def _rounded(values):
    return np.round(np.asarray(values, dtype=float), 4).tolist()


def describe(plan, start_origin):
    """The lines printed about a plan."""
    lines = [f'planned a {plan.excitation.duration:g} s excitation from '
             f'{_rounded(plan.q[0])} ({start_origin}) in {plan.seconds:.1f} s: condition '
             f'number {plan.excitation.condition:.4g}; {len(plan.t)} points, every '
             f'{plan.t[1] - plan.t[0]:.4g} s']
    lines += [f'note: {note}' for note in plan.notes]
    reach = np.ptp(plan.q, axis=0)
    lines.append('range of motion per joint: ' + ', '.join(
        f'{j} {r:.3g}' for j, r in zip(plan.joints, reach)))
    return lines


# ---------------------------------------------------------------------- the YAML file


def trajectory_fields(joints, t, q, qd, qdd, frame_id=''):
    """The trajectory_msgs/JointTrajectory as its fields (header stamp 0: start on
    arrival), in the message's field order."""
    return {
        'header': {'stamp': {'sec': 0, 'nanosec': 0}, 'frame_id': frame_id},
        'joint_names': [str(j) for j in joints],
        'points': [{'positions': [float(v) for v in q[k]],
                    'velocities': [float(v) for v in qd[k]],
                    'accelerations': [float(v) for v in qdd[k]],
                    'effort': [],
                    'time_from_start': duration_fields(float(t[k]))}
                   for k in range(len(t))]}


def trajectory_yaml(fields, comments=()):
    """YAML text of message fields as rosidl_runtime_py's message_to_yaml writes them
    (block style, fields in order, floats as PyYAML writes them), after # comments."""
    dumper = getattr(yaml, 'CSafeDumper', yaml.SafeDumper)     # libyaml's: 4x faster
    text = yaml.dump(fields, Dumper=dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=2 ** 31 - 1)    # no line is ever folded
    return ''.join(f'# {line}\n' for line in comments) + text


def write_trajectory(path, plan, options):
    workspace = ''
    if options.floor is not None:
        workspace += f' --floor {options.floor:g}'
    for box in options.keep_out:
        workspace += ' --keep-out ' + ' '.join(f'{v:g}' for v in box)
    if workspace:
        workspace += f' --clearance {options.clearance:g}'
    comments = [f'identify plan --params-file {" ".join(options.params_files)} --duration '
                f'{options.duration:g} --rate {options.rate:g} --seed {options.seed} '
                f'--iterations {options.iterations} --start '
                + ' '.join(repr(float(v)) for v in plan.q[0]) + workspace,
                'trajectory_msgs/JointTrajectory; condition number '
                f'{plan.excitation.condition:.4g}; starts at rest at the first point: move the '
                'arm there first',
                'send as a FollowJointTrajectory goal: doc/identification.md of robot_dynamics']
    write_file(path, trajectory_yaml(
        trajectory_fields(plan.joints, plan.t, plan.q, plan.qd, plan.qdd), comments))


# ---------------------------------------------------------------------- main


def plan_and_write(options, model, joints, workspace, start, origin, out=print):
    """Plan from `start`, print about it, write --output; returns the Plan."""
    plan = make_plan(model, joints, start, workspace, options)
    for line in describe(plan, origin):
        out(line)
    checked = 'position, velocity and acceleration limits'
    if workspace.floor is not None:
        checked += f', floor at z = {workspace.floor:g} m'
    if workspace.boxes:
        checked += f', {len(workspace.boxes)} keep-out box(es)'
    out(f'checked at every point: {checked}: all met')
    if options.output is not None:
        write_trajectory(options.output, plan, options)
        out(f'wrote {options.output} (trajectory_msgs/JointTrajectory, {len(plan.t)} points)')
    return plan


def run_plan(argv, options, send):
    """main() of `identify plan`: the exit status. With --send, `send(argv, options, model,
    joints, workspace)` (robot_dynamics.nodes.identify.send.send, which imports this
    module: passed in by the command line, so that the imports go one way) sends it; argv
    (with the ROS arguments) initialises rclpy."""
    try:
        workspace = check_arguments(options)
        model, joints, others = robot(options)
        if options.send is None:
            if options.start is not None:
                start, origin = np.array(options.start), '--start'
            else:
                start, origin = default_start(model, others)
            plan_and_write(options, model, joints, workspace, start, origin)
            return 0
    except PlanError as error:
        print(f'identify plan: {error}', file=sys.stderr)
        return error.status
    return send(argv, options, model, joints, workspace)
