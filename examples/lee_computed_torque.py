#!/usr/bin/env python3
"""[LEE] §5 reproduced: computed torque on a PUMA 560 versus PD and PD + gravity.

The test move of [LEE] §5, (90, 0, 90, 0, 0, 0)° → (45, 30, 0, 45, 60, 90)°, on the
PUMA 560 of config/puma560.yaml (Corke & Armstrong-Hélouvry data [COR]),
controller sampled at 100 Hz with a zero-order hold, Kp = 100, Kv = 20 (acceleration
level, critical damping), plant integrated with RK4.

What [LEE] does not give, and is chosen here (doc/reproductions.md): a quintic point-to-point
profile of duration T (rest to rest), the arm starting at rest on the reference, the plant
step h, the simulated time (T + 0.5 s), a payload for the model-error case. PD gains are
the same acceleration gains turned into effort gains with the mass-matrix diagonal at the
start pose: Kp_τ = 100·M_ii(q0), Kd_τ = 20·M_ii(q0) (simulation.effort_gains).

Prints tables of the maximum tracking error per joint [rad] and writes
doc/figures/lee_tracking_error.png when matplotlib is installed.

    python examples/lee_computed_torque.py            # full run (a few minutes)
    python examples/lee_computed_torque.py --short    # CI setting (seconds)
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
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402

Q_START = np.radians([90.0, 0.0, 90.0, 0.0, 0.0, 0.0])    # [LEE] §5, ϑ_initial
Q_FINAL = np.radians([45.0, 30.0, 0.0, 45.0, 60.0, 90.0])  # [LEE] §5, ϑ_final
KP, KV = 100.0, 20.0                                       # [LEE] §5, 1/s² and 1/s
CONTROL_PERIOD = 0.01                                      # [LEE] §5, sampling time
ADC_QUANTUM = 4.26e-4     # [LEE] §5: one bit of a 12-bit A/D converter, rad
SETTLE = 0.5              # simulated time after the move ends, s
PAYLOAD = dict(mass=2.5, com=(0.0, 0.0, 0.1))  # plant only: the PUMA 560's rated 2.5 kg,
                                               # a point mass 0.1 m along the tool axis
MOTOR_INERTIA = np.array([200e-6, 200e-6, 200e-6, 33e-6, 33e-6, 33e-6])    # Jm, kg m²
GEAR_RATIO = np.array([-62.6111, 107.815, -53.7063, 76.0364, 71.923, 76.686])  # G


def quintic_move(q_start, q_final, duration):
    """Reference t -> (q_d, q̇_d, q̈_d): rest-to-rest quintic (profiles.quintic), held at
    q_final after `duration`."""
    return lambda t: profiles.quintic(t, q_start, q_final, duration)


def load_puma(path):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)  # Corke's link 1: m = 0, I ≠ 0
        return RobotModel.from_yaml(path)


def with_drive_inertia(model):
    """The same arm with the motors' rotor inertia reflected to the joints, armature =
    Jm·G² (Corke's Jm and gear ratios G, [RTB] Puma560.py); the config keeps it off."""
    params = model.to_params()
    params['armature'] = (MOTOR_INERTIA * GEAR_RATIO ** 2).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_params(params)


def run(plant, model, name, duration, control_period, plant_step):
    """One closed-loop run of `name` (ct | pd | pdg) on `plant`, controller model `model`,
    starting at rest on the reference."""
    reference = quintic_move(Q_START, Q_FINAL, duration)
    kp_tau, kd_tau = simulation.effort_gains(model, Q_START, KP, KV)
    controller = {
        'ct': lambda: simulation.computed_torque(model, KP, KV, reference),
        'pd': lambda: simulation.pd(kp_tau, kd_tau, reference),
        'pdg': lambda: simulation.pd_gravity(model, kp_tau, kd_tau, reference),
    }[name]()
    return simulation.simulate_closed_loop(
        plant, controller, reference, duration + SETTLE, control_period, plant_step,
        Q_START, np.zeros(model.n))


LABELS = {'ct': 'computed torque', 'pd': 'PD alone', 'pdg': 'PD + gravity comp.'}


def comparison_table(plant, model, duration, plant_step):
    rows = {}
    for name in ('ct', 'pd', 'pdg'):
        result = run(plant, model, name, duration, CONTROL_PERIOD, plant_step)
        rows[name] = (simulation.max_tracking_error(result), result)
    return rows


def rate_sweep(model, durations, rates, plant_step):
    """Computed torque, perfect model: worst joint error per (T, control rate)."""
    table = {}
    for duration in durations:
        for rate in rates:
            period = 1.0 / rate
            step = min(plant_step, period)
            result = run(model, model, 'ct', duration, period, step)
            table[(duration, rate)] = simulation.max_tracking_error(result)
    return table


def print_errors(title, rows):
    print(title)
    print(f'{"controller":<22}' + ''.join(f'{"joint " + str(i + 1):>10}' for i in range(6))
          + f'{"max":>10}')
    for name, (errors, _) in rows.items():
        print(f'{LABELS[name]:<22}' + ''.join(f'{e:10.2e}' for e in errors)
              + f'{np.max(errors):10.2e}')
    print()


def print_sweep(table):
    print(f'Computed torque, perfect model: max |e| over joints [rad] '
          f'(claim: < {ADC_QUANTUM:.2e})')
    print(f'{"T [s]":>6} {"rate [Hz]":>10} {"worst joint":>12} {"max |e|":>10} '
          f'{"claim holds":>12}')
    for (duration, rate), errors in table.items():
        worst = int(np.argmax(errors))
        print(f'{duration:6.1f} {rate:10.0f} {worst + 1:12d} {errors[worst]:10.2e} '
              f'{"yes" if errors[worst] < ADC_QUANTUM else "no":>12}')
    print()


def write_figure(path, perfect, loaded, loaded_title, duration):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('matplotlib not installed: no figure written')
        return None
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharex=True)
    cases = ((axes[0], perfect['ct'][1], 'computed torque, perfect model'),
             (axes[1], loaded['ct'][1], loaded_title),
             (axes[2], perfect['pdg'][1], 'PD + gravity comp., perfect model'))
    for ax, result, title in cases:
        for i in range(6):
            ax.plot(result.t, result.error[:, i], lw=1, label=f'joint {i + 1}')
        ax.axhspan(-ADC_QUANTUM, ADC_QUANTUM, color='0.85', zorder=0)
        ax.axvline(duration, color='0.5', lw=0.8, ls=':')
        ax.set_title(title, fontsize=9)
        ax.set_xlabel('t [s]')
    axes[0].set_ylabel('q_ref − q [rad]')
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle(f'PUMA 560 (config/puma560.yaml), [LEE] §5 move (90, 0, 90, 0, 0, 0)° → '
                 f'(45, 30, 0, 45, 60, 90)°, quintic T = {duration} s, 100 Hz ZOH, '
                 f'Kp = 100, Kv = 20 (grey: ±{ADC_QUANTUM} rad)', fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    print(f'figure: {os.path.relpath(path)}')
    return path


def convergence_check(model, duration, plant_step):
    """Largest change of the computed-torque max errors when the RK4 step is halved."""
    coarse = run(model, model, 'ct', duration, CONTROL_PERIOD, plant_step)
    fine = run(model, model, 'ct', duration, CONTROL_PERIOD, plant_step / 2.0)
    e1 = simulation.max_tracking_error(coarse)
    e2 = simulation.max_tracking_error(fine)
    return float(np.max(np.abs(e1 - e2) / e2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--short', action='store_true', help='CI setting: T = 1 s, RK4 step '
                        '= control period, no drive-inertia case, one-point sweep')
    parser.add_argument('--config', default=os.path.join(HERE, '..', 'config', 'puma560.yaml'))
    parser.add_argument('--duration', type=float, default=None,
                        help='quintic move duration T [s] (default 2, --short 1)')
    parser.add_argument('--figure-dir', default=os.path.join(HERE, '..', 'doc', 'figures'))
    parser.add_argument('--no-figure', action='store_true')
    args = parser.parse_args(argv)
    model = load_puma(args.config)
    duration = args.duration or (1.0 if args.short else 2.0)
    plant_step = CONTROL_PERIOD if args.short else 0.0025
    print(f'[LEE] test move on {model!r} from {os.path.relpath(args.config)}: quintic, '
          f'T = {duration:g} s, control {1.0 / CONTROL_PERIOD:.0f} Hz ZOH, '
          f'RK4 h = {plant_step * 1e3:g} ms, Kp = {KP:g}, Kv = {KV:g}\n')
    results = {'duration': duration, 'adc_quantum': ADC_QUANTUM}
    perfect = comparison_table(model, model, duration, plant_step)
    print_errors('Max |q_ref − q| [rad], plant = controller model (rigid bodies)', perfect)
    payload = f'{PAYLOAD["mass"]:g} kg payload at {PAYLOAD["com"]} m (last link frame)'
    loaded = comparison_table(model.with_payload(**PAYLOAD), model, duration, plant_step)
    print_errors(f'Max |q_ref − q| [rad], plant carries a {payload}, controller does not',
                 loaded)
    results['perfect'] = {k: v[0] for k, v in perfect.items()}
    results['payload'] = {k: v[0] for k, v in loaded.items()}
    if not args.short:
        driven = with_drive_inertia(model)
        loaded_driven = comparison_table(driven.with_payload(**PAYLOAD), driven, duration,
                                         plant_step)
        print_errors(f'Same {payload}, motor inertia Jm·G² in plant and controller',
                     loaded_driven)
        results['payload_drive'] = {k: v[0] for k, v in loaded_driven.items()}
        change = convergence_check(model, duration, plant_step)
        print(f'RK4 step check: halving h changes the computed-torque errors by at most '
              f'{change:.1e} (relative)\n')
        results['step_change'] = change
        sweep = rate_sweep(model, (1.0, 2.0, 4.0, 6.0, 8.0), (100.0, 200.0, 1000.0),
                           plant_step)
    else:
        sweep = rate_sweep(model, (duration,), (200.0,), CONTROL_PERIOD / 2.0)
    print_sweep(sweep)
    results['sweep'] = sweep
    if not args.no_figure:
        shown, title = ((loaded, f'computed torque, {PAYLOAD["mass"]:g} kg payload')
                        if args.short else (loaded_driven, f'computed torque, '
                                            f'{PAYLOAD["mass"]:g} kg payload, motor inertia'))
        results['figure'] = write_figure(
            os.path.join(args.figure_dir, 'lee_tracking_error.png'), perfect, shown, title,
            duration)
    return results


if __name__ == '__main__':
    main()
