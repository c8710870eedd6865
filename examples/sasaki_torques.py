#!/usr/bin/env python3
"""[SAS] §4 reproduced: joint torques of the six-link arm along the A→B trapezoidal move.

Sasaki (JAERI-M 90-147, §4) moves the hand of a six-link arm from A (−0.1, 0.35, 1.63) m to
B (−0.10, 0.35, 1.83) m at constant orientation, interpolating in joint space between the
inverse-kinematics solutions he prints, with a trapezoidal velocity profile in three equal
thirds (Fig. 6), and plots the driving torques (Figs. 7–12; the curves are not in the text).

The arm is config/sasaki6.yaml: the DH table reconstructed in doc/conventions.md (the paper's d
column and joint offsets are lost), [SAS]'s masses, g = 9.8 m/s², centre of mass at the
link midpoints ([SAS] eq. 3.26, corrected) and cylinder inertias (assumed; the paper gives
none). The duration T is not in the paper: T = 1 s is our choice (peak joint speed
3Δθ/(2T) = 62 °/s on joint 3). No friction (no b_i given).

Prints the forward-kinematics check at A and B and a table of torques at the corners of
the profile; writes doc/figures/sasaki_torques.png when matplotlib is installed.

    python examples/sasaki_torques.py            # full run
    python examples/sasaki_torques.py --short    # CI setting
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.trajectories import profiles  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402

# [SAS] §4: hand positions [m], orientation n = (0, 0, 1), o = (1, 0, 0), and the
# inverse-kinematics joint angles [deg] printed for them.
POINT_A = np.array([-0.1, 0.35, 1.63])
POINT_B = np.array([-0.10, 0.35, 1.83])
HAND_N = np.array([0.0, 0.0, 1.0])
HAND_O = np.array([1.0, 0.0, 0.0])
Q_A = np.radians([2.7533, 0.1502, 85.7259, -33.7722, -85.0428, 33.6731])
Q_B = np.radians([10.4705, 8.7346, 44.3932, -17.1186, -51.8741, 13.6195])
DURATION = 1.0      # T: not given in [SAS]; our choice, s
# Static gravity torques at A and B [N m] computed independently when the table was
# reconstructed (doc/conventions.md; not paper results: g = 9.8, centres of mass at the
# link midpoints); printed for comparison.
INDEPENDENT_STATIC = {'A': (0.0, -58.8056, -58.4331, 5.6840, 0.0, 0.0),
                 'B': (0.0, -68.6659, -47.0869, 1.9061, 0.0, 0.0)}


def kinematics_check(model):
    """Hand position and orientation errors of forward kinematics at A and B."""
    rows = {}
    for label, q, target in (('A', Q_A, POINT_A), ('B', Q_B, POINT_B)):
        tip = dynamics.forward_kinematics(model, q)[-1]
        rows[label] = {
            'position': tip[:3, 3],
            'position_error': float(np.linalg.norm(tip[:3, 3] - target)),
            'orientation_error': float(max(np.linalg.norm(tip[:3, 0] - HAND_N),
                                           np.linalg.norm(tip[:3, 1] - HAND_O))),
        }
    return rows


def torque_history(model, samples):
    """τ(t) = inverse_dynamics along the [SAS] trapezoid, one batched call."""
    t = np.linspace(0.0, DURATION, samples)
    q, qd, qdd = profiles.trapezoid(t, Q_A, Q_B, DURATION)
    return t, q, dynamics.inverse_dynamics(model, q, qd, qdd)


def corner_torques(model):
    """τ just after and just before each acceleration jump (0, T/3, 2T/3, T), and at the
    mid-points of the three phases: the values that shape Figs. 7–12."""
    eps = 1e-9 * DURATION
    T = DURATION
    labels = ['0+', 'T/6', 'T/3-', 'T/3+', 'T/2', '2T/3-', '2T/3+', '5T/6', 'T-']
    times = np.array([eps, T / 6, T / 3 - eps, T / 3 + eps, T / 2, 2 * T / 3 - eps,
                      2 * T / 3 + eps, 5 * T / 6, T - eps])
    q, qd, qdd = profiles.trapezoid(times, Q_A, Q_B, T)
    return labels, times, dynamics.inverse_dynamics(model, q, qd, qdd)


def peak_torques(history, corners):
    """max |τ| per joint over the move: the sampled history alone can miss a jump's high
    side (τ jumps where q̈ does), so the one-sided corner values count too."""
    return np.max(np.abs(np.concatenate([history, corners])), axis=0)


def print_tables(model, kin, labels, tau, static):
    print(f'[SAS] six-link arm {model!r}, trapezoid A -> B, T = {DURATION:g} s (our choice)\n')
    print('Forward kinematics at the paper\'s inverse-kinematics angles')
    print(f'{"point":<6}{"target [m]":>24}{"computed [m]":>33}{"|dp| [m]":>11}'
          f'{"|dn|,|do|":>11}')
    for label, target in (('A', POINT_A), ('B', POINT_B)):
        row = kin[label]
        print(f'{label:<6}' + ''.join(f'{v:8.3f}' for v in target)
              + '  ' + ''.join(f'{v:11.6f}' for v in row['position'])
              + f'{row["position_error"]:11.1e}{row["orientation_error"]:11.1e}')
    print()
    print('Joint torques along the move [N m] (inverse dynamics, g = 9.8 m/s^2)')
    print(f'{"t":<8}' + ''.join(f'{"tau" + str(i + 1):>10}' for i in range(6)))
    for label, row in zip(labels, tau):
        print(f'{label:<8}' + ''.join(f'{round(v, 3) + 0.0:10.3f}' for v in row))
    for label, row in static.items():
        print(f'{"g(" + label + ")":<8}' + ''.join(f'{round(v, 3) + 0.0:10.3f}' for v in row))
    for label, row in INDEPENDENT_STATIC.items():
        print(f'{"ind. " + label:<8}' + ''.join(f'{round(v, 3) + 0.0:10.3f}' for v in row))
    print('(g(A), g(B): static gravity torques; "ind.": the same quantity computed '
          'independently when the DH table was reconstructed, doc/conventions.md)\n')


def write_figure(path, t, tau, gravity):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('matplotlib not installed: no figure written')
        return None
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.2), sharex=True)
    for i, ax in enumerate(axes.flat):
        ax.plot(t, tau[:, i], lw=1.2, label='τ (inverse dynamics)')
        ax.plot(t, gravity[:, i], lw=0.9, ls='--', label='gravity part g(q)')
        for x in (DURATION / 3, 2 * DURATION / 3):
            ax.axvline(x, color='0.7', lw=0.6, ls=':')
        ax.set_title(f'joint {i + 1} (cf. [SAS] Fig. {7 + i})', fontsize=9)
        ax.set_ylabel('N m', fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel('t [s]')
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f'[SAS] six-link arm, trapezoidal joint move A → B, T = {DURATION:g} s '
                 '(assumed inertias, see config/sasaki6.yaml)', fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    print(f'figure: {os.path.relpath(path)}')
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--short', action='store_true', help='CI setting: fewer samples')
    parser.add_argument('--config', default=os.path.join(HERE, '..', 'config', 'sasaki6.yaml'))
    parser.add_argument('--figure-dir', default=os.path.join(HERE, '..', 'doc', 'figures'))
    parser.add_argument('--no-figure', action='store_true')
    args = parser.parse_args(argv)
    model = RobotModel.from_yaml(args.config)
    kin = kinematics_check(model)
    labels, times, tau = corner_torques(model)
    static = {'A': dynamics.gravity_torques(model, Q_A),
              'B': dynamics.gravity_torques(model, Q_B)}
    print_tables(model, kin, labels, tau, static)
    t, q, history = torque_history(model, 61 if args.short else 601)
    peak = peak_torques(history, tau)
    print('max |tau| [N m] (sampled move and the one-sided values at the corners): '
          + ' '.join(f'{v:.3f}' for v in peak) + '\n')
    results = {'kinematics': kin, 'labels': labels, 'times': times, 'tau': tau,
               'static': static, 'history': (t, history), 'peak': peak}
    if not args.no_figure:
        results['figure'] = write_figure(os.path.join(args.figure_dir, 'sasaki_torques.png'),
                                         t, history, dynamics.gravity_torques(model, q))
    return results


if __name__ == '__main__':
    main()
