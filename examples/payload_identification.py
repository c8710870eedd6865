#!/usr/bin/env python3
"""Payload identification in the computed-torque loop, simulated (pure math, no ROS).

The plant (PUMA 560 of config/puma560.yaml, or the Panda of config/panda.yaml) carries a
2.5 kg payload with its centre of mass 5 cm off the flange axis; the controller's model has
none. The controller (100 Hz, zero-order hold, Kp = 100, Kd = 20) tracks an exciting
trajectory (robot_dynamics.identification.exciting_trajectory) and feeds a PayloadEstimator
with what it measures and applies. Then [LEE] §5's move (a move of the same size on the
Panda) is tracked without and with the estimate applied, and the identification is
repeated with Gaussian measurement noise on q and q̇.

Prints the tables and writes doc/figures/payload_identification.png when matplotlib is
installed.

    python examples/payload_identification.py                  # full run (about a minute)
    python examples/payload_identification.py --short          # CI setting (seconds)
    python examples/payload_identification.py --robot panda
"""

import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from robot_dynamics import simulation  # noqa: E402
from robot_dynamics.trajectories import profiles  # noqa: E402
from robot_dynamics.identification import (ExcitationWarning, exciting_trajectory,  # noqa: E402
                                           identify_in_closed_loop, sampled_reference)
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402

KP, KD = 100.0, 20.0            # [LEE] §5, 1/s² and 1/s
CONTROL_PERIOD = 0.01           # s
PLANT_STEP = 0.002              # s, RK4
MOVE_DURATION, SETTLE = 2.0, 0.5
# the payload frame is the last DH link frame; its z axis is the flange axis
PAYLOADS = {
    'puma560': dict(mass=2.5, com=(0.05, 0.0, 0.10), inertia=[8e-3, 0.0, 0.0, 9e-3, 0.0, 4e-3]),
    'panda': dict(mass=2.5, com=(0.05, 0.0, 0.15), inertia=[8e-3, 0.0, 0.0, 9e-3, 0.0, 4e-3]),
}
MOVES = {   # [LEE] §5 on the PUMA 560; one of similar size inside the Panda's limits
    'puma560': (np.radians([90.0, 0.0, 90.0, 0.0, 0.0, 0.0]),
                np.radians([45.0, 30.0, 0.0, 45.0, 60.0, 90.0])),
    'panda': (np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8]),
              np.array([0.8, 0.3, -0.5, -1.4, 0.8, 2.6, -0.6])),
}
# (σ_q [rad], σ_q̇ [rad/s]): none, one 12-bit A/D step of [LEE] §5, and larger
NOISE_LEVELS = ((0.0, 0.0), (4.26e-4, 5e-3), (1e-3, 2e-2), (3e-3, 5e-2), (1e-2, 0.1))


def load(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)     # Corke's PUMA link data
        return RobotModel.from_yaml(os.path.join(HERE, '..', 'config', name + '.yaml'))


def excitation(model, duration):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ExcitationWarning)    # scaled to the speed limits
        return exciting_trajectory(model, duration)


def move(plant, model, name):
    """The quintic move tracked by computed torque with `model` on `plant`."""
    start, goal = MOVES[name]
    reference = (lambda t: profiles.quintic(t, start, goal, MOVE_DURATION))
    controller = simulation.computed_torque(model, KP, KD, reference)
    return simulation.simulate_closed_loop(plant, controller, reference,
                                           MOVE_DURATION + SETTLE, CONTROL_PERIOD, PLANT_STEP,
                                           start, np.zeros(model.n),
                                           effort_limits=model.effort_max)


def identify(plant, model, trajectory, duration, sigma_q=0.0, sigma_qd=0.0, report=None):
    t, q, qd, qdd = trajectory
    return identify_in_closed_loop(plant, model, sampled_reference(t, q, qd, qdd), duration,
                                   q[0], KP, KD, CONTROL_PERIOD, PLANT_STEP, sigma_q=sigma_q,
                                   sigma_qd=sigma_qd, seed=1, report_period=report)


def errors(estimate, payload):
    """(mass error [kg], centre-of-mass error [m])."""
    return (abs(estimate.mass - payload['mass']),
            float(np.linalg.norm(estimate.com - np.asarray(payload['com']))))


def print_estimate(estimate, payload):
    print(f'{"":12}{"true":>12}{"estimate":>12}{"std":>12}')
    print(f'{"mass [kg]":12}{payload["mass"]:12.4f}{estimate.mass:12.4f}'
          f'{estimate.mass_std:12.2e}')
    for axis, name in enumerate('xyz'):
        print(f'{"c_" + name + " [m]":12}{payload["com"][axis]:12.4f}'
              f'{estimate.com[axis]:12.4f}{estimate.com_std[axis]:12.2e}')
    for k, name in enumerate(('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')):
        print(f'{name + " [kg m²]":12}{payload["inertia"][k]:12.2e}{estimate.inertia[k]:12.2e}')
    print(f'condition number {estimate.condition_number:.1f}, {estimate.samples} rows, '
          f'excited: {estimate.excited}, consistent: {estimate.consistent}'
          + (f' ({estimate.reason})' if estimate.reason else ''))
    print()


def write_figure(path, name, history, noise, payload, before, after):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('matplotlib not installed: no figure written')
        return None
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    times = np.array([t for t, _ in history])
    mass = np.array([e.mass for _, e in history])
    mass_std = np.array([e.mass_std for _, e in history])
    com = np.array([e.com for _, e in history])
    ax = axes[0]
    ax.plot(times, mass, color='C0', label='estimate')
    ax.fill_between(times, mass - 3 * mass_std, mass + 3 * mass_std, color='C0', alpha=0.2,
                    label='±3σ')
    ax.axhline(payload['mass'], color='k', lw=0.8, ls='--', label='true')
    excited = [t for t, e in history if e.excited]
    for panel in axes[:2]:
        if excited:
            panel.axvline(excited[0], color='0.5', lw=0.8, ls=':')
    ax.set_ylim(payload['mass'] * 0.9, payload['mass'] * 1.1)
    ax.set_title(f'mass [kg], noise σ(q) = {noise[0]:g} rad, σ(qdot) = {noise[1]:g} rad/s',
                 fontsize=8)
    ax.set_xlabel('excitation time [s]')
    ax.legend(fontsize=7)
    ax = axes[1]
    for axis, label in enumerate('xyz'):
        ax.plot(times, com[:, axis] * 1e3, color=f'C{axis}', label=f'c_{label}')
        ax.axhline(payload['com'][axis] * 1e3, color=f'C{axis}', lw=0.8, ls='--')
    ax.set_ylim(-20.0, 120.0)
    ax.set_title('centre of mass [mm] (dashed: true)', fontsize=9)
    ax.set_xlabel('excitation time [s]')
    ax.legend(fontsize=7)
    ax = axes[2]
    for run, label in ((before, 'without payload model'), (after, 'estimate applied')):
        ax.semilogy(run.t, np.max(np.abs(run.error), axis=1), label=label)
    ax.set_title('move: max over joints |q_ref − q| [rad]', fontsize=9)
    ax.set_xlabel('t [s]')
    ax.legend(fontsize=7)
    fig.suptitle(f'{name}: 2.5 kg payload identified in the computed-torque loop (100 Hz, '
                 f'Kp = {KP:g}, Kd = {KD:g}); dotted: the estimate first reports "excited"',
                 fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    print(f'figure: {os.path.relpath(path)}')
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--robot', choices=sorted(PAYLOADS), default='puma560')
    parser.add_argument('--short', action='store_true',
                        help='CI setting: 10 s of excitation, no noise sweep')
    parser.add_argument('--duration', type=float, default=None,
                        help='excitation duration [s] (default 20, --short 10)')
    parser.add_argument('--figure-dir', default=os.path.join(HERE, '..', 'doc', 'figures'))
    parser.add_argument('--no-figure', action='store_true')
    args = parser.parse_args(argv)
    name = args.robot
    model = load(name)
    payload = PAYLOADS[name]
    plant = model.with_payload(**payload)
    duration = args.duration or (10.0 if args.short else 20.0)
    trajectory = excitation(model, duration)
    print(f'{name}: plant with a {payload["mass"]} kg payload at {payload["com"]} m (last link '
          f'frame), controller without; {duration:g} s of excitation\n')
    estimate, run, _ = identify(plant, model, trajectory, duration)
    print(f'max tracking error during the excitation: '
          f'{np.max(np.abs(run.error)):.3g} rad (the unmodelled payload)')
    print_estimate(estimate, payload)
    applied = model.with_payload(mass=estimate.mass, com=estimate.com, inertia=estimate.inertia)
    before, after = move(plant, model, name), move(plant, applied, name)
    worst = {label: float(np.max(np.abs(r.error))) for label, r in (
        ('before', before), ('after', after), ('true', move(plant, plant, name)))}
    print(f'move, max |q_ref − q| over joints: without payload model {worst["before"]:.3e} rad, '
          f'with the estimate {worst["after"]:.3e} rad ({worst["before"] / worst["after"]:.0f}x '
          f'less), with the true payload {worst["true"]:.3e} rad\n')
    sigma_q, sigma_qd = NOISE_LEVELS[2]
    noisy, _, history = identify(plant, model, trajectory, duration, sigma_q, sigma_qd,
                                 report=0.25)
    converged = next((t for t, e in history if e.excited), None)
    print(f'with noise σ_q = {sigma_q:g} rad, σ_q̇ = {sigma_qd:g} rad/s: excited after '
          f'{converged} s, final mass {noisy.mass:.4f} ± {noisy.mass_std:.4f} kg\n')
    results = {'estimate': estimate, 'history': history, 'payload': payload,
               'move_error_before': worst['before'], 'move_error_after': worst['after'],
               'move_error_true': worst['true'], 'noise': {}}
    if not args.short:
        print('measurement noise (Gaussian on q and q̇), same excitation:')
        print(f'{"σ_q [rad]":>10}{"σ_q̇ [rad/s]":>13}{"|Δm| [kg]":>11}{"σ_m [kg]":>10}'
              f'{"|Δc| [mm]":>11}{"cond":>7}{"usable":>8}')
        for sigma_q, sigma_qd in NOISE_LEVELS:
            noisy, _, _ = identify(plant, model, trajectory, duration, sigma_q, sigma_qd)
            mass_error, com_error = errors(noisy, payload)
            results['noise'][(sigma_q, sigma_qd)] = noisy
            print(f'{sigma_q:10.2e}{sigma_qd:13.2e}{mass_error:11.4f}{noisy.mass_std:10.4f}'
                  f'{com_error * 1e3:11.3f}{noisy.condition_number:7.1f}'
                  f'{str(noisy.usable):>8}')
        print()
    if not args.no_figure:
        suffix = '' if name == 'puma560' else '_' + name
        results['figure'] = write_figure(
            os.path.join(args.figure_dir, f'payload_identification{suffix}.png'),
            name, history, NOISE_LEVELS[2], payload, before, after)
    return results


if __name__ == '__main__':
    main()
