"""`identify estimate`: its options, and its run: the prior model (`prior`), the recordings
(`data`), the estimate (robot_dynamics.identification.arm.identify_arm, whose result is
passed on as it is), its validation errors, the printed report and the written files
(`report`). robot_dynamics.nodes.identify has the usage."""

import argparse
import math
import os
import sys
import time
import traceback
from typing import NamedTuple

import numpy as np

from robot_dynamics.identification import arm
from robot_dynamics.identification.recordings import DEFAULT_TOPIC
from robot_dynamics.model import FRICTION_MODELS
from robot_dynamics.nodes.identify.common import (
    ACCELERATION_SOURCES, BAD_INPUT, BUG, CONTROLLER, EFFORT_TIMINGS, EstimationError,
    first_line, InputError, NOT_CONSISTENT, NOT_EXCITED, STOPPED)
from robot_dynamics.nodes.identify.data import (effort_timing, HELD_OUT, held_out, pieces,
                                                read_recordings, uninformative_efforts)
from robot_dynamics.nodes.identify.prior import layered_parameters, prior_model
from robot_dynamics.nodes.identify.report import (acceleration_line, drive_choice_line,
                                                  drive_lines, format_table, report_path,
                                                  uncertainty_lines, write_parameter_file,
                                                  write_report)


# ---------------------------------------------------------------------- the command line


def add_arguments(commands):
    """The `estimate` subcommand's parser in `commands` (identify's subparsers)."""
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
    return estimate


def check_arguments(parser, args):
    """Cross-argument checks of `estimate`: parser.error (exit status 2)."""
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


def main(options):
    """`identify estimate` with parsed options: the exit status, errors in one line."""
    try:
        return estimate(options)
    except InputError as error:
        print(f'identify estimate: {error}', file=sys.stderr)
        return BAD_INPUT
    except (EstimationError, ImportError) as error:     # ImportError: pip install ...
        print(f'identify estimate: {first_line(error)}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('identify estimate: stopped', file=sys.stderr)
        return STOPPED
    except Exception as error:  # noqa: B902 - anything else is a bug, not bad input
        print(f'identify estimate: internal error (a bug in robot_dynamics, not a problem '
              f'of the data; please report it): {type(error).__name__}: '
              f'{first_line(error)}{_innermost_frame(error)}', file=sys.stderr)
        return BUG


def _innermost_frame(error):
    """' (at file.py:line)' of where `error` was raised ('' without a traceback)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ''
    last = frames[-1]
    return f' (at {os.path.basename(last.filename)}:{last.lineno})'


# ---------------------------------------------------------------------- the estimate


class Errors(NamedTuple):
    rms: np.ndarray        # per joint RMS effort error [N m | N]
    relative: np.ndarray   # per joint RMS error / RMS measured effort


def _columns(pieces):
    return tuple(list(column) for column in zip(*pieces))


def identify(prior, pieces, effort_timing='instant', offset=False, friction=None,
             payload_pieces=None, payload=None, essential_ratio=100.0,
             accelerations='auto'):
    """identification.arm.identify_arm's result (`ArmIdentification`) from [(t, q, qd,
    tau)] gap-free recordings (with effort offsets, the friction laws `friction`, drive
    gains from `payload_pieces` recorded with `payload`, q̈ from `accelerations`);
    RecordingError for data that cannot be used (e.g. too short to filter)."""
    t, q, qd, tau = _columns(pieces)
    extra = {}
    if payload_pieces is not None:
        extra = dict(payload_recording=_columns(payload_pieces), payload=payload)
    return arm.identify_arm(prior, t, q, qd, tau, offset=offset, friction=friction,
                            effort_timing=effort_timing, essential_ratio=essential_ratio,
                            accelerations=accelerations, **extra)


def errors(model, pieces, effort_timing='instant', drive_gain=None,
           accelerations=None):
    """Per joint RMS and relative effort error of `model` on [(t, q, qd, tau)] (recorded
    efforts predicted as τ / drive_gain + the model's effort offset; q̈ from
    `accelerations`, as the estimate took it)."""
    t, q, qd, tau = _columns(pieces)
    rms, relative = arm.validation_errors(model, t, q, qd, tau, effort_timing=effort_timing,
                                          drive_gain=drive_gain, accelerations=accelerations)
    return Errors(np.asarray(rms, dtype=float), np.asarray(relative, dtype=float))


def overrides(model):
    """The robot keys of the parameter file (nested dict)."""
    return arm.robot_params_overrides(model)


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
    timing = effort_timing(args, recordings + (validation if args.validate else []), out)
    arm.require_estimator_libraries()
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
    useless = uninformative_efforts(model, joints, pieces(recordings),
                                         scaled=bool(getattr(args, 'payload_bags', None)))
    if useless is not None:
        raise InputError(f'{" ".join(args.bags)}: {useless}; nothing written')
    try:
        result = identify(model, pieces(estimation), timing, **options)
    except arm.RecordingError as error:
        raise InputError(f'the estimation data: {error}') from None
    except RuntimeError as error:     # e.g. the solver failed: one line, status 1
        raise EstimationError(f'the estimation failed: {type(error).__name__}: '
                              f'{first_line(error)}') from None
    out(f'estimation: {result.raw_samples} samples read, {result.samples} used after '
        f'filtering and decimation; condition number {result.condition_number:.4g}')
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
        prior_errors = errors(model, pieces(validation), timing,
                                   accelerations=result.accelerations)
        identified_errors = errors(result.model, pieces(validation), timing,
                                        result.drive_gain, result.accelerations)
    except arm.RecordingError as error:
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
    write_parameter_file(args.output, overrides(result.model), args, result, held,
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
