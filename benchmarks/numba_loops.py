"""The looped numba kernels (robot_dynamics._numba_loops) against Pinocchio and against the
straight-line numba kernels (robot_dynamics._fast_numba), one table.

    PYTHONPATH=. /tmp/venvs/kilted/bin/python benchmarks/numba_loops.py [--repeats N]

Method as in benchmarks/run.py: alternate samples of ~20 ms loops, medians of the times
and of the paired ratios. 'loops' calls `_numba_loops.<function>_one` (the API the
dynamics module calls, incl. its checks); 'kernel' the compiled kernel directly;
'straight' the straight-line numba kernel of `_fast_numba` directly (n ≤ 12 only).
Compile times: `--compile` measures a cold compilation in a fresh process with an empty
cache directory, then a second process that loads numba's cache.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

from robot_dynamics import _fast_numba, dynamics  # noqa: E402, I100
from robot_dynamics import _numba_loops as loops  # noqa: E402
from run import load_preset, paired, pin, pinocchio_model, random_chain  # noqa: E402, I100


def _row(what, result):
    ours, ref, ratio = result
    print(f'| {what} | {ours * 1e6:.2f} µs | {ref * 1e6:.2f} µs | {ratio:.2f} |', flush=True)


def one_state(models, repeats, rng):
    for name, model in models.items():
        pm = pinocchio_model(model)
        data = pm.createData()
        q, qd, qdd = (rng.uniform(-1.0, 1.0, model.n) for _ in range(3))
        tau = pin.rnea(pm, data, q, qd, qdd).copy()
        assert np.allclose(loops.inverse_dynamics_one(model, q, qd, qdd), tau, atol=1e-8)
        assert np.allclose(loops.forward_dynamics_one(model, q, qd, tau), qdd, atol=1e-8)
        P, out = loops.packed(model), np.empty(model.n)
        rnea, aba = loops._kernel('rnea_one'), loops._kernel('aba_one')
        _row(f'ID loops, {name} / pin.rnea', paired(
            lambda: loops.inverse_dynamics_one(model, q, qd, qdd),
            lambda: pin.rnea(pm, data, q, qd, qdd), repeats))
        _row(f'ID kernel, {name} / pin.rnea', paired(
            lambda: rnea(P, q, qd, qdd, out), lambda: pin.rnea(pm, data, q, qd, qdd),
            repeats))
        _row(f'FD loops, {name} / pin.aba', paired(
            lambda: loops.forward_dynamics_one(model, q, qd, tau),
            lambda: pin.aba(pm, data, q, qd, tau), repeats))
        _row(f'FD kernel, {name} / pin.aba', paired(
            lambda: aba(P, q, qd, tau, out), lambda: pin.aba(pm, data, q, qd, tau),
            repeats))


def straight_line(models, repeats, rng):
    """Looped kernel / straight-line kernel, both called directly (ratio < 1: loops win)."""
    for name, model in models.items():
        if model.n > dynamics.NUMBA_MAX_LINKS:
            continue
        q, qd, qdd = (rng.uniform(-1.0, 1.0, model.n) for _ in range(3))
        body = _fast_numba.body_array(model)
        start = time.perf_counter()
        s_rnea = _fast_numba.kernel(model, 'rnea_one')
        s_aba = _fast_numba.kernel(model, 'aba_one')
        s_rnea(q, qd, qdd, body)
        s_aba(q, qd, qdd, body)
        print(f'# straight-line numba ID + FD for {name}: first call '
              f'{time.perf_counter() - start:.1f} s', flush=True)
        P, out = loops.packed(model), np.empty(model.n)
        rnea, aba = loops._kernel('rnea_one'), loops._kernel('aba_one')
        _row(f'ID loops kernel / straight-line kernel, {name}', paired(
            lambda: rnea(P, q, qd, qdd, out), lambda: s_rnea(q, qd, qdd, body), repeats))
        _row(f'FD loops kernel / straight-line kernel, {name}', paired(
            lambda: aba(P, q, qd, qdd, out), lambda: s_aba(q, qd, qdd, body), repeats))


def public_api(models, repeats, rng):
    """What a user sees today with set_backend('numba') (the straight-line kernels behind
    dynamics.py / integration.py, n ≤ 12), against the looped API called directly; and the
    looped RK4 step against a Python RK4 around pin.aba (ratio target ≤ 0.5)."""
    from robot_dynamics import integration
    from run import rk4_pinocchio
    for name, model in models.items():
        if model.n > dynamics.NUMBA_MAX_LINKS:
            continue
        q, qd, qdd = (rng.uniform(-1.0, 1.0, model.n) for _ in range(3))
        dynamics.set_backend('numba')
        try:
            dynamics.inverse_dynamics(model, q, qd, qdd)
            dynamics.forward_dynamics(model, q, qd, qdd)
            integration.rk4_step(model, q, qd, qdd, 1e-3)
            _row(f'ID loops API / dynamics numba backend, {name}', paired(
                lambda: loops.inverse_dynamics_one(model, q, qd, qdd),
                lambda: dynamics.inverse_dynamics(model, q, qd, qdd), repeats))
            _row(f'FD loops API / dynamics numba backend, {name}', paired(
                lambda: loops.forward_dynamics_one(model, q, qd, qdd),
                lambda: dynamics.forward_dynamics(model, q, qd, qdd), repeats))
            _row(f'RK4 loops API / integration numba backend, {name}', paired(
                lambda: loops.rk4_step_one(model, q, qd, qdd, 1e-3),
                lambda: integration.rk4_step(model, q, qd, qdd, 1e-3), repeats))
        finally:
            dynamics.set_backend('generated')
        pm = pinocchio_model(model)
        data = pm.createData()
        _row(f'RK4 loops API / Python RK4 around pin.aba, {name}', paired(
            lambda: loops.rk4_step_one(model, q, qd, qdd, 1e-3),
            lambda: rk4_pinocchio(pm, data, q, qd, qdd, 1e-3), repeats))


def batch(models, repeats, rng, size=1000):
    for name, model in models.items():
        pm = pinocchio_model(model)
        data = pm.createData()
        Q, QD, QDD = (rng.uniform(-1.0, 1.0, (size, model.n)) for _ in range(3))

        def rnea_loop():
            for k in range(size):
                pin.rnea(pm, data, Q[k], QD[k], QDD[k])

        def aba_loop():
            for k in range(size):
                pin.aba(pm, data, Q[k], QD[k], QDD[k])
        t, r, ratio = paired(lambda: loops.inverse_dynamics_batch(model, Q, QD, QDD),
                             rnea_loop, repeats)
        _row(f'batch B={size} ID per sample, {name} / pin.rnea loop',
             (t / size, r / size, ratio))
        t, r, ratio = paired(lambda: loops.forward_dynamics_batch(model, Q, QD, QDD),
                             aba_loop, repeats)
        _row(f'batch B={size} FD per sample, {name} / pin.aba loop',
             (t / size, r / size, ratio))


def compile_times():
    """Seconds to compile (or load) the kernels in a fresh process, cold (empty cache
    directory), then cached: the first one-state inverse dynamics alone (it also pays
    numba's start-up), then the rest of the one-state kernels, then the batch kernels."""
    code = ('import time; from robot_dynamics import _numba_loops as L; t = time.perf_counter()\n'
            'for group in ({first}, {one}, {batch}):\n'
            '    L.compile_kernels(group); print(time.perf_counter() - t); '
            't = time.perf_counter()\n')
    names = list(loops.ENTRIES)
    first = ['rnea_one']
    one = [k for k in names if k.endswith('_one') and k not in first]
    batch = [k for k in names if k.endswith('_batch')]
    code = code.format(first=first, one=one, batch=batch)
    env = dict(os.environ, PYTHONPATH=REPO)
    with tempfile.TemporaryDirectory() as cache:
        env['ROBOT_DYNAMICS_CACHE'] = cache
        for label in ('cold', 'cached'):
            out = subprocess.run([sys.executable, '-c', code], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            print(f'# compile, {label}: rnea_one {float(out[0]):.2f} s, other one-state '
                  f'kernels {float(out[1]):.2f} s, batch kernels {float(out[2]):.2f} s',
                  flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeats', type=int, default=15)
    parser.add_argument('--compile', action='store_true', help='also time compilation')
    parser.add_argument('--straight', action='store_true',
                        help='also compare with the straight-line kernels (compiles them)')
    parser.add_argument('--only-straight', action='store_true',
                        help='only the comparisons with the straight-line kernels')
    args = parser.parse_args()
    if args.compile:
        compile_times()
    loops.compile_kernels()
    rng = np.random.default_rng(6)
    models = {'random n=6': random_chain(6), 'Panda (7)': load_preset('panda'),
              'PUMA 560': load_preset('puma560'), 'random n=12': random_chain(12),
              'random n=40': random_chain(40), 'random n=100': random_chain(100)}
    print('| what | ours | reference | ratio |\n|---|---|---|---|')
    if not args.only_straight:
        one_state(models, args.repeats, rng)
        batch({k: models[k] for k in ('PUMA 560', 'Panda (7)', 'random n=100')},
              args.repeats, rng)
    if args.straight or args.only_straight:
        straight_line(models, args.repeats, rng)
        public_api(models, args.repeats, rng)


if __name__ == '__main__':
    main()
