"""`ros2 run robot_dynamics identify`: identify the whole arm (every link's inertial
parameters, rotor inertia, friction) from its own motion, and write the model as a
parameter file the controller and the plant load after the robot's own (doc/identification.md).

    identify excite [--duration 30] [--controller /computed_torque_controller] [--seed 0]
                    [--iterations 20] [--joint-states-topic /joint_states] [--timeout 10]
                    [--effort-timing held_before] --record DIR
    identify estimate --params-file P [P ...] --bag DIR [DIR ...] [--validate DIR]
                      [--topic /joint_states] [--node computed_torque_controller]
                      [--effort-timing instant] [--output-section /**/NODE]
                      [--offset | --no-offset] [--friction LAW [LAW ...] | auto]
                      [--accelerations auto] [--write-inconsistent]
                      [--payload-bag DIR [DIR ...] --payload M CX CY CZ [I x 6]]
                      [--report REPORT.yaml] [--relative-std-threshold 20]
                      [--essential-ratio 100] --output OUT.yaml
    identify plan --params-file P [P ...] [--duration 30] [--rate 100] [--start Q ...]
                  [--floor Z] [--keep-out XMIN YMIN ZMIN XMAX YMAX ZMAX] [--output PLAN.yaml]
                  [--send ACTION [--record DIR]]

`excite` reads the robot model and its limits from the running controller's parameters (as
`excite` does), plans the trajectory optimised for identification from where the arm is
(robot_dynamics.arm_identification.optimal_excitation; its condition number is printed),
sends it through the controller (the FollowJointTrajectory action when the controller
offers it, else its joint_trajectory topic) and records /joint_states at its full rate
during the motion into the rosbag2 folder DIR (`ros2 bag info DIR` reads it), with the
effort timing of the recording in the bag's metadata (custom_data
``robot_dynamics.effort_timing``: held_before when this package's plant publishes
/joint_states, else instant; ``--effort-timing`` says otherwise).

`plan` plans the same motion from the robot's parameter files alone, checks it against
the joint limits, a floor and keep-out boxes, and writes it as a
trajectory_msgs/JointTrajectory YAML file and/or sends it to any FollowJointTrajectory
action server while recording /joint_states (robot_dynamics.nodes.identification.identify_plan).

`estimate` builds the prior model from the parameter files (every --params-file, in order,
layered as the nodes layer them: robot_dynamics.parameters.params_file), reads the
recordings (robot_dynamics.joint_state_bag: any robot's ``ros2 bag record /joint_states``
with position and effort, and velocity when recorded (else the velocities come from the
positions); jittered, dropped, duplicated or late messages,
several publishers), identifies the model, prints for the prior and the identified model
the per-joint RMS torque error and relative error on the validation data (--validate, else
the last 20 % of the samples, held out), the condition number, the sample count, the
friction law and offsets chosen from the data when not given (held out on 5 blocks), how the
directions the data cannot determine were fixed, and writes OUT.yaml:
``/**/NODE: ros__parameters: robot:`` with the identified values (NODE: --node, the
controller, so that loading the file into a simulation leaves the plant as it is;
``--output-section /**`` addresses every node), to load after the robot's files
(``--params-file P --params-file OUT.yaml``). The effort timing is the bag's (written by
`identify excite`), else instant, unless --effort-timing is given.
The report REPORT.yaml (default OUT.report.yaml): every base parameter's value, standard
deviation and relative standard deviation, the essential parameters, the friction laws,
offsets and drive gains. `--offset` estimates each joint's effort offset (a sensor bias,
written as ``effort_offset``: the controller does not add it to its command); `--friction`
sets the joints' friction laws (coulomb, asymmetric, tanh, stribeck; one for all or one per
joint); `--payload-bag` with `--payload` (a second recording with a known payload
attached: mass, centre of mass in the last link frame [, inertia about it]) estimates
each joint's drive gain (joint effort = gain × recorded effort). `--accelerations`: the
accelerations from the recorded velocities' derivative or the recorded positions' second
derivative; by default the one the estimation data fit better (printed), also used for the
validation errors.

Exit status: 0 done; 1 (excite) no controller, no /joint_states or no subscriber within
--timeout, or the motion did not end, (estimate) the estimation failed (the solver) or scipy or
cvxpy is missing (the line says what to pip install); 2 bad arguments or bad input (a missing bag, no
JointState topic, joints missing, no efforts or efforts without information (0, constant,
far below the gravity torques), too short, a bad parameter file, rosbags missing); 3
(estimate) the data do not excite the parameters (nothing written; which ones is printed),
(excite) the goal was refused; 4 (estimate) the estimate is not physically consistent
(nothing written unless --write-inconsistent), (excite) the goal was aborted or canceled;
70 (estimate) an internal error: a bug, not bad data (one line; please report it);
130 stopped (Ctrl-C, SIGTERM).
`plan`: 0 done; 1 no /joint_states or action server within --timeout, the arm moved while
the motion was planned, a library missing; 2 bad input or a limit the motion would break
(one line naming the joint or link point, the time and the limit); 3, 4, 130 as `excite`.
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import yaml

from robot_dynamics.joint_state_bag import BagError, DEFAULT_TOPIC, read_joint_states
from robot_dynamics.model import FRICTION_MODELS
from robot_dynamics.nodes.identification.common import (  # noqa: F401 - identify's names
    EFFORT_TIMING_KEY, InputError, layered_parameters, prior_model, RECORDED_BY_KEY, _flatten,
    _layers)
from robot_dynamics.nodes.common.outputs import write_file

INCONSISTENT_HEADER = ('# Estimated by `identify estimate --write-inconsistent`: NOT physically '
                       'consistent\n# (see the issues below), for inspection only: do not '
                       'load it to control the arm\n')
EFFORT_TIMINGS = ('instant', 'held_after', 'held_before')
ACCELERATION_SOURCES = ('velocity', 'position')      # arm_identification's, not imported here

BAD_INPUT = 2
NOT_EXCITED = 3
NOT_CONSISTENT = 4      # estimate: the estimate is not physically consistent
BUG = 70                # sysexits' EX_SOFTWARE: an internal error, not bad input
STOPPED = 130
EXCITATION_ITERATIONS = 20   # optimal_excitation's L-BFGS iterations
HELD_OUT = 0.2          # the fraction of the samples kept for validation without --validate
CONTROLLER = '/computed_torque_controller'
PER_LINK = {'com': 3, 'inertia': 6}    # written one link per line
OUTPUT_HEADER = ('# Identified by `identify estimate`: load after the robot\'s own file,\n'
                 '#   --ros-args --params-file ROBOT.yaml --params-file THIS.yaml\n')


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
    excite.add_argument('--effort-timing', default=None, dest='effort_timing',
                        choices=EFFORT_TIMINGS,
                        help='the effort timing written into the bag for `estimate` '
                        "(default: held_before when this package's plant publishes the "
                        'joint states, else instant)')
    estimate = commands.add_parser(
        'estimate', help='estimate from recordings and write a parameter file')
    estimate.add_argument('--params-file', nargs='+', required=True, dest='params_files',
                          metavar='P', action='extend',
                          help="the robot's parameter files (the prior model), layered in "
                          'order (repeat the option or give several files)')
    estimate.add_argument('--bag', nargs='+', required=True, dest='bags', metavar='DIR',
                          help='rosbag2 folders with sensor_msgs/JointState (position, '
                          'effort, and velocity if recorded)')
    estimate.add_argument('--validate', metavar='DIR', default=None,
                          help='a recording kept for validation only (default: the last 20 '
                          '%% of the samples are held out)')
    estimate.add_argument('--topic', default=None,
                          help=f'the JointState topic in the bags (default: {DEFAULT_TOPIC}, '
                          'or the only one)')
    estimate.add_argument('--node', default=CONTROLLER.lstrip('/'),
                          help='the node section of the parameter files read after "/**" '
                          f'(default: {CONTROLLER.lstrip("/")})')
    estimate.add_argument('--effort-timing', default=None, dest='effort_timing',
                          choices=EFFORT_TIMINGS,
                          help='what an effort sample is: instant (measured at the '
                          "message's time: a real arm's effort interface), "
                          'held_before (held over the step ending at the message: this '
                          "package's plant node), held_after (held from the message on); "
                          "default: the bag's (written by `identify excite`), else instant")
    estimate.add_argument('--output-section', default=None, dest='output_section',
                          metavar='SECTION',
                          help='the node section of the written file (default: /**/NODE, '
                          'NODE the --node: the controller only; "/**": every node, the '
                          'plant of a simulation too)')
    estimate.add_argument('--accelerations', default='auto',
                          choices=('auto',) + ACCELERATION_SOURCES,
                          help='where the accelerations come from: velocity (the '
                          'derivative of the recorded velocities), position (the second '
                          'derivative of the recorded positions) or auto (default: the one '
                          'the estimation data fit better)')
    estimate.add_argument('--offset', action=argparse.BooleanOptionalAction, default=None,
                          help="estimate each joint's constant effort offset (the effort "
                          "sensor's bias; written as effort_offset, not used in the "
                          'command), or not (--no-offset); default: chosen from the data '
                          '(held out)')
    estimate.add_argument('--friction', nargs='+', default=None, metavar='LAW',
                          choices=FRICTION_MODELS + ('auto',),
                          help='friction law: one for every joint or one per joint, of '
                          f'{", ".join(FRICTION_MODELS)}, or auto (chosen from the data '
                          'among coulomb, tanh and stribeck, held out); default: the robot '
                          'file\'s friction_model if it has one, else auto')
    estimate.add_argument('--payload-bag', nargs='+', default=None, dest='payload_bags',
                          metavar='DIR', help='recordings with a known payload attached: '
                          'estimate the drive gains too (needs --payload)')
    estimate.add_argument('--payload', nargs='+', type=float, default=None,
                          metavar='VALUE', help='the payload of --payload-bag: mass [kg], '
                          'centre of mass x y z in the last link frame [m], optionally '
                          'its inertia about the centre of mass ixx ixy ixz iyy iyz izz '
                          '[kg m^2]')
    estimate.add_argument('--report', default=None, metavar='REPORT.yaml',
                          help='the report to write (default: OUT.report.yaml beside the '
                          'output)')
    estimate.add_argument('--relative-std-threshold', type=float, default=20.0,
                          dest='relative_std_threshold', metavar='PERCENT',
                          help='warn about base parameters whose relative standard '
                          'deviation is above this (default: 20)')
    estimate.add_argument('--essential-ratio', type=float, default=100.0,
                          dest='essential_ratio', metavar='RATIO',
                          help='essential parameters: drop the least certain until the '
                          'largest relative standard deviation is at most RATIO times the '
                          'smallest (default: 100)')
    estimate.add_argument('--write-inconsistent', action='store_true',
                          dest='write_inconsistent',
                          help='write the estimate even when it is not physically '
                          'consistent (for inspection; exit status 4 all the same)')
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
    elif args.command == 'estimate':
        if args.output_section is not None and not args.output_section.startswith('/'):
            parser.error(f'--output-section: a node section starts with "/" ("/**", '
                         f'"/**/my_controller"), got {args.output_section!r}')
        if (args.payload_bags is None) != (args.payload is None):
            parser.error('--payload-bag and --payload: give both (the recording with the '
                         'payload and its mass, centre of mass [, inertia]) or neither')
        if args.payload is not None and (len(args.payload) not in (4, 10) or not all(
                math.isfinite(v) for v in args.payload) or args.payload[0] <= 0.0):
            parser.error(f'--payload: expected a mass > 0, the centre of mass x y z and '
                         f'optionally 6 inertia values (4 or 10 finite numbers), got '
                         f'{args.payload}')
        for name in ('relative_std_threshold', 'essential_ratio'):
            value = getattr(args, name)
            if not (math.isfinite(value) and value > 0.0):
                parser.error(f'--{name.replace("_", "-")}: must be finite and > 0, got '
                             f'{value}')
    return args


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


def effort_timing(args, recordings, out=print):
    """The effort timing: --effort-timing, else the one the bags were recorded with
    (`identify excite` writes it into their metadata), else instant; InputError when the
    bags disagree."""
    if args.effort_timing is not None:
        return args.effort_timing
    found = {r.custom_data.get(EFFORT_TIMING_KEY) for r in recordings} - {None}
    unknown = found - set(EFFORT_TIMINGS)
    if unknown:
        raise InputError(f'the bags\' metadata: {EFFORT_TIMING_KEY}: {sorted(unknown)} is '
                         f'not one of {", ".join(EFFORT_TIMINGS)}; give --effort-timing')
    if len(found) > 1:
        raise InputError(f'the bags were recorded with different effort timings '
                         f'{sorted(found)}; estimate them separately or give --effort-timing')
    if found:
        timing = found.pop()
        writers = sorted({str(r.custom_data[RECORDED_BY_KEY]) for r in recordings
                          if r.custom_data.get(RECORDED_BY_KEY)})
        by = (' and '.join(f'`{w}`' for w in writers) if writers
              else 'the command that recorded them')
        out(f'effort timing: {timing} (from the bags\' metadata, written by {by})')
        return timing
    return 'instant'


def estimate(args, out=print):
    """`identify estimate`; returns the exit status. Prints its report with `out`; raises
    InputError (exit status 2) for bad input."""
    from robot_dynamics.arm_identification import RecordingError, require_estimator_libraries
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
    timing = effort_timing(args, recordings + (validation if args.validate else []), out)
    require_estimator_libraries()
    from robot_dynamics.nodes.identification import identify_core as core
    friction = getattr(args, 'friction', None)
    if friction is not None and len(friction) not in (1, model.n):
        raise InputError(f'--friction: expected 1 or {model.n} laws, got {len(friction)}')
    friction = friction[0] if friction is not None and len(friction) == 1 else friction
    if isinstance(friction, list) and 'auto' in friction:
        raise InputError('--friction auto: one law for every joint (auto alone)')
    if friction is None and 'friction_model' not in layered_parameters(
            args.params_files, args.node)[0]:
        friction = 'auto'
    offset = getattr(args, 'offset', None)
    options = dict(offset='auto' if offset is None else offset, friction=friction,
                   essential_ratio=getattr(args, 'essential_ratio', 100.0),
                   accelerations=getattr(args, 'accelerations', 'auto'))
    if getattr(args, 'payload_bags', None):
        payload_recordings = read_recordings(args.payload_bags, joints, args.topic)
        for recording in payload_recordings:
            out(f'with the payload: {recording.summary()}')
        values = list(args.payload)
        options.update(payload_pieces=pieces(payload_recordings), payload={
            'mass': values[0], 'com': values[1:4],
            'inertia': values[4:10] if len(values) == 10 else [0.0] * 6})
    useless = core.uninformative_efforts(model, joints, pieces(recordings),
                                         scaled=bool(getattr(args, 'payload_bags', None)))
    if useless is not None:
        raise InputError(f'{" ".join(args.bags)}: {useless}; nothing written')
    try:
        result = core.identify(model, pieces(estimation), timing, **options)
    except RecordingError as error:
        raise InputError(f'the estimation data: {error}') from None
    except RuntimeError as error:     # e.g. the solver failed: one line, status 1
        raise EstimationError(f'the estimation failed: {type(error).__name__}: '
                              f'{_first_line(error)}') from None
    out(f'estimation: {result.raw_samples} samples read, {result.samples} used after '
        f'filtering and decimation; condition number {result.condition:.4g}')
    out(acceleration_line(result))
    line = drive_choice_line(result)
    if line:
        out(line)
    if result.not_excited:
        out(f'not excited: the data do not determine {"; ".join(result.not_excited)}. '
            f'Nothing written to {args.output}: record a longer or richer motion (e.g. '
            '`identify excite`) and estimate again')
        return NOT_EXCITED
    out(f'unidentifiable directions: {result.fixed}')
    out('physically consistent: ' + ('yes (every link\'s pseudo-inertia positive definite; '
                                     'armature and friction >= 0)' if not result.consistency
                                     else 'NO: ' + '; '.join(result.consistency)))
    inconsistent = bool(result.consistency)
    if inconsistent and not getattr(args, 'write_inconsistent', False):
        out(f'not physically consistent: nothing written to {args.output} (a model with '
            'such bodies is no arm; check that the efforts are the joint efforts, their '
            'sign, units and timing; --write-inconsistent writes it anyway, for inspection)')
        return NOT_CONSISTENT
    try:
        prior_errors = core.errors(model, pieces(validation), timing,
                                   accelerations=result.accelerations)
        identified_errors = core.errors(result.model, pieces(validation), timing,
                                        result.drive_gain, result.accelerations)
    except RecordingError as error:
        raise InputError(f'the validation data ({held}): {error}') from None
    out(f'validation on {held}: effort error per joint (RMS of measured - predicted; '
        'relative: / RMS measured effort)')
    out(format_table(joints, [
        ('RMS error, prior [N m | N]', prior_errors.rms, 'g'),
        ('RMS error, identified [N m | N]', identified_errors.rms, 'g'),
        ('relative error, prior', prior_errors.relative, '%'),
        ('relative error, identified', identified_errors.relative, '%')]))
    threshold = getattr(args, 'relative_std_threshold', 20.0) / 100.0
    for line in drive_lines(joints, result):
        out(line)
    for line in uncertainty_lines(result.uncertainty, threshold):
        out(line)
    section = args.output_section or '/**/' + args.node.strip('/')
    write_parameter_file(args.output, core.overrides(result.model), args, result, held,
                         prior_errors, identified_errors, timing, section, inconsistent)
    report = getattr(args, 'report', None) or report_path(args.output)
    write_report(report, joints, result, threshold, args)
    stages = ', '.join(f'{name} {seconds:.2f} s' for name, seconds in result.timing.items())
    out(f'time: {time.monotonic() - started:.1f} s (reading {read_time:.2f} s, {stages})')
    out(f'wrote {report}: the base parameters\' uncertainty and the essential parameters')
    if inconsistent:
        out(f'wrote {args.output} (section {section}): NOT physically consistent, for '
            'inspection only (--write-inconsistent): the nodes refuse to load it unless '
            'robot.accept_nonphysical_inertia is true; do not control the arm with it')
        return NOT_CONSISTENT
    files = ' '.join(f'--params-file {path}' for path in args.params_files)
    out(f'wrote {args.output} (section {section}): load it after the robot\'s files, '
        f'{files} --params-file {args.output}')
    return 0


def acceleration_line(result):
    """Where the accelerations came from, and why, in one line."""
    words = {'velocity': 'the derivative of the recorded velocities',
             'position': 'the second derivative of the recorded positions'}
    chosen = result.accelerations
    fit = getattr(result, 'acceleration_fit', None) or {}
    if not getattr(result, 'velocities_recorded', True):
        return (f'accelerations: {words[chosen]} (no velocities recorded, or none '
                "measured: the velocities are the positions' derivative too)")
    if chosen not in fit or len(fit) < 2:
        return f'accelerations: {words[chosen]} (--accelerations {chosen})'
    other = next(source for source in fit if source != chosen)
    return (f'accelerations: {words[chosen]}: a least-squares fit leaves '
            f'{100 * fit[chosen]:.3g} % of the efforts unexplained with them, '
            f'{100 * fit[other]:.3g} % with {words[other]} (--accelerations to choose)')


def drive_choice_line(result):
    """The friction law and offsets chosen from the data, and the alternatives' held-out
    residuals, in one line ('' when both were given)."""
    fit = getattr(result, 'drive_fit', None) or {}
    if not fit.get('scores'):
        return ''
    law, offset = fit['chosen']

    def name(candidate):
        return candidate[0] + (' + offsets' if candidate[1] else '')
    others = ', '.join(f'{name(c)} {100 * v:.4g} %' for c, v in fit['scores'].items())
    return (f'friction law and offsets: {name(fit["chosen"])}, chosen from the data: the '
            f'held-out share of the efforts a least-squares fit leaves unexplained '
            f'({fit["folds"]} blocks, each predicted from the others): {others} '
            '(--friction, --offset / --no-offset to choose)')


# ---------------------------------------------------------------------- uncertainty


def drive_lines(joints, result):
    """The friction laws, effort offsets and drive gains, one line each."""
    lines = []
    laws = result.friction_model or ('coulomb',) * len(joints)
    text = ', '.join(f'{j} {law}' + (f' (v_s {v:.3g})' if law in ('tanh', 'stribeck') else '')
                     for j, law, v in zip(joints, laws, result.stribeck_velocity
                                          if result.stribeck_velocity is not None
                                          else [0.0] * len(joints)))
    lines.append(f'friction laws: {text}')
    if result.offset is not None:
        lines.append('effort offsets (sensor bias, removed from the recorded efforts; the '
                     'controller does not add them to its command): '
                     + ', '.join(f'{j} {o:.4g}' for j, o in zip(joints, result.offset)))
    if result.drive_gain is not None:
        lines.append('drive gains (joint effort = gain x recorded effort): '
                     + ', '.join(f'{j} {g:.4g}' for j, g in zip(joints, result.drive_gain)))
    return lines


def uncertainty_lines(uncertainty, threshold):
    """The base parameters' table (value, standard deviation, relative standard deviation,
    essential) and the warning naming those above `threshold` (a fraction)."""
    if uncertainty is None:
        return []
    width = max(len(name) for name in uncertainty.names)
    lines = ['base parameters: value, standard deviation (weighted least squares), relative '
             'standard deviation; * essential']
    for r, name in enumerate(uncertainty.names):
        relative = uncertainty.relative_std[r]
        lines.append(f'  β{r + 1:<3} {name:<{width}} {uncertainty.value[r]:>12.5g} '
                     f'{uncertainty.std[r]:>10.3g} '
                     + (f'{100.0 * relative:>9.2f} %' if relative <= 100.0
                        else f'{"> 10000":>9} %')
                     + (' *' if uncertainty.essential[r] else ''))
    lines.append(f'essential parameters: {int(np.sum(uncertainty.essential))} of '
                 f'{len(uncertainty.names)}')
    above = [(name, r) for name, r in zip(uncertainty.names, uncertainty.relative_std)
             if not r <= threshold]
    if above:
        lines.append(f'warning: relative standard deviation above {100.0 * threshold:g} %: '
                     + ', '.join(f'{name} ({100.0 * r:.3g} %)' if r <= 100.0
                                 else f'{name} (> 10000 %)' for name, r in above)
                     + ' (poorly determined by the data: the robot file and the constraints '
                     'hold them; a richer motion determines them better)')
    return lines


def report_path(output):
    """OUT.report.yaml beside OUT.yaml."""
    root, extension = os.path.splitext(output)
    return f'{root}.report.yaml' if extension in ('.yaml', '.yml') else f'{output}.report.yaml'


def write_report(path, joints, result, threshold, args):
    """The report file (YAML): per base parameter its expression, value, standard
    deviation and relative standard deviation [%], essential or not; the essential ones;
    those above the threshold; friction laws, offsets, drive gains."""
    u = result.uncertainty
    document = {
        'prior': list(args.params_files), 'recordings': list(args.bags),
        'samples': int(result.samples), 'condition_number': float(result.condition),
        'relative_std_threshold_percent': float(100.0 * threshold)}
    if u is not None:
        document.update(_uncertainty_document(u, threshold, args))
    document['friction_model'] = {j: law for j, law in zip(
        joints, result.friction_model or ('coulomb',) * len(joints))}
    if result.stribeck_velocity is not None:
        document['stribeck_velocity'] = {j: float(v) for j, v, law in zip(
            joints, result.stribeck_velocity, result.friction_model)
            if law in ('tanh', 'stribeck')}
    if result.offset is not None:
        document['effort_offset'] = {j: float(v) for j, v in zip(joints, result.offset)}
    if result.drive_gain is not None:
        document['drive_gain'] = {j: float(v) for j, v in zip(joints, result.drive_gain)}
    write_file(path, '# `identify estimate` report: how well the data determine the base '
               'parameters\n' + yaml.safe_dump(document, sort_keys=False, allow_unicode=True))


def _uncertainty_document(u, threshold, args):
    """The report's base-parameter entries (`write_report`)."""
    finite = [float(100.0 * r) if math.isfinite(r) else None for r in u.relative_std]
    return {
        'base_parameters': [
            {'name': name, 'expression': expression, 'value': float(value),
             'least_squares_value': float(wls), 'std': float(std),
             'relative_std_percent': relative, 'essential': bool(essential)}
            for name, expression, value, wls, std, relative, essential in zip(
                u.names, u.expressions, u.value, u.wls, u.std, finite, u.essential)],
        'essential_parameters': [n for n, e in zip(u.names, u.essential) if e],
        'above_threshold': u.above(threshold),
        'method': 'standard deviations of the unconstrained weighted least-squares '
                  'estimate of the base parameters (per-joint weights, residual variances '
                  'with N - p degrees of freedom, the correlation of the low-pass filtered '
                  'samples included); values are the constrained estimate written to the '
                  'parameter file. Essential parameters: Pham & Gautier (1991), ratio '
                  f'{getattr(args, "essential_ratio", 100.0):g}.'}


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


def parameter_file_text(robot, comments=(), section='/**', header=None):
    """The text of ``SECTION: ros__parameters: robot: ...`` with the (flat or nested) robot
    keys, each list of one type, after `header` (default OUTPUT_HEADER)."""
    nested = {}
    for key, value in _flatten(robot).items():
        head = nested
        parts = key.split('.')
        for part in parts[:-1]:
            head = head.setdefault(part, {})
        head[parts[-1]] = _floats_in_lists(value)
    lines = [(header or OUTPUT_HEADER).rstrip('\n')] + [f'# {c}' for c in comments]
    lines += [f'{section}:', '  ros__parameters:', '    robot:']

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


def write_parameter_file(path, robot, args, result, held, prior_errors, identified_errors,
                         timing='instant', section='/**', inconsistent=False):
    comments = [f'prior: {" ".join(args.params_files)}',
                f'recordings: {" ".join(args.bags)} (effort timing {timing})',
                'accelerations from the recorded '
                + {'velocity': 'velocities', 'position': 'positions'}[
                    getattr(result, 'accelerations', 'velocity')],
                f'{result.samples} samples used, condition number {result.condition:.4g}',
                f'validation ({held}), relative effort error per joint: prior '
                f'{_percentages(prior_errors.relative)}, identified '
                f'{_percentages(identified_errors.relative)}']
    if inconsistent:
        comments.append('not physically consistent: ' + '; '.join(result.consistency))
    if getattr(result, 'drive_gain', None) is not None:
        comments.append('drive gains (joint effort = gain x recorded effort; the values '
                        'here are joint efforts): '
                        + ', '.join(f'{g:.6g}' for g in result.drive_gain))
    write_file(path, parameter_file_text(robot, comments, section,
                                         INCONSISTENT_HEADER if inconsistent else None))


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

        def send(*arguments):       # --send: ROS (plan_sender imports rclpy), imported here
            from robot_dynamics.nodes.identification.plan_sender import send as send_plan
            return send_plan(*arguments)
        return run_plan(argv, options, send)
    try:
        return estimate(options)
    except InputError as error:
        print(f'identify estimate: {error}', file=sys.stderr)
        return BAD_INPUT
    except (EstimationError, ImportError) as error:     # ImportError: pip install ...
        print(f'identify estimate: {_first_line(error)}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('identify estimate: stopped', file=sys.stderr)
        return STOPPED
    except Exception as error:  # noqa: B902 - anything else is a bug, not bad input
        where = _innermost_frame(error)
        print(f'identify estimate: internal error (a bug in robot_dynamics, not a problem '
              f'of the data; please report it): {type(error).__name__}: '
              f'{_first_line(error)}{where}', file=sys.stderr)
        return BUG


def _innermost_frame(error):
    """' (at file.py:line)' of where `error` was raised ('' without a traceback)."""
    import traceback
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ''
    last = frames[-1]
    return f' (at {os.path.basename(last.filename)}:{last.lineno})'


def _without_ros_args(argv):
    """argv without a ``--ros-args ... [--]`` part (estimate does not use ROS)."""
    from robot_dynamics.parameters.params_file import ros_args_positions
    return [arg for _, arg, inside in ros_args_positions(argv) if not inside]


if __name__ == '__main__':
    sys.exit(main())
