"""What `identify estimate` prints and writes besides the estimate itself: the validation
table, the drive and uncertainty lines, the report file (YAML) and the identified
parameter file (``SECTION: ros__parameters: robot: ...``, floats as rcl reads them, written
through robot_dynamics.nodes.common.outputs.write_file)."""

import math
import os

import numpy as np
import yaml

from robot_dynamics.nodes.common.outputs import write_file
from robot_dynamics.parameters.layering import robot_file_text, value_text
from robot_dynamics.nodes.identify.prior import _flatten

INCONSISTENT_HEADER = ('# Estimated by `identify estimate --write-inconsistent`: NOT physically '
                       'consistent\n# (see the issues below), for inspection only: do not '
                       'load it to control the arm\n')
PER_LINK = {'com': 3, 'inertia': 6}    # written one link per line
OUTPUT_HEADER = ('# Identified by `identify estimate`: load after the robot\'s own file,\n'
                 '#   --ros-args --params-file ROBOT.yaml --params-file THIS.yaml\n')


# ---------------------------------------------------------------------- printed


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
        'samples': int(result.samples), 'condition_number': float(result.condition_number),
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


# ---------------------------------------------------------------------- the output file


def yaml_value(value):
    """A parameter value as rcl reads it (floats always with a point: 4.0e-05, 2.0; one
    type per list): the package's one writer's; an estimate is never written non-finite."""
    items = value.tolist() if hasattr(value, 'tolist') else value
    for item in items if isinstance(items, (list, tuple)) else [items]:
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f'non-finite value {value}')
    return value_text(value)


def parameter_file_text(robot, comments=(), section='/**', header=None):
    """The text of ``SECTION: ros__parameters: robot: ...`` with the (flat or nested) robot
    keys, each list of one type, one link per line for com and inertia, after `header`
    (default OUTPUT_HEADER): the package's one writer (robot_file_text)."""
    for value in _flatten(robot).values():
        yaml_value(value)                     # refuses a non-finite estimate
    return robot_file_text(robot, comments, section, header or OUTPUT_HEADER, PER_LINK)


def _percentages(values):
    return '[' + ', '.join(f'{100.0 * v:.2f} %' for v in values) + ']'


def write_parameter_file(path, robot, args, result, held, prior_errors, identified_errors,
                         timing='instant', section='/**', inconsistent=False):
    comments = [f'prior: {" ".join(args.params_files)}',
                f'recordings: {" ".join(args.bags)} (effort timing {timing})',
                'accelerations from the recorded '
                + {'velocity': 'velocities', 'position': 'positions'}[
                    getattr(result, 'accelerations', 'velocity')],
                f'{result.samples} samples used, condition number {result.condition_number:.4g}',
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
