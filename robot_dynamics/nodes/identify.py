"""`ros2 run robot_dynamics identify`: identify the whole arm (every link's inertial
parameters, rotor inertia, friction) from its own motion, and write the model as a
parameter file the controller and the plant load after the robot's own (doc/identification.md).

    identify excite [--duration 30] [--controller /computed_torque_controller] [--seed 0]
                    [--iterations 20] [--joint-states-topic /joint_states] [--timeout 10]
                    --record DIR
    identify estimate --params-file P [P ...] --bag DIR [DIR ...] [--validate DIR]
                      [--topic /joint_states] [--node computed_torque_controller]
                      [--effort-timing instant] --output OUT.yaml
    identify plan --params-file P [P ...] [--duration 30] [--rate 100] [--start Q ...]
                  [--floor Z] [--keep-out XMIN YMIN ZMIN XMAX YMAX ZMAX] [--output PLAN.yaml]
                  [--send ACTION [--record DIR]]

`excite` reads the robot model and its limits from the running controller's parameters (as
`excite` does), plans the trajectory optimised for identification from where the arm is
(robot_dynamics.arm_identification.optimal_excitation; its condition number is printed),
sends it through the controller (the FollowJointTrajectory action when the controller
offers it, else its joint_trajectory topic) and records /joint_states at its full rate
during the motion into the rosbag2 folder DIR (`ros2 bag info DIR` reads it).

`plan` plans the same motion from the robot's parameter files alone, checks it against
the joint limits, a floor and keep-out boxes, and writes it as a
trajectory_msgs/JointTrajectory YAML file and/or sends it to any FollowJointTrajectory
action server while recording /joint_states (robot_dynamics.nodes.identification.identify_plan).

`estimate` builds the prior model from the parameter files (layered as ROS does: a later
file overrides an earlier one key by key; the ``/**`` section, then the --node section),
reads the recordings (robot_dynamics.joint_state_bag: any robot's ``ros2 bag record
/joint_states`` with position, velocity and effort), identifies the model, prints for the
prior and the identified model the per-joint RMS torque error and relative error on the
validation data (--validate, else the last 20 % of the samples, held out), the condition
number, the sample count and how the directions the data cannot determine were fixed, and
writes OUT.yaml: ``/**: ros__parameters: robot:`` with the identified values, to load after
the robot's file (``--params-file P --params-file OUT.yaml``).

Exit status: 0 done; 1 (excite) no controller, no /joint_states or no subscriber within
--timeout, or the motion did not end, (estimate) the estimation failed (the solver) or scipy or
cvxpy is missing (the line says what to pip install); 2 bad arguments or bad input (a missing bag, no
JointState topic, joints missing, no efforts, a bad parameter file, rosbags missing); 3 (estimate) the data
do not excite the parameters (nothing written; which ones is printed), (excite) the goal
was refused; 4 (excite) the goal was aborted or canceled; 130 stopped (Ctrl-C, SIGTERM).
`plan`: 0 done; 1 no /joint_states or action server within --timeout, the arm moved while
the motion was planned, a library missing; 2 bad input or a limit the motion would break
(one line naming the joint or link point, the time and the limit); 3, 4, 130 as `excite`.
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np
import yaml

from robot_dynamics.joint_state_bag import BagError, DEFAULT_TOPIC, read_joint_states
from robot_dynamics.model import ParameterFileLoader, RobotModel

BAD_INPUT = 2
NOT_EXCITED = 3
STOPPED = 130
EXCITATION_ITERATIONS = 20   # optimal_excitation's L-BFGS iterations
HELD_OUT = 0.2          # the fraction of the samples kept for validation without --validate
CONTROLLER = '/computed_torque_controller'
PER_LINK = {'com': 3, 'inertia': 6}    # written one link per line
OUTPUT_HEADER = ('# Identified by `identify estimate`: load after the robot\'s own file,\n'
                 '#   --ros-args --params-file ROBOT.yaml --params-file THIS.yaml\n')


class InputError(ValueError):
    """Bad input to `estimate`: one line, exit status 2."""


class EstimationError(RuntimeError):
    """The estimation itself failed (e.g. the solver): one line, exit status 1."""


def _first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ''


def parse_arguments(argv):
    """The subcommand and its options (without ROS arguments); exits with status 2."""
    parser = argparse.ArgumentParser(
        prog='identify', description='Identify the whole arm from its own motion: record '
        'an optimised excitation, estimate, write a parameter file.')
    commands = parser.add_subparsers(dest='command', required=True,
                                     metavar='{excite,estimate,plan}')
    excite = commands.add_parser(
        'excite', help='send the optimised excitation through the running controller and '
        'record /joint_states into a bag')
    excite.add_argument('--duration', type=float, default=30.0,
                        help='length of the motion [s] (default: 30)')
    excite.add_argument('--controller', default=CONTROLLER,
                        help=f'the controller node (default: {CONTROLLER}); its parameters '
                        'give the model and limits, its joint_trajectory topic and '
                        'follow_joint_trajectory action take the motion')
    excite.add_argument('--seed', type=int, default=0,
                        help='seed of the optimisation (default: 0)')
    excite.add_argument('--iterations', type=int, default=EXCITATION_ITERATIONS,
                        help='iterations of the optimisation after the best of 8 random '
                        f'draws (default: {EXCITATION_ITERATIONS}; 0: that draw, planned in '
                        'a second)')
    excite.add_argument('--joint-states-topic', default=DEFAULT_TOPIC, dest='states_topic')
    excite.add_argument('--timeout', type=float, default=10.0,
                        help='seconds to wait for the model, /joint_states and the '
                        'controller, and past the end of the motion (default: 10)')
    excite.add_argument('--record', required=True, metavar='DIR',
                        help='the rosbag2 folder to write (must not exist)')
    estimate = commands.add_parser(
        'estimate', help='estimate from recordings and write a parameter file')
    estimate.add_argument('--params-file', nargs='+', required=True, dest='params_files',
                          metavar='P', help="the robot's parameter files (the prior model), "
                          'layered in order')
    estimate.add_argument('--bag', nargs='+', required=True, dest='bags', metavar='DIR',
                          help='rosbag2 folders with sensor_msgs/JointState (position, '
                          'velocity, effort)')
    estimate.add_argument('--validate', metavar='DIR', default=None,
                          help='a recording kept for validation only (default: the last 20 '
                          '%% of the samples are held out)')
    estimate.add_argument('--topic', default=None,
                          help=f'the JointState topic in the bags (default: {DEFAULT_TOPIC}, '
                          'or the only one)')
    estimate.add_argument('--node', default=CONTROLLER.lstrip('/'),
                          help='the node section of the parameter files read after "/**" '
                          f'(default: {CONTROLLER.lstrip("/")})')
    estimate.add_argument('--effort-timing', default='instant', dest='effort_timing',
                          choices=('instant', 'held_after', 'held_before'),
                          help='what an effort sample is: instant (measured at the '
                          "message's time: a real arm's effort interface; default), "
                          'held_before (held over the step ending at the message: this '
                          "package's plant node), held_after (held from the message on)")
    estimate.add_argument('--output', required=True, metavar='OUT.yaml',
                          help='the parameter file to write')
    from robot_dynamics.nodes.identification.identify_plan import add_arguments
    add_arguments(commands, CONTROLLER, EXCITATION_ITERATIONS)
    args = parser.parse_args(argv)
    if args.command == 'excite':
        for name in ('duration', 'timeout'):
            value = getattr(args, name)
            if not (math.isfinite(value) and value > 0.0):
                parser.error(f'--{name}: must be finite and > 0, got {value}')
        if args.iterations < 0:
            parser.error(f'--iterations: must be >= 0, got {args.iterations}')
        if os.path.exists(args.record):
            parser.error(f'--record: {args.record} exists already; give a new folder name')
    return args


# ---------------------------------------------------------------------- the prior model


def layered_parameters(paths, node_name=None):
    """(robot block, other parameters) of parameter files layered as rcl does: in each file
    the sections that apply to the node `node_name` (``/**``, its name, ``/**/name``, ...),
    in the file's order, then the next file, each overriding earlier values key by key
    (flat, dotted names). A relative robot.urdf_file is taken from its file's folder."""
    from robot_dynamics.nodes.common.params_file import check_params_file, ParamsFileError
    merged = {}
    for path in paths:
        try:
            check_params_file(path)
        except ParamsFileError as error:
            raise InputError(str(error)) from None
        with open(path, encoding='utf-8') as stream:
            document = yaml.load(stream, Loader=ParameterFileLoader)
        for section, params in _sections(document):
            if not (isinstance(params, dict) and _applies(section, node_name)):
                continue
            flat = _flatten(params)
            urdf_file = flat.get('robot.urdf_file')
            if isinstance(urdf_file, str) and urdf_file and not (
                    os.path.isabs(urdf_file) or '://' in urdf_file):
                flat['robot.urdf_file'] = os.path.join(
                    os.path.dirname(os.path.abspath(path)), urdf_file)
            merged.update(flat)
    robot = {key[len('robot.'):]: value for key, value in merged.items()
             if key.startswith('robot.')}
    others = {key: value for key, value in merged.items() if not key.startswith('robot.')}
    return robot, others


def _sections(document, prefix=''):
    """(node name pattern, ros__parameters) of a parameter file, namespaces nested."""
    for key, value in document.items():
        if not isinstance(value, dict):
            continue
        name = f'{prefix}/{str(key).strip("/")}'
        if 'ros__parameters' in value:
            yield name, value['ros__parameters']
        yield from _sections({k: v for k, v in value.items() if k != 'ros__parameters'}, name)


def _applies(pattern, node_name):
    """rcl's node-name wildcards: ``/**`` any namespaces, ``*`` one token."""
    import re
    node = '/' + (node_name or '').strip('/')
    regex = re.escape(pattern).replace(r'/\*\*', '(/[^/]+)*').replace(r'\*', '[^/]+')
    return pattern == '/**' or re.fullmatch(regex, node) is not None


def _flatten(mapping, prefix=''):
    flat = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


def prior_model(paths, node_name=None):
    """(RobotModel, joint names, [model warnings]) from layered parameter files;
    InputError with one line."""
    robot, others = layered_parameters(paths, node_name)
    if not robot:
        raise InputError(f'params files {" ".join(paths)}: no robot block (expected '
                         '"/**: ros__parameters: robot: ...", e.g. config/puma560.yaml)')
    description = others.get('robot_description')
    if robot.get('source') == 'urdf' and description and not (
            robot.get('urdf') or robot.get('urdf_file')):
        robot['urdf'] = description
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            model = RobotModel.from_params(robot)
        except ValueError as error:
            raise InputError(f'params files {" ".join(paths)}: {error}') from None
    joints = others.get('joints') or model.joint_names
    if not joints:
        raise InputError(f'params files {" ".join(paths)}: joints: missing (a list of joint '
                         'names, in the order of the robot block)')
    if isinstance(joints, str) or len(joints) != model.n or len(set(joints)) != model.n:
        raise InputError(f'params files {" ".join(paths)}: joints: expected {model.n} '
                         f'distinct names, got {joints!r}')
    return model, tuple(joints), [str(w.message) for w in caught]


# ---------------------------------------------------------------------- estimate


def read_recordings(bags, joints, topic):
    """The JointStateRecordings of `bags`; InputError (one line) for a bad one."""
    recordings = []
    for bag in bags:
        try:
            recordings.append(read_joint_states(bag, joints, topic))
        except BagError as error:
            raise InputError(str(error)) from None
    return recordings


def held_out(recordings, fraction=HELD_OUT):
    """(estimation recordings, validation recordings): the last `fraction` of all samples
    (in the order given) kept for validation."""
    total = sum(len(r) for r in recordings)
    keep = int(round((1.0 - fraction) * total))
    estimation, validation = [], []
    for recording in recordings:
        if keep >= len(recording):
            estimation.append(recording)
        elif keep <= 0:
            validation.append(recording)
        else:
            first, last = recording.split(keep / len(recording))
            estimation.append(first)
            validation.append(last)
        keep -= len(recording)
    return estimation, validation


def pieces(recordings):
    """The gap-free runs of samples of all recordings: [(t, q, qd, tau)]."""
    return [(r.t[s], r.q[s], r.qd[s], r.tau[s]) for r in recordings for s in r.segments()]


def format_table(joints, rows):
    """Rows (label, per-joint values, unit) as aligned text."""
    width = max(9, *(len(j) for j in joints))
    label_width = max(len(label) for label, _, _ in rows)
    lines = [' ' * (label_width + 2) + ''.join(f'{j:>{width + 1}}' for j in joints)]
    for label, values, kind in rows:
        cells = ''.join(f'{v:>{width + 1}.2%}' if kind == '%' else f'{v:>{width + 1}.4g}'
                        for v in values)
        lines.append(f'{label:<{label_width}}  {cells}')
    return '\n'.join(lines)


def estimate(args, out=print):
    """`identify estimate`; returns the exit status. Prints its report with `out`; raises
    InputError (exit status 2) for bad input."""
    started = time.monotonic()
    model, joints, notes = prior_model(args.params_files, args.node)
    for note in notes:
        out(f'prior model: {note}')
    out(f'prior model: {model!r} from {" ".join(args.params_files)}; joints {list(joints)}')
    recordings = read_recordings(args.bags, joints, args.topic)
    if args.validate is not None:
        validation = read_recordings([args.validate], joints, args.topic)
        estimation = recordings
        held = args.validate
    else:
        estimation, validation = held_out(recordings)
        held = f'the last {HELD_OUT:.0%} of the samples, held out'
    for recording in recordings + (validation if args.validate is not None else []):
        out(recording.summary())
        for note in recording.notes:
            out(f'  {note}')
    read_time = time.monotonic() - started
    from robot_dynamics.nodes.identification import identify_core as core
    try:
        result = core.identify(model, pieces(estimation), args.effort_timing)
    except ValueError as error:
        raise InputError(f'the estimation data: {error}') from None
    except ImportError:
        raise
    except Exception as error:  # noqa: B902 - e.g. the solver failed: one line, status 1
        raise EstimationError(f'the estimation failed: {type(error).__name__}: '
                              f'{_first_line(error)}') from None
    out(f'estimation: {result.raw_samples} samples read, {result.samples} used after '
        f'filtering and decimation; condition number {result.condition:.4g}')
    if result.not_excited:
        out(f'not excited: the data do not determine {"; ".join(result.not_excited)}. '
            f'Nothing written to {args.output}: record a longer or richer motion (e.g. '
            '`identify excite`) and estimate again')
        return NOT_EXCITED
    out(f'unidentifiable directions: {result.fixed}')
    out('physically consistent: ' + ('yes (every link\'s pseudo-inertia positive definite; '
                                     'armature and friction >= 0)' if not result.consistency
                                     else 'NO: ' + '; '.join(result.consistency)))
    try:
        prior_errors = core.errors(model, pieces(validation), args.effort_timing)
        identified_errors = core.errors(result.model, pieces(validation), args.effort_timing)
    except ValueError as error:
        raise InputError(f'the validation data ({held}): {error}') from None
    out(f'validation on {held}: effort error per joint (RMS of measured - predicted; '
        'relative: / RMS measured effort)')
    out(format_table(joints, [
        ('RMS error, prior [N m | N]', prior_errors.rms, 'g'),
        ('RMS error, identified [N m | N]', identified_errors.rms, 'g'),
        ('relative error, prior', prior_errors.relative, '%'),
        ('relative error, identified', identified_errors.relative, '%')]))
    write_parameter_file(args.output, core.overrides(result.model), args, result, held,
                         prior_errors, identified_errors)
    stages = ', '.join(f'{name} {seconds:.2f} s' for name, seconds in result.timing.items())
    out(f'time: {time.monotonic() - started:.1f} s (reading {read_time:.2f} s, {stages})')
    out(f'wrote {args.output}: load it after the robot\'s file, --params-file '
        f'{args.params_files[-1]} --params-file {args.output}')
    return 0


# ---------------------------------------------------------------------- the output file


def yaml_value(value):
    """A parameter value as rcl reads it: floats always with a point (4.0e-05, 2.0), one
    type per list."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return '[' + ', '.join(yaml_value(v) for v in value) + ']'
    if isinstance(value, (bool, np.bool_)):
        return 'true' if value else 'false'
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f'non-finite value {value}')
        text = repr(value)
        if 'e' in text and '.' not in text.split('e')[0]:
            mantissa, exponent = text.split('e')
            text = f'{mantissa}.0e{exponent}'
        elif 'e' not in text and '.' not in text:
            text += '.0'
        return text
    return yaml.safe_dump(value, default_style='"').strip().removesuffix('...').strip()


def _floats_in_lists(value):
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        if any(isinstance(v, (float, np.floating)) for v in items):
            return [float(v) for v in items]
        return items
    return value


def parameter_file_text(robot, comments=()):
    """The text of ``/**: ros__parameters: robot: ...`` with the (flat or nested) robot
    keys, each list of one type."""
    nested = {}
    for key, value in _flatten(robot).items():
        head = nested
        parts = key.split('.')
        for part in parts[:-1]:
            head = head.setdefault(part, {})
        head[parts[-1]] = _floats_in_lists(value)
    lines = [OUTPUT_HEADER.rstrip('\n')] + [f'# {c}' for c in comments]
    lines += ['/**:', '  ros__parameters:', '    robot:']

    def emit(mapping, indent):
        for key, value in mapping.items():
            if isinstance(value, dict):
                lines.append(f'{" " * indent}{key}:')
                emit(value, indent + 2)
            elif isinstance(value, list) and key in PER_LINK and len(value) > PER_LINK[key]:
                rows = [', '.join(yaml_value(v) for v in value[i:i + PER_LINK[key]])
                        for i in range(0, len(value), PER_LINK[key])]
                margin = ' ' * (indent + len(key) + 3)
                lines.append(f'{" " * indent}{key}: [' + f',\n{margin}'.join(rows) + ']')
            else:
                lines.append(f'{" " * indent}{key}: {yaml_value(value)}')
    emit(nested, 6)
    return '\n'.join(lines) + '\n'


def _percentages(values):
    return '[' + ', '.join(f'{100.0 * v:.2f} %' for v in values) + ']'


def write_parameter_file(path, robot, args, result, held, prior_errors, identified_errors):
    comments = [f'prior: {" ".join(args.params_files)}',
                f'recordings: {" ".join(args.bags)}',
                f'{result.samples} samples used, condition number {result.condition:.4g}',
                f'validation ({held}), relative effort error per joint: prior '
                f'{_percentages(prior_errors.relative)}, identified '
                f'{_percentages(identified_errors.relative)}']
    text = parameter_file_text(robot, comments)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = f'{path}.tmp'
    with open(temporary, 'w', encoding='utf-8') as stream:
        stream.write(text)
    os.replace(temporary, path)


# ---------------------------------------------------------------------- main


def main(args=None):
    argv = sys.argv if args is None else list(args)
    try:
        options = parse_arguments(_without_ros_args(argv)[1:])
    except SystemExit as stop:        # --help (0) or a bad argument (2, said on stderr)
        return stop.code
    if options.command == 'excite':
        from robot_dynamics.nodes.identification.identify_excite import run_excite
        return run_excite(argv, options)
    if options.command == 'plan':
        from robot_dynamics.nodes.identification.identify_plan import run_plan
        return run_plan(argv, options)
    try:
        return estimate(options)
    except InputError as error:
        print(f'identify estimate: {error}', file=sys.stderr)
        return BAD_INPUT
    except (EstimationError, ImportError) as error:     # ImportError: pip install ...
        print(f'identify estimate: {_first_line(error)}', file=sys.stderr)
        return 1


def _without_ros_args(argv):
    """argv without a ``--ros-args ... [--]`` part (estimate does not use ROS)."""
    out, inside = [], False
    for arg in argv:
        if arg == '--ros-args':
            inside = True
        elif inside and arg == '--':
            inside = False
        elif not inside:
            out.append(arg)
    return out


if __name__ == '__main__':
    sys.exit(main())
