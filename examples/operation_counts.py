#!/usr/bin/env python3
"""Operation counts and timing of one inverse-dynamics / control-law evaluation, against
the papers' tables.

Counts: the arithmetic in the straight-line Newton–Euler that robot_dynamics.dynamics.codegen
generates for a model (`codegen.operation_counts(codegen.source(model, 'rnea'))`), for the
PUMA 560 and [SAS] presets and for generic n-link chains (no zero or unit DH constants,
full inertia tensors), against [TML] Tables 1 and 3–4, [LEE] Tables 1–2 and [ANG]
eq. (7.43) and Tables 7.3–7.4 (references: doc/references.md). The controller
count adds the servo acceleration q̈_d + Kv ė + Kp e (2n M, 4n A, as [LEE] Table 2 does).
sin/cos calls are listed apart: the papers do not count them.

Timing: one computed-torque law evaluation on the PUMA 560 (ComputedTorqueLaw.effort, the
call the controller node makes) and one call of the generated scalar kernel, against
[LEE]'s "approximately 3 ms" on a PDP-11/45 (690·(3.3 + 0.45) µs + 621·(0.5 + 0.45) µs
= 3.18 ms from its instruction times, doc/reproductions.md).

    python examples/operation_counts.py            # full run
    python examples/operation_counts.py --short    # CI setting (fewer chains, repeats)
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from robot_dynamics.dynamics import codegen  # noqa: E402
from robot_dynamics.control import ComputedTorqueLaw  # noqa: E402
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402

# Per-formulation (multiplications, additions) as functions of n, as printed by the papers.
SEED_FORMULAS = [
    ('[TML] Table 1', 'Lagrange', lambda n: (81 * n**3 / 6 + 165 * n**2 / 2 + 5 * n,
                                                40 * n**3 / 3 + 58 * n**2 - 64 * n / 3)),
    ('[TML] Table 1', 'Newton-Euler', lambda n: (108 * n - 12, 100 * n - 9)),
    ('[TML] Table 1', 'modified N-E', lambda n: (90 * n - 27, 88 * n - 24)),
    ('[ANG] (7.43)', 'N-E, mass centres', lambda n: (137 * n - 22, 110 * n - 14)),
    ('[ANG] Table 7.3', 'Luh et al. 1980', lambda n: (150 * n - 48, 131 * n - 48)),
    ('[ANG] Table 7.3', 'Walker & Orin 1982', lambda n: (137 * n - 22, 101 * n - 11)),
    ('[ANG] Table 7.3', 'Khalil et al. 1986', lambda n: (105 * n - 92, 94 * n - 86)),
    ('[ANG] Table 7.3', 'Balafoutis & Patel', lambda n: (93 * n - 69, 81 * n - 65)),
    ('[ANG] Table 7.3', 'Li & Sankar 1992', lambda n: (88 * n - 69, 76 * n - 66)),
]
CONTROLLER_FORMULAS = [
    ('[LEE] Table 1', 'L-E computed torque',
     lambda n: (128 * n**4 / 3 + 515 * n**3 / 3 + 850 * n**2 / 3 + 82 * n / 3,
                98 * n**4 / 3 + 787 * n**3 / 6 + 640 * n**2 / 3 + 131 * n / 6)),
    ('[LEE] Table 2', 'N-E computed torque', lambda n: (119 * n - 24, 107 * n - 21)),
]
PDP_MUL, PDP_ADD, PDP_FETCH = 3.3e-6, 0.5e-6, 0.45e-6    # [LEE] §5, PDP-11/45, s
LEE_ESTIMATE = 3e-3                                       # [LEE] §5, s


def generic_chain(n, seed=0):
    """An n-revolute standard-DH chain with no special constants: every a, d, α, θ offset
    non-zero and not a multiple of π/2, full (physical) inertia tensors R diag(I) Rᵀ with
    principal moments in [1, 2) kg m², general centres of mass."""
    rng = np.random.default_rng(seed)
    inertia = []
    for _ in range(n):
        rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        tensor = rotation @ np.diag(rng.uniform(1.0, 2.0, 3)) @ rotation.T
        inertia += [tensor[0, 0], tensor[0, 1], tensor[0, 2], tensor[1, 1], tensor[1, 2],
                    tensor[2, 2]]
    return RobotModel(
        'standard', ['revolute'] * n, a=rng.uniform(0.1, 0.5, n),
        alpha=rng.uniform(0.2, 1.3, n), d=rng.uniform(0.1, 0.5, n),
        theta=rng.uniform(0.2, 1.3, n), mass=rng.uniform(1.0, 5.0, n),
        com=rng.uniform(-0.1, 0.1, 3 * n), inertia=inertia)


def rnea_counts(model):
    return codegen.operation_counts(codegen.source(model, 'rnea'))


def servo_counts(n):
    """q̈_d + Kv(q̇_d − q̇) + Kp(q_d − q) per joint: 2 M, 4 A ([LEE] Table 2, last row)."""
    return 2 * n, 4 * n


def linear_fit(ns, values):
    slope, intercept = np.polyfit(ns, values, 1)
    return slope, intercept, float(np.max(np.abs(np.polyval((slope, intercept), ns) - values)))


def load(path):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(path)


def median_time(function, repeats, number):
    """Median over `repeats` of the mean time of `number` calls, s."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            function()
        samples.append((time.perf_counter() - start) / number)
    return float(np.median(samples))


def count_tables(models, ns):
    print('Inverse dynamics (one Newton–Euler call), n = 6: multiplications / additions')
    print(f'{"source":<18}{"formulation":<24}{"mul":>8}{"add":>8}')
    for source, name, formula in SEED_FORMULAS:
        mul, add = formula(6)
        print(f'{source:<18}{name:<24}{mul:8.0f}{add:8.0f}')
    ours = {}
    for label, model in models.items():
        counts = rnea_counts(model)
        ours[label] = counts
        print(f'{"this package":<18}{label:<24}{counts["mul"]:8d}{counts["add"]:8d}'
              f'   (+{counts["call"]} sin/cos, {counts["neg"]} negations)')
    print()
    print('Computed-torque controller (Newton–Euler + servo acceleration), n = 6')
    print(f'{"source":<18}{"formulation":<24}{"mul":>8}{"add":>8}')
    for source, name, formula in CONTROLLER_FORMULAS:
        mul, add = formula(6)
        print(f'{source:<18}{name:<24}{mul:8.0f}{add:8.0f}')
    sm, sa = servo_counts(6)
    for label, counts in ours.items():
        print(f'{"this package":<18}{label:<24}{counts["mul"] + sm:8d}{counts["add"] + sa:8d}')
    print()
    print('Generic n-link revolute chain (no zero/unit DH constants, full inertias)')
    print(f'{"n":>3}{"mul":>8}{"add":>8}   [TML] N-E (108n−12, 100n−9)   '
          '[ANG] (137n−22, 110n−14)')
    rows = []
    for n in ns:
        counts = rnea_counts(generic_chain(n, seed=n))
        rows.append((n, counts['mul'], counts['add']))
        print(f'{n:3d}{counts["mul"]:8d}{counts["add"]:8d}   {108 * n - 12:12d}{100 * n - 9:8d}'
              f'{"":12}{137 * n - 22:8d}{110 * n - 14:8d}')
    fits = {}
    if len(ns) >= 3:
        arr = np.array(rows, dtype=float)
        for key, column in (('mul', 1), ('add', 2)):
            fits[key] = linear_fit(arr[1:, 0], arr[1:, column])
        print('fit over n = {}..{}: mul ≈ {:.1f}n {:+.1f} (max residual {:.1f}), '
              'add ≈ {:.1f}n {:+.1f} (max residual {:.1f})'.format(
                  ns[1], ns[-1], *fits['mul'], *fits['add']))
    print()
    return ours, rows, fits


def timing_table(model, repeats, number):
    law = ComputedTorqueLaw(model, 100.0, 20.0)
    rng = np.random.default_rng(1)
    q, qd, q_ref, qd_ref, qdd_ref = rng.uniform(-1.0, 1.0, (5, model.n))
    rnea = codegen.kernel(model, 'rnea')
    args = tuple(tuple(map(float, v)) for v in (q, qd, qdd_ref))  # floats, not np.float64
    t_law = median_time(lambda: law.effort(q, qd, q_ref, qd_ref, qdd_ref), repeats, number)
    t_kernel = median_time(lambda: rnea(*args), repeats, number)
    pdp = 690 * (PDP_MUL + PDP_FETCH) + 621 * (PDP_ADD + PDP_FETCH)
    print(f'Timing, PUMA 560, median of {repeats} × {number} calls (this machine, shared)')
    print(f'{"what":<58}{"time":>12}')
    print(f'{"[LEE] §5: N-E control law on a PDP-11/45 (stated)":<58}{LEE_ESTIMATE * 1e3:9.2f} ms')
    print(f'{"[LEE] Table 2 counts × PDP-11/45 instruction times":<58}{pdp * 1e3:9.2f} ms')
    print(f'{"ComputedTorqueLaw.effort (public API, numpy arrays)":<58}{t_law * 1e6:9.1f} µs')
    print(f'{"generated scalar Newton–Euler kernel (codegen rnea)":<58}{t_kernel * 1e6:9.1f} µs')
    print(f'speed-up over the PDP-11/45 estimate: {LEE_ESTIMATE / t_law:.0f}× (control law), '
          f'{LEE_ESTIMATE / t_kernel:.0f}× (kernel)\n')
    return {'law': t_law, 'kernel': t_kernel, 'pdp': pdp}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--short', action='store_true',
                        help='CI setting: n = 1..4 only, few timing repeats')
    parser.add_argument('--config-dir', default=os.path.join(HERE, '..', 'config'))
    args = parser.parse_args(argv)
    puma = load(os.path.join(args.config_dir, 'puma560.yaml'))
    models = {'PUMA 560 preset': puma,
              '[SAS] six-link preset': load(os.path.join(args.config_dir, 'sasaki6.yaml')),
              'generic 6R chain': generic_chain(6, seed=6)}
    ns = list(range(1, 5)) if args.short else list(range(1, 9))
    ours, rows, fits = count_tables(models, ns)
    timing = timing_table(puma, 3 if args.short else 7, 50 if args.short else 1000)
    return {'ours': ours, 'generic': rows, 'fits': fits, 'timing': timing}


if __name__ == '__main__':
    main()
