#!/usr/bin/env python3
"""Whole-arm identification through the `identify` executable, on simulated recordings.

The plant is the robot preset (config/puma560.yaml or config/panda.yaml) with every link's
mass, centre of mass and inertia perturbed by up to ±30 % and drives the preset lacks
(armature, viscous and Coulomb friction: robot_dynamics.arm_identification.drive_terms).
Computed torque with the preset's model (1 kHz, Kp = 100, Kd = 20) tracks the optimised
excitation and, separately, a validation motion it never sees, with Gaussian sensor noise
(σ_q = 1 mrad, σ_q̇ = 0.01 rad/s, efforts 1 % of their RMS). Both runs are written as
rosbag2 folders of sensor_msgs/JointState, as `ros2 bag record /joint_states` would on the
real arm, then

    identify estimate --params-file PRESET --bag excitation --validate validation \\
        --effort-timing held_after --output identified.yaml

runs on them, and the written file, layered after the preset as the controller loads it, is
compared with the preset: the efforts each predicts along the validation motion (the
inverse dynamics of the plant's true states and accelerations) against the efforts the
plant received. Prints the executable's report and the relative errors against the
noise-free efforts; writes doc/figures/identification_validation.png when matplotlib is
installed.

    python examples/arm_identification.py                   # PUMA 560, 30 s (minutes)
    python examples/arm_identification.py --robot panda
    python examples/arm_identification.py --short           # CI setting
"""

import argparse
import contextlib
import io
import os
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics.identification.recordings import write_joint_states  # noqa: E402
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402
from robot_dynamics.nodes.identify import main as identify, prior_model  # noqa: E402

KP, KD = 100.0, 20.0            # 1/s², 1/s
CONTROL_PERIOD = 1e-3           # s: 1 kHz, the recording's rate too
NOISE = dict(sigma_q=1e-3, sigma_qd=0.01, effort_noise=0.01)
STARTS = {'puma560': np.array([0.0, -0.5, 0.5, 0.0, 0.3, 0.0]),
          'panda': np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])}


def preset(name):
    return os.path.normpath(os.path.join(HERE, '..', 'config', name + '.yaml'))


def load(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)     # Corke's PUMA link data
        return RobotModel.from_yaml(preset(name))


def record(plant, prior, joints, excitation, folder, seed):
    """The closed loop on `excitation`, written to the bag `folder`; the Experiment."""
    run = ai.closed_loop_experiment(plant, prior, excitation.reference, excitation.duration,
                                    excitation.q0, KP, KD, control_period=CONTROL_PERIOD,
                                    plant_step=CONTROL_PERIOD, seed=seed, **NOISE)
    write_joint_states(folder, joints, run.t, run.q, run.qd, run.tau)
    return run


def predicted(model, run):
    """The model's efforts along the plant's true motion."""
    return dynamics.inverse_dynamics(model, run.q_true, run.qd_true, run.qdd_true)


def relative(tau, reference):
    return np.sqrt(np.mean((tau - reference) ** 2, axis=0)) / np.sqrt(
        np.mean(reference ** 2, axis=0))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--robot', choices=sorted(STARTS), default='puma560')
    parser.add_argument('--short', action='store_true',
                        help='CI setting: 10 s of excitation, the optimisation\'s random '
                        'draw only, no figure unless --figure-dir is given')
    parser.add_argument('--duration', type=float, default=None,
                        help='excitation [s] (default 30, --short 10)')
    parser.add_argument('--figure-dir', default=None,
                        help='where the figure goes (default doc/figures)')
    parser.add_argument('--no-figure', action='store_true')
    args = parser.parse_args(argv)
    name = args.robot
    prior = load(name)
    plant = ai.perturbed_model(prior, 0.3, seed=1, **ai.drive_terms(prior))
    _, joints, _ = prior_model([preset(name)])
    duration = args.duration or (10.0 if args.short else 30.0)
    iterations = 0 if args.short else 20
    q0 = STARTS[name]
    excitation = ai.optimal_excitation(prior, duration, q0, seed=1, iterations=iterations)
    validation_motion = ai.optimal_excitation(prior, min(duration, 15.0), q0, seed=101,
                                              iterations=0)
    print(f'{name}: {duration:g} s of excitation, condition number '
          f'{excitation.condition:.3g}; validation motion {validation_motion.duration:g} s\n')
    with tempfile.TemporaryDirectory() as folder:
        bag, held = os.path.join(folder, 'excitation'), os.path.join(folder, 'validation')
        output = os.path.join(folder, 'identified.yaml')
        record(plant, prior, joints, excitation, bag, seed=1)
        validation = record(plant, prior, joints, validation_motion, held, seed=101)
        report = io.StringIO()
        with contextlib.redirect_stdout(report):
            code = identify(['identify', 'estimate', '--params-file', preset(name), '--bag',
                             bag, '--validate', held, '--effort-timing', 'held_after',
                             '--output', output])
        print(report.getvalue())
        if code != 0:
            print(f'identify estimate exited with status {code}')
            return {'code': code, 'report': report.getvalue()}
        identified, _, _ = prior_model([preset(name), output], 'computed_torque_controller')
    taus = {label: predicted(model, validation) for label, model in
            (('prior', prior), ('identified', identified), ('true', plant))}
    errors = {label: relative(tau, validation.tau_true) for label, tau in taus.items()}
    print('relative RMS effort error on the validation motion, against the plant\'s '
          'noise-free efforts [%]:')
    for label in ('prior', 'identified'):
        print(f'  {label:<11}' + ''.join(f'{100 * e:8.3f}' for e in errors[label]))
    print(f'  {"(measured":<11}' + ''.join(
        f'{100 * e:8.3f}' for e in relative(validation.tau, validation.tau_true))
        + '   the 1 % effort noise itself)')
    results = {'code': code, 'report': report.getvalue(), 'errors': errors,
               'consistency': ai.physical_consistency_issues(identified),
               'condition': excitation.condition}
    if not args.no_figure and (args.figure_dir or not args.short):
        results['figure'] = plot(name, joints, validation, taus,
                                 args.figure_dir or os.path.normpath(
                                     os.path.join(HERE, '..', 'doc', 'figures')))
    return results


def plot(name, joints, run, taus, directory):
    """Measured and predicted efforts per joint on the validation motion."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('matplotlib is not installed: no figure')
        return None
    n = len(joints)
    columns = 2
    rows = (n + 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(11, 2.2 * rows), sharex=True)
    for j, axis in enumerate(axes.flat):
        if j >= n:
            axis.axis('off')
            continue
        axis.plot(run.t, run.tau[:, j], color='0.7', lw=2.5, label='measured (1 % noise)')
        axis.plot(run.t, taus['prior'][:, j], color='tab:red', lw=0.8, ls='--',
                  label='prior (robot file)')
        axis.plot(run.t, taus['identified'][:, j], color='tab:blue', lw=0.6,
                  label='identified')
        axis.set_ylabel(f'{joints[j]} [N m]')
    for axis in axes[-1]:
        axis.set_xlabel('t [s]')
    axes.flat[0].legend(loc='upper right', fontsize=7, ncol=3)
    figure.suptitle(f'{name}: efforts on a validation motion the estimator never saw')
    figure.tight_layout()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, 'identification_validation.png')
    figure.savefig(path, dpi=90)
    plt.close(figure)
    print(f'wrote {path}')
    return path


if __name__ == '__main__':
    main()
