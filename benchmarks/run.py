"""Performance benchmark: the public dynamics functions against Pinocchio and the 1 kHz closed
loop against a bare rclpy relay, one table.

    python3 tools/dev.py bench [-- --repeats N --rows id,fd,... --skip-closed-loop
                                   --skip-under-load --duration S --compile-times]
    PYTHONPATH=. <python with rclpy, numpy, pin> benchmarks/run.py [same options]

The closed-loop rows come last (about a minute; `closed_loop.py` has the details, and
prints more: the one-process loop and how the cycle scales with the number of joints),
then the same loop loaded with a busy process per CPU and the real-time options on (about
a minute more; `under_load.py` prints all four conditions, quiet or loaded, options off or
on, and the highest control rate kept), then in the same condition the Panda under
computed torque and under `control_law: cartesian_impedance` (about a minute more;
`compliant_loop.py` runs these rows alone, repeated).

Pinocchio (`pip install pin`) is the yardstick, measured in the same run; it is a
benchmark dependency only. Ours and the yardstick are sampled alternately (each sample the
mean over a ~20 ms loop of calls); times are medians over the samples and each ratio is the
median of the paired ratios, so that the load of a shared machine cancels. Every target is
a ratio to the yardstick (doc/performance.md): the table says what holds on this machine
today. A row marked as an aspiration (a goal, not a promise) reads 'aspiration: met' or
'aspiration: not met' instead of pass or FAIL.
Pinocchio's results are checked against ours first.
With numba installed, a second column times the optional accelerator (`set_backend('numba')`,
looped kernels compiled once for every model; the first run compiles and caches them in
about 15 s, the timed calls come after warm-up).
"""

import argparse
import functools
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from robot_dynamics import dynamics  # noqa: E402,I100
from robot_dynamics.dynamics import _fast_numba, codegen, kinematics  # noqa: E402,I100
from robot_dynamics.simulation import integration  # noqa: E402,I100
from benchmark_models import load_preset, random_chain  # noqa: E402, I100

try:
    import pinocchio as pin
except ImportError:
    pin = None

ACCELERATOR = _fast_numba.available()


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


def _loops(function, budget):
    function()
    start = time.perf_counter()
    function()
    return max(1, int(budget / max(time.perf_counter() - start, 1e-7)))


def _sample(function, loops):
    start = time.perf_counter()
    for _ in range(loops):
        function()
    return (time.perf_counter() - start) / loops


def paired(ours, reference, repeats, budget=0.02):
    """Median time of one call of `ours` and of `reference` [s] and the median of their
    ratio, sampled alternately (loops of ~`budget` s each) so that both see the same load
    of this shared machine."""
    loops = _loops(ours, budget), _loops(reference, budget)
    a, b = [], []
    for _ in range(repeats):
        a.append(_sample(ours, loops[0]))
        b.append(_sample(reference, loops[1]))
    ratio = statistics.median(x / y for x, y in zip(a, b))
    return statistics.median(a), statistics.median(b), ratio


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
    """Rows of: what, ours (generated), ours (numba), reference, and each ratio against
    its target; a row passes when every measured ratio meets its target. An aspiration
    row (a goal, not a promise: see doc/performance.md) says 'aspiration: met' or
    'aspiration: not met' instead of pass or FAIL."""

    def __init__(self):
        self.rows = []

    def add(self, what, ours, reference, target, accelerated=None, target_accelerated=None,
            unit='µs', ratio=None, ratio_accelerated=None, at_least=False,
            aspiration=False):
        """at_least: the ratio must be ≥ target (else ≤); only for rows without numba."""
        ratio = ours / (reference or 1.0) if ratio is None else ratio
        cells = [what, _fmt(ours, unit), '—' if reference is None else _fmt(reference, unit),
                 f'{ratio:.2f}', f'{"≥" if at_least else "≤"} {target:g}']
        ok = ratio >= target if at_least else ratio <= target
        if accelerated is None or target_accelerated is None:
            cells += ['—', '—', '—']
        else:
            ratio_a = accelerated / reference if ratio_accelerated is None \
                else ratio_accelerated
            cells += [_fmt(accelerated, unit), f'{ratio_a:.2f}', f'≤ {target_accelerated:g}']
            ok = ok and ratio_a <= target_accelerated
        if aspiration:
            result = 'aspiration: met' if ok else 'aspiration: not met'
        else:
            result = 'pass' if ok else 'FAIL'
        self.rows.append(cells + [result])

    def markdown(self):
        head = ('what', 'ours', 'reference', 'ratio', 'target', 'ours + numba',
                'ratio', 'target', 'result')
        lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
        lines += ['| ' + ' | '.join(row) + ' |' for row in self.rows]
        return '\n'.join(lines)


def _fmt(value, unit):
    if unit == 'µs':
        return f'{value * 1e6:.2f} µs'
    if unit == '' and isinstance(value, float):
        return f'{value:.4f}'
    return f'{value:.3g}{unit}'


def state(model, rng, size=None):
    shape = (model.n,) if size is None else (size, model.n)
    return tuple(rng.uniform(-1.0, 1.0, shape) for _ in range(3))


def tip_frame(pm, model):
    """Adds our tip frame (the last link frame, where `kinematics.tool_pose` and
    `dynamics.jacobian` are) to Pinocchio's model `pm`; its frame id."""
    ch = model.chain
    return pm.addFrame(pin.Frame('tip', pm.njoints - 1, pin.SE3(np.array(ch.R_tip),
                                                                np.array(ch.p_tip)),
                                 pin.FrameType.OP_FRAME))


def impedance_cycle(model, q):
    """What a Cartesian-impedance law computes each cycle: the tool frame, the Jacobian,
    the Cartesian inertia Λ = (J M⁻¹ Jᵀ)⁻¹ and the gravity torques g(q)."""
    T = kinematics.tool_pose(model, q)
    J = kinematics.jacobian(model, q)
    M = dynamics.mass_matrix(model, q)
    return T, J, np.linalg.inv(J @ np.linalg.solve(M, J.T)), dynamics.gravity_torques(model, q)


def impedance_cycle_pinocchio(pm, data, tip, q):
    """The same work in Pinocchio: forwardKinematics and the tip frame's placement,
    computeFrameJacobian (LOCAL_WORLD_ALIGNED), crba (upper triangle: mirrored) and the
    same linear algebra, computeGeneralizedGravity."""
    pin.forwardKinematics(pm, data, q)
    T = pin.updateFramePlacement(pm, data, tip).homogeneous
    J = pin.computeFrameJacobian(pm, data, q, tip, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    return (T, J, np.linalg.inv(J @ np.linalg.solve(M, J.T)),
            pin.computeGeneralizedGravity(pm, data, q))


def check_against_pinocchio(model, pm, rng):
    data = pm.createData()
    q, qd, qdd = state(model, rng)
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    err_id = np.max(np.abs(tau - pin.rnea(pm, data, q, qd, qdd)))
    err_fd = np.max(np.abs(dynamics.forward_dynamics(model, q, qd, tau)
                           - pin.aba(pm, data, q, qd, tau)))
    return max(err_id, err_fd)


def compare(model, ours, reference, repeats, per=1):
    """(ours, reference, ratio) on the generated backend and (ours, ratio) on numba (None
    when numba is missing); times per `per`."""
    dynamics.set_backend('generated')
    plain = paired(ours, reference, repeats)
    fast = None
    if ACCELERATOR:
        dynamics.set_backend('numba')
        try:
            t, _, r = paired(ours, reference, repeats)
            fast = (t / per, r)
        finally:
            dynamics.set_backend('generated')
    return (plain[0] / per, plain[1] / per, plain[2]), fast


def add_row(table, what, result, targets):
    (ours, ref, ratio), fast = result
    table.add(what, ours, ref, targets[0], None if fast is None else fast[0], targets[1],
              ratio=ratio, ratio_accelerated=None if fast is None else fast[1])


ROWS = ('id', 'fd', 'rk4', 'mujoco', 'batch', 'impedance', 'growth', 'counts')


def run(repeats, rows=ROWS):
    """The dynamics rows of the table; `rows`: which groups (ROWS: one-state inverse and
    forward dynamics, RK4 step, the MuJoCo row, batch inverse dynamics, the
    Cartesian-impedance cycle, cost growth with n, operation counts)."""
    rng = np.random.default_rng(6)
    models = {'PUMA 560': load_preset('puma560'), 'Panda (7)': load_preset('panda'),
              'random n=6': random_chain(6), 'random n=100': random_chain(100)}
    pins = {name: pinocchio_model(m) for name, m in models.items()}
    for name, model in models.items():
        err = check_against_pinocchio(model, pins[name], rng)
        print(f'# {name}: max |ours − Pinocchio| over ID and FD = {err:.1e}')
        assert err < 1e-8, name
    table = Table()
    for name in models if 'id' in rows else ():
        model, pm = models[name], pins[name]
        data = pm.createData()
        q, qd, qdd = state(model, rng)
        result = compare(model, lambda: dynamics.inverse_dynamics(model, q, qd, qdd),
                         lambda: pin.rnea(pm, data, q, qd, qdd), repeats)
        # pure Python within 5.5x of pin.rnea on the PUMA, 7x on the Panda, 9x on a
        # general 6-joint chain (nothing to fold); numba within 1.3x (mostly the fixed cost
        # of a call, as pin.rnea's); doc/performance.md: restated targets
        targets = {'random n=100': (25, 0.6), 'Panda (7)': (7, 1.3), 'random n=6': (9, 1.3),
                   'PUMA 560': (5.5, 1.3)}[name]
        add_row(table, f'inverse_dynamics, one state, {name} / pin.rnea', result, targets)
    for name in models if 'fd' in rows else ():
        model, pm = models[name], pins[name]
        data = pm.createData()
        q, qd, tau = state(model, rng)
        result = compare(model, lambda: dynamics.forward_dynamics(model, q, qd, tau),
                         lambda: pin.aba(pm, data, q, qd, tau), repeats)
        add_row(table, f'forward_dynamics, one state, {name} / pin.aba', result,
                {'random n=100': (18, 1.3)}.get(name, (16, 1.3)))
    for name in ('PUMA 560', 'Panda (7)') if 'rk4' in rows else ():
        model, pm = models[name], pins[name]
        data = pm.createData()
        q, qd, tau = state(model, rng)
        result = compare(model, lambda: integration.rk4_step(model, q, qd, tau, 1e-3),
                         lambda: rk4_pinocchio(pm, data, q, qd, tau, 1e-3), repeats)
        add_row(table, f'rk4_step (4 FD), {name} / Python RK4 around pin.aba', result,
                {'Panda (7)': (4.5, 0.5)}.get(name, (4, 0.5)))
    if 'mujoco' in rows:
        mujoco_row(table, models['Panda (7)'], repeats)
    for name in ('PUMA 560', 'Panda (7)') if 'batch' in rows else ():
        model, pm = models[name], pins[name]
        data = pm.createData()
        B = 1000
        Q, QD, QDD = state(model, rng, B)

        def loop():
            for k in range(B):
                pin.rnea(pm, data, Q[k], QD[k], QDD[k])
        result = compare(model, lambda: dynamics.inverse_dynamics(model, Q, QD, QDD), loop,
                         repeats, per=B)
        add_row(table, f'batch inverse_dynamics B=1000, per sample, {name} / pin.rnea loop',
                result, {'Panda (7)': (0.55, 0.35)}.get(name, (0.4, 0.35)))
    if 'impedance' in rows:
        model, pm = models['Panda (7)'], pinocchio_model(models['Panda (7)'])
        tip = tip_frame(pm, model)
        data = pm.createData()
        q = state(model, rng)[0]
        err = max(np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b))) for a, b in
                  zip(impedance_cycle(model, q), impedance_cycle_pinocchio(pm, data, tip, q)))
        print(f'# Panda (7): max relative |ours − Pinocchio| over T, J, Λ, g = {err:.1e}')
        assert err < 1e-9
        if ACCELERATOR:         # the numba kernels of T, J, M and g, checked the same way
            dynamics.set_backend('numba')
            try:
                err = max(np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b))) for a, b in
                          zip(impedance_cycle(model, q),
                              impedance_cycle_pinocchio(pm, data, tip, q)))
            finally:
                dynamics.set_backend('generated')
            print(f'# Panda (7), numba: max relative |ours − Pinocchio| over T, J, Λ, g = '
                  f'{err:.1e}')
            assert err < 1e-9
        # pure Python within 5x; numba (compiled T, J, M, g; the linear algebra of Λ is
        # the same numpy calls on both sides) within 1.2x (doc/performance.md)
        result = compare(model, lambda: impedance_cycle(model, q),
                         lambda: impedance_cycle_pinocchio(pm, data, tip, q), repeats)
        add_row(table, 'one Cartesian-impedance cycle, Panda (7): tool frame + Jacobian + '
                'Λ = (J M⁻¹ Jᵀ)⁻¹ + g(q) / the same in Pinocchio (forwardKinematics, '
                'computeFrameJacobian, crba, computeGeneralizedGravity)', result, (5, 1.2))
    if 'growth' in rows:
        growth_rows(table, models, repeats)
    if 'counts' in rows:
        mul = codegen.operation_counts(codegen.source(models['PUMA 560'], 'rnea'))['mul']
        table.add('multiplications, one PUMA 560 inverse dynamics (papers: 636–852)', mul,
                  None, 250, unit='')
    return table


def growth_rows(table, models, repeats):
    """The rows of how the one-state cost grows with the number of joints."""
    chains = {what: chain_times(models, what, repeats) for what in ('ID', 'FD')}
    plain, fast = (t[100] / t[6] if t else None
                   for t in (chains['ID']['generated'], chains['ID'].get('numba')))
    table.add('cost growth n = 6 → 100, ID: time ratio (100/6 = 16.7 is proportional; the '
              'operation counts give 20.4)', plain, None, 25, fast,
              None if fast is None else 20, unit='×', ratio_accelerated=fast)
    plain, fast = (per_link_growth(t, (6, 50), (50, 100)) if t else None
                   for t in (chains['FD']['generated'], chains['FD'].get('numba')))
    table.add('cost growth n = 6 → 100, FD: cost per link (t100 − t50)/50 over '
              '(t50 − t6)/44 (1 = linear)', plain, None, 1.25, fast,
              None if fast is None else 1.25, unit='×', ratio_accelerated=fast)
    for what, both in chains.items():
        plain, fast = (per_link_growth(t, (6, 12), (50, 100)) if t else None
                       for t in (both['generated'], both.get('numba')))
        table.add(f'marginal cost per link, {what}: (t100 − t50)/50 over (t12 − t6)/6 '
                  '(1 = linear; an aspiration: the short base is noisy)', plain, None, 1.2,
                  fast, None if fast is None else 1.2, unit='×', ratio_accelerated=fast,
                  aspiration=True)


def mujoco_row(table, model, repeats):
    """The plant's step with the MuJoCo engine (`MujocoEngine.advance`, one 1 ms RK4 step
    under a held effort, the MJCF generated from `model`) against a bare ``mj_step`` loop of
    the same compiled model, sampled alternately; skipped without mujoco."""
    try:
        import mujoco
        from robot_dynamics.simulation import mujoco_engine
    except ImportError:
        print('# MuJoCo row skipped: it needs mujoco (pip install mujoco)')
        return
    joints = [f'joint_{i + 1}' for i in range(model.n)]
    engine = mujoco_engine.MujocoEngine.from_robot_model(model, joints, 1e-3)
    mj = mujoco_engine.compile_model(model, joints, timestep=1e-3)
    data = mujoco.MjData(mj)
    q0 = np.clip(0.0, model.position_min, model.position_max)
    tau = dynamics.gravity_torques(model, q0)       # held there: both stay near q0
    held = [q0, np.zeros(model.n)]
    data.qpos[:], data.qfrc_applied[:] = q0, tau

    def plant_step():
        held[0], held[1], _, _ = engine.advance(model, held[0], held[1], tau, 1)

    def bare():
        mujoco.mj_step(mj, data)
    ours, ref, ratio = paired(plant_step, bare, repeats)
    table.add('plant step, engine mujoco (MujocoEngine.advance, RK4 1 ms), Panda (7) / bare '
              'mj_step loop of the same model', ours, ref, 2, ratio=ratio)


def closed_loop_rows(table, count, duration, under_load=True):
    """The closed-loop rows of the performance table, measured by `closed_loop.py`'s
    functions: every node the shipped executable in its own process, PUMA 560, 1 kHz (see
    that file); then the same loaded, with the real-time options (`under_load.py`)."""
    import closed_loop      # a private ROS_DOMAIN_ID, localhost discovery; needs rclpy
    latency = closed_loop.reaction_latency(count)
    (c_med, _, c_miss, c_n), (r_med, _, r_miss, _) = latency['controller'], latency['relay']
    table.add(f'closed loop, PUMA 560, 1 kHz input: reaction latency (state in → effort '
              f'out), median / bare rclpy relay ({c_n} states; unanswered {c_miss} / '
              f'{r_miss})', c_med, r_med, 1.25)
    loop = closed_loop.bringup_real_time(duration)
    closed = ('' if loop['closed_loop'] and loop['moved']
              else '; LOOP NOT CLOSED OR DEMO MOVE NOT TAKEN')
    rtf = loop['real_time_factor'] if not closed else 0.0
    table.add(f'closed loop, 1 kHz bring-up (plant, controller, demo move: 3 processes): '
              f'real-time factor over {loop["wall"]:.1f} s{closed}', rtf, None, 0.98,
              unit='', at_least=True)
    late = 100.0 * loop['late'] / max(1, loop['ticks'])
    table.add(f'closed loop, 1 kHz bring-up: late ticks, % of {loop["ticks"]} '
              f'({loop["dropped"]} dropped){closed}', late if not closed else 100.0, None,
              1.5, unit=' %')
    if under_load:
        loaded_rows(table, count, duration, r_med)
        compliant_rows(table, duration)


def loaded_rows(table, count, duration, quiet_relay):
    """The loaded rows: one busy process per CPU, real-time options on (under_load.py)."""
    import under_load
    latency, loop = under_load.measure(True, True, count, duration, duration + 90.0)
    c_p99 = latency['controller'][1]
    table.add(f'loaded (a busy process per CPU), real-time options on: reaction p99 / quiet '
              f'bare-relay median ({latency["controller"][2]} unanswered)', c_p99,
              quiet_relay, 2.0)
    closed = '' if loop['closed_loop'] and loop['moved'] else '; LOOP NOT CLOSED'
    table.add(f'loaded, real-time options on: 1 kHz bring-up real-time factor{closed}',
              loop['real_time_factor'] if not closed else 0.0, None, 0.98, unit='',
              at_least=True)
    late = 100.0 * under_load.fraction(loop) if not closed else 100.0
    table.add(f'loaded, real-time options on: 1 kHz bring-up late ticks, % of '
              f'{loop["ticks"]}{closed}', late, None, 1.0, unit=' %')


def compliant_rows(table, duration):
    """The loaded rows of the Panda, computed torque and the Cartesian impedance law, under
    the condition of the loaded PUMA 560 row above (compliant_loop.py)."""
    import compliant_loop
    import under_load
    results = compliant_loop.measure(duration, repeats=1, log=lambda line: None)
    for name, _, _ in compliant_loop.ROWS[1:]:
        (loop,) = results[name]
        problem = ('' if loop['closed_loop'] and compliant_loop.law_in_effect(name, loop)
                   else '; LOOP NOT CLOSED OR LAW NOT IN EFFECT')
        late = 100.0 * under_load.fraction(loop) if not problem else 100.0
        table.add(f'loaded, real-time options on: 1 kHz bring-up late ticks, {name}, % of '
                  f'{loop["ticks"]} (real-time factor {loop["real_time_factor"]:.4f}){problem}',
                  late, None, 1.0, unit=' %')


def chain_times(models, what, repeats):
    """{backend: {n: one-state time [s]}} of inverse ('ID') or forward ('FD') dynamics on
    random chains of n = 6, 12, 50, 100 joints, per backend (generated, numba if
    installed)."""
    chains = {n: models.get(f'random n={n}') or random_chain(n) for n in (6, 12, 50, 100)}
    rng = np.random.default_rng(7)
    fn = dynamics.inverse_dynamics if what == 'ID' else dynamics.forward_dynamics
    calls = {n: functools.partial(fn, model, *state(model, rng)) for n, model in chains.items()}
    result = {}
    for backend in ('generated', 'numba') if ACCELERATOR else ('generated',):
        dynamics.set_backend(backend)
        try:
            result[backend] = interleaved(calls, repeats)
        finally:
            dynamics.set_backend('generated')
    return result


def interleaved(calls, repeats, budget=0.02):
    """{key: median time of one call [s]} of several calls sampled in turn (loops of
    ~`budget` s each), so that a load that changes during the run hits them alike."""
    loops = {key: _loops(call, budget) for key, call in calls.items()}
    samples = {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            samples[key].append(_sample(call, loops[key]))
    return {key: statistics.median(values) for key, values in samples.items()}


def per_link_growth(times, short, long):
    """The cost of one more link between the chain lengths `long` = (n1, n2) over that
    between `short` (1 = linear growth). Unlike the time ratio of two lengths, it leaves
    out what folds away in the first links of any chain."""
    def per_link(pair):
        a, b = pair
        return (times[b] - times[a]) / (b - a)
    return per_link(long) / per_link(short)


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
    if ACCELERATOR:
        import numba
        versions += f', numba {numba.__version__}'
    else:
        versions += ', numba not installed (no accelerator column)'
    return f'{cpu}; {versions}'


def compile_times():
    """Seconds to compile (or load) the numba kernels in a fresh process: cold (an empty
    cache directory), then cached; first the one-state inverse dynamics alone (it also
    pays numba's start-up), then the other one-state kernels, then the batch kernels."""
    code = ('import time; from robot_dynamics.dynamics import _numba_loops as L\n'
            't = time.perf_counter()\n'
            'for group in ({first}, {one}, {batch}):\n'
            '    L.compile_kernels(group); print(time.perf_counter() - t)\n'
            '    t = time.perf_counter()\n')
    from robot_dynamics.dynamics import _numba_loops
    names = list(_numba_loops.ENTRIES)
    one = [k for k in names if k.endswith('_one') and k != 'rnea_one']
    batch = [k for k in names if k.endswith('_batch')]
    code = code.format(first=['rnea_one'], one=one, batch=batch)
    env = dict(os.environ, PYTHONPATH=REPO)
    with tempfile.TemporaryDirectory() as cache:
        env['ROBOT_DYNAMICS_CACHE'] = cache
        for label in ('cold', 'cached'):
            out = subprocess.run([sys.executable, '-c', code], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            print(f'# numba compile, {label}: inverse dynamics {float(out[0]):.2f} s, the '
                  f'other one-state kernels {float(out[1]):.2f} s, batch kernels '
                  f'{float(out[2]):.2f} s', flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeats', type=int, default=15, help='samples per median (15)')
    parser.add_argument('--rows', default=','.join(ROWS),
                        help='comma-separated groups of dynamics rows to run, of '
                        f'{",".join(ROWS)} (all); e.g. --rows id,batch --repeats 60 '
                        '--skip-closed-loop for steadier ratios of those rows only')
    parser.add_argument('--compile-times', action='store_true',
                        help='first time the numba compilation, cold and cached')
    parser.add_argument('--skip-closed-loop', action='store_true',
                        help='only the dynamics rows (the closed loop takes about a minute)')
    parser.add_argument('--duration', type=float, default=12.0,
                        help='wall seconds of the closed-loop bring-up run (12)')
    parser.add_argument('--skip-under-load', action='store_true',
                        help='without the loaded closed-loop rows (under_load.py, '
                        'compliant_loop.py; about two minutes)')
    args = parser.parse_args()
    if args.compile_times and ACCELERATOR:
        compile_times()
    if pin is None:
        sys.exit('benchmarks/run.py needs Pinocchio as the yardstick: pip install pin')
    print(f'# {machine()}')
    rows = tuple(args.rows.split(',')) if args.rows else ()
    unknown = set(rows) - set(ROWS)
    if unknown:
        parser.error(f'--rows: unknown {", ".join(sorted(unknown))} (choose from '
                     f'{", ".join(ROWS)})')
    table = run(args.repeats, rows)
    if not args.skip_closed_loop:
        try:
            closed_loop_rows(table, 2000, args.duration, not args.skip_under_load)
        except ImportError as error:
            print(f'# closed-loop rows skipped: {error} (they need rclpy and the messages)')
    print(table.markdown())


if __name__ == '__main__':
    main()
