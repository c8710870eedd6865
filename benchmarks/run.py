"""Issue 6 benchmark: the public dynamics functions against Pinocchio, one table.

    PYTHONPATH=. /tmp/venvs/kilted/bin/python benchmarks/run.py [--quick]

Pinocchio (`pip install pin`) is the yardstick, measured in the same run; it is a
benchmark dependency only. Every time is the median over repeats of the mean over a loop
of calls; every target is a ratio to the yardstick (issue 6), so the table says what holds
on this machine today, not in general. Pinocchio's results are checked against ours first.
"""

import argparse
import math
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from robot_dynamics import codegen, dynamics, integration  # noqa: E402
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402

try:
    import pinocchio as pin
except ImportError:          # the table still prints our own numbers
    pin = None


# ---------------------------------------------------------------------- models


def load_preset(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', name + '.yaml'))


def random_chain(n, seed=0):
    """A general n-joint chain: random twists and lengths, full inertias, no zeros for the
    generator to fold (the worst case for generated code)."""
    rng = np.random.default_rng(seed)
    mass = rng.uniform(0.5, 5.0, n)
    inertia = []
    for m in mass:
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        moments = m / 5.0 * rng.uniform(0.01, 0.05, 3)
        moments = moments + moments.sum() * 0.1       # keep the triangle inequality
        I = Q @ np.diag(moments) @ Q.T
        inertia += [I[0, 0], I[0, 1], I[0, 2], I[1, 1], I[1, 2], I[2, 2]]
    return RobotModel.from_params({
        'dh_convention': 'standard', 'joint_types': ['revolute'] * n,
        'a': rng.uniform(-0.3, 0.3, n).tolist(), 'alpha': rng.uniform(-3, 3, n).tolist(),
        'd': rng.uniform(-0.3, 0.3, n).tolist(), 'theta': rng.uniform(-1, 1, n).tolist(),
        'mass': mass.tolist(), 'com': rng.uniform(-0.1, 0.1, 3 * n).tolist(),
        'inertia': [float(v) for v in inertia]})


def pinocchio_model(model):
    """The same chain for Pinocchio: joint placement = (R0, p0)·(Rz(θ0), d0 z), joint RZ/PZ
    (our body frames are Pinocchio's joint frames); armature copied; no friction."""
    ch = model.chain
    pm = pin.Model()
    parent = 0
    for i in range(model.n):
        c, s = math.cos(ch.theta0[i]), math.sin(ch.theta0[i])
        offset = pin.SE3(np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]),
                         np.array([0.0, 0.0, ch.d0[i]]))
        placement = pin.SE3(np.array(ch.R0[i]), np.array(ch.p0[i])) * offset
        joint = pin.JointModelPZ() if ch.prismatic[i] else pin.JointModelRZ()
        parent = pm.addJoint(parent, joint, placement, f'joint_{i + 1}')
        pm.appendBodyToJoint(parent, pin.Inertia(float(ch.mass[i]), np.array(ch.com[i]),
                                                 np.array(ch.inertia[i])), pin.SE3.Identity())
    pm.gravity = pin.Motion(np.concatenate((model.gravity, np.zeros(3))))
    pm.armature = np.array(model.armature)
    return pm


# ---------------------------------------------------------------------- timing


def median_time(function, repeats, budget=0.05):
    """Median over `repeats` of the mean time of one call [s], loops of ~`budget` s."""
    function()
    loops, start = 1, time.perf_counter()
    function()
    single = max(time.perf_counter() - start, 1e-7)
    loops = max(1, int(budget / single))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            function()
        samples.append((time.perf_counter() - start) / loops)
    return statistics.median(samples)


def rk4_pinocchio(pm, data, q, qd, tau, dt):
    """The same classical RK4 step as `integration.rk4_step`, around pin.aba."""
    aba = pin.aba
    k1v = aba(pm, data, q, qd, tau).copy()
    k2q = qd + 0.5 * dt * k1v
    k2v = aba(pm, data, q + 0.5 * dt * qd, k2q, tau).copy()
    k3q = qd + 0.5 * dt * k2v
    k3v = aba(pm, data, q + 0.5 * dt * k2q, k3q, tau).copy()
    k4q = qd + dt * k3v
    k4v = aba(pm, data, q + dt * k3q, k4q, tau).copy()
    return (q + dt / 6.0 * (qd + 2.0 * k2q + 2.0 * k3q + k4q),
            qd + dt / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v))


# ---------------------------------------------------------------------- rows


class Table:
    def __init__(self):
        self.rows = []

    def add(self, what, ours, reference, ratio, target, unit='µs'):
        ok = ratio <= target
        self.rows.append((what, _fmt(ours, unit), _fmt(reference, unit), f'{ratio:.2f}',
                          f'≤ {target:g}', 'pass' if ok else 'FAIL'))

    def markdown(self):
        head = ('what', 'ours', 'reference', 'ratio', 'target', 'result')
        lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
        lines += ['| ' + ' | '.join(row) + ' |' for row in self.rows]
        return '\n'.join(lines)


def _fmt(value, unit):
    if unit == 'µs':
        return f'{value * 1e6:.2f} µs'
    return f'{value:g}{unit}'


def state(model, rng, size=None):
    shape = (model.n,) if size is None else (size, model.n)
    return tuple(rng.uniform(-1.0, 1.0, shape) for _ in range(3))


def check_against_pinocchio(model, pm, rng):
    data = pm.createData()
    q, qd, qdd = state(model, rng)
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    err_id = np.max(np.abs(tau - pin.rnea(pm, data, q, qd, qdd)))
    err_fd = np.max(np.abs(dynamics.forward_dynamics(model, q, qd, tau)
                           - pin.aba(pm, data, q, qd, tau)))
    return max(err_id, err_fd)


def run(repeats):
    rng = np.random.default_rng(6)
    models = {'PUMA 560': load_preset('puma560'), 'Panda (7)': load_preset('panda'),
              'random n=6': random_chain(6), 'random n=100': random_chain(100)}
    pins = {name: pinocchio_model(m) for name, m in models.items()}
    for name, model in models.items():
        err = check_against_pinocchio(model, pins[name], rng)
        print(f'# {name}: max |ours − Pinocchio| over ID and FD = {err:.1e}')
        assert err < 1e-8, name
    table = Table()
    times = {}
    for name in ('PUMA 560', 'Panda (7)', 'random n=6', 'random n=100'):
        model, pm = models[name], pins[name]
        data = pm.createData()
        q, qd, qdd = state(model, rng)
        ours = median_time(lambda: dynamics.inverse_dynamics(model, q, qd, qdd), repeats)
        ref = median_time(lambda: pin.rnea(pm, data, q, qd, qdd), repeats)
        times[name, 'ID'] = ours
        target = 25 if name == 'random n=100' else 5
        table.add(f'inverse_dynamics, one state, {name} / pin.rnea', ours, ref, ours / ref,
                  target)
    for name in ('PUMA 560', 'Panda (7)', 'random n=6', 'random n=100'):
        model, pm = models[name], pins[name]
        data = pm.createData()
        q, qd, tau = state(model, rng)
        ours = median_time(lambda: dynamics.forward_dynamics(model, q, qd, tau), repeats)
        ref = median_time(lambda: pin.aba(pm, data, q, qd, tau), repeats)
        times[name, 'FD'] = ours
        table.add(f'forward_dynamics, one state, {name} / pin.aba', ours, ref, ours / ref, 16)
    for name in ('PUMA 560', 'Panda (7)'):
        model, pm = models[name], pins[name]
        data = pm.createData()
        q, qd, tau = state(model, rng)
        ours = median_time(lambda: integration.rk4_step(model, q, qd, tau, 1e-3), repeats)
        ref = median_time(lambda: rk4_pinocchio(pm, data, q, qd, tau, 1e-3), repeats)
        table.add(f'rk4_step (4 FD), {name} / Python RK4 around pin.aba', ours, ref,
                  ours / ref, 4)
    for name in ('PUMA 560', 'Panda (7)'):
        model, pm = models[name], pins[name]
        data = pm.createData()
        B = 1000
        Q, QD, QDD = state(model, rng, B)
        ours = median_time(lambda: dynamics.inverse_dynamics(model, Q, QD, QDD), repeats) / B

        def loop():
            for k in range(B):
                pin.rnea(pm, data, Q[k], QD[k], QDD[k])
        ref = median_time(loop, repeats) / B
        table.add(f'batch inverse_dynamics B=1000, per sample, {name} / pin.rnea loop',
                  ours, ref, ours / ref, 0.4)
    for what in ('ID', 'FD'):
        growth = times['random n=100', what] / times['random n=6', what]
        table.add(f'cost growth n = 6 → 100, {what} (time ratio; 100/6 = 16.7 is linear)',
                  growth, 1.0, growth, 20, unit='×')
    mul = codegen.operation_counts(codegen.source(models['PUMA 560'], 'rnea'))['mul']
    table.add('multiplications, one PUMA 560 inverse dynamics (seeds: 636–852)', mul, 250,
              mul / 250.0, 1, unit='')
    return table


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as stream:
            names = [line.split(':', 1)[1].strip() for line in stream
                     if line.startswith('model name')]
        cpu = f'{names[0]}, {len(names)} logical CPUs' if names else cpu
    except OSError:
        pass
    versions = f'Python {platform.python_version()}, numpy {np.__version__}'
    versions += f', pin {pin.__version__}' if pin else ', pin not installed'
    return f'{cpu}; {versions}; backend {dynamics.get_backend()}'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeats', type=int, default=7, help='repeats per median (7)')
    args = parser.parse_args()
    if pin is None:
        sys.exit('benchmarks/run.py needs Pinocchio as the yardstick: pip install pin')
    print(f'# {machine()}')
    table = run(args.repeats)
    print(table.markdown())


if __name__ == '__main__':
    main()
