"""Optional accelerator for long chains: generic looped kernels compiled once by numba.

`robot_dynamics.dynamics._fast_numba` compiles the straight-line code generated per model; numba's
compile time grows steeply with its length. The kernels here are instead written once, as
loops over the links with the 3-vector algebra spelled out in scalars (no temporary
arrays), and take the model as one packed float64 array, so that one compilation serves
every model of every length (cost O(n) per call, compile time independent of n).

Algorithms, as in `robot_dynamics.dynamics.algorithms` (which these must match to rounding):
- inverse dynamics: Newton–Euler (Craig's iterative form, [CRA] ch. 6 / [CSDN] §2), body
  wrenches taken about each body's origin with the first moment h = m c and the inertia
  about the origin;
- forward dynamics: the articulated-body algorithm (Featherstone, RBDA Table 7.1), the
  6×6 articulated inertias kept as three 3×3 blocks [A B; Bᵀ M] (21 numbers), moved to
  the parent (in local variables: a chain has one child per body) by the cheap rotation
  about z, a shift (RBDA eq. 2.66) and the constant placement R0.
Each placement R_i = R0_i Rz(θ_i) is applied in two steps through the "joint frame"
(R0_i applied, Rz not yet), in which the origin of body i is p'_i = R0ᵀ p0 + d e_z.

Call contract (for `robot_dynamics.dynamics`; every function returns None when it does not
apply, and the caller then takes its usual path, which gives the reference semantics):
    available()                                         numba importable
    compile_kernels()                                   compile or load them now
    inverse_dynamics_one(model, q, qd, qdd, wrench=None)   τ (n,) incl. armature, friction
    bias_forces_one(model, q, qd)                       τ(q, q̇, 0) incl. friction
    gravity_torques_one(model, q)                       τ(q, 0, 0), no friction
    forward_dynamics_one(model, q, qd, tau, wrench=None)   q̈ (n,) incl. armature, friction
    rk4_step_one(model, q, qd, tau, dt)                 (q, q̇) after one RK4 step, τ held
    ..._batch(model, ...)  the same on (B, n) arrays (wrench (6,) or (B, 6)) -> (B, n)
    runner(model, name)    one-state runners, also of the kinematic kernels (KINEMATIC:
                           the tool frame, its Jacobian, J̇ q̇ and the
                           composite-rigid-body mass matrix, `kinematics` and
                           `dynamics.mass_matrix` with the numba backend)
Inputs: one state as float64 (n,) arrays, a batch as (B, n) arrays, all C-contiguous and
writable for the fast path (anything else is copied once; a wrong shape returns None).
None also when an input or the result is not finite, or an articulated inertia is not
positive (each kernel checks its inputs and outputs), or the kernels cannot be compiled.
Each kernel compiles on its first call, for every model at once (on this 2-core machine,
cold: inverse dynamics 1.5-4 s, forward dynamics ~3 s; from numba's on-disk cache the
first kernel of a process ~0.3-0.5 s, the others milliseconds); `compile_kernels()` does
it up front, e.g. when a node starts. The kernel source is written to
`_fast_numba.cache_dir()` with numba's on-disk cache (``cache=True``), never into the
install space; if that directory is not writable the kernels are compiled from memory in
every process.

The packed model (`pack`) is cached on the model instance (its `KernelCache`;
`with_payload` makes a new instance without it, so the payload merged into the last body
of its own chain is the one packed). It ends with scratch columns that the kernels use as
working memory, so that a call allocates nothing but its output (numba boxing a returned
array costs ~1 µs, more than a 6-link inverse dynamics): safe because the kernels hold the
GIL (no ``nogil``), so no two calls on one model run at the same time.
"""

import functools
import hashlib
import importlib.util
import math
import sys
import types

import numpy as np

from robot_dynamics.dynamics import _fast_numba
from robot_dynamics.dynamics.algorithms import steiner
from robot_dynamics.model.kernel_cache import KernelCache

try:
    import numba
except ImportError:      # the accelerator is optional
    numba = None

WIDTH = 32                 # model columns, then SCRATCH columns of working memory
SCRATCH = 20
"""Columns of the packed model; row i < n is link i, row n holds the global data:
row i: 0-8 R0 (row-major), 9-11 p' = R0ᵀ p0 + d0 e_z, 12 θ0, 13 R0 = Rx(α), 14 prismatic, 15 m,
       16-18 h = m c, 19-24 inertia about the origin (xx yy zz xy xz yz),
       25 armature, 26 viscous, 27 Coulomb friction (q̇ > 0), 28 Coulomb friction (q̇ < 0),
       29 Stribeck friction f_s, 30 friction velocity v_s, 31 1 for a tanh law
(the kernels take the scratch columns as P[:, 32:]: WIDTH written out)
row n: 0-8 R_tip (row-major), 9-11 p_tip, 12-14 gravity, 15 the friction the kernels apply
       (FRICTION_NONE, FRICTION_PLAIN: viscous and Coulomb only, FRICTION_LAWS: per joint,
       defined with the kernels)"""

_compiled = {}            # entry name -> numba dispatcher, compiled for ENTRIES[name]
_modules = {}


def available():
    return numba is not None


def pack(model):
    """The model's chain (payload merged), gravity, armature and friction as the
    (n + 1, WIDTH) float64 array the kernels take."""
    ch, n = model.chain, model.n
    P = np.zeros((n + 1, WIDTH + SCRATCH))
    P[:n, 0:9] = ch.R0.reshape(n, 9)
    P[:n, 9:12] = np.einsum('nji,nj->ni', ch.R0, ch.p0)
    P[:n, 11] += ch.d0
    P[:n, 12] = ch.theta0
    R0 = ch.R0          # flag the placements Rx(α): exact zeros and 1 as DH builds them
    P[:n, 13] = ((R0[:, 0, 0] == 1.0) & (R0[:, 0, 1] == 0.0) & (R0[:, 0, 2] == 0.0)
                 & (R0[:, 1, 0] == 0.0) & (R0[:, 2, 0] == 0.0)
                 & (R0[:, 1, 1] == R0[:, 2, 2]) & (R0[:, 1, 2] == -R0[:, 2, 1]))
    P[:n, 14] = ch.prismatic
    P[:n, 15] = ch.mass
    P[:n, 16:19] = ch.mass[:, None] * ch.com
    for i in range(n):
        Io = ch.inertia[i] + steiner(ch.mass[i], ch.com[i])
        P[i, 19:25] = Io[0, 0], Io[1, 1], Io[2, 2], Io[0, 1], Io[0, 2], Io[1, 2]
    P[:n, 25] = model.armature
    P[:n, 26] = model.viscous_friction
    P[:n, 27] = model.coulomb_friction
    P[:n, 28] = model.coulomb_friction_negative
    P[:n, 29] = model.stribeck_friction
    P[:n, 30] = model.stribeck_velocity
    P[:n, 31] = [law == 'tanh' for law in model.friction_model]
    P[n, 0:9] = ch.R_tip.reshape(9)
    P[n, 9:12] = ch.p_tip
    P[n, 12:15] = model.gravity
    if not model.has_friction:
        P[n, 15] = FRICTION_NONE
    elif model.plain_friction:
        P[n, 15] = FRICTION_PLAIN
    else:
        P[n, 15] = FRICTION_LAWS
    return P


def packed(model):
    """`pack(model)`, once per model instance."""
    return KernelCache.of(model).value('loops_packed', pack, model)


# ---------------------------------------------------------------------- public calls
# The fast path passes the caller's arrays straight to the compiled kernels, which have
# explicit signatures (C-contiguous, writable float64): numba's dispatcher then checks the
# types in C and raises TypeError on anything else, which the slow path copies once.


def _packed(model):
    try:
        return model._kernels.values['loops_packed']
    except (AttributeError, KeyError):
        return packed(model)


def _retry(name, model, arrays, ndim):
    """Kernel `name` on C-contiguous float64 copies of `arrays` (the last is the wrench if
    the name says so), or None if they do not fit."""
    if any(isinstance(x, np.ndarray) and x.ndim != ndim for x in arrays[:3]):
        return None              # e.g. a batch given to a one-state function: no copies
    try:
        fn = _kernel(name)
        arrays = [np.array(x, dtype=float, order='C') for x in arrays]
    except (TypeError, ValueError, RuntimeError):
        return None
    if any(a.ndim != ndim for a in arrays[:3]) or arrays[0].shape[-1] != model.n:
        return None
    out = np.empty(arrays[0].shape)
    try:
        ok = fn(_packed(model), *arrays, out)
    except TypeError:            # a wrench of the wrong dimension
        return None
    return out if ok else None


def inverse_dynamics_one(model, q, qd, qdd, wrench=None):
    try:
        P = model._kernels.values['loops_packed']
    except (AttributeError, KeyError):
        P = packed(model)
    out = np.empty(len(P) - 1)
    try:
        if wrench is None:
            ok = _compiled['rnea_one'](P, q, qd, qdd, out)
        else:
            ok = _compiled['rnea_wrench_one'](P, q, qd, qdd, wrench, out)
    except (KeyError, TypeError):
        if wrench is None:
            return _retry('rnea_one', model, (q, qd, qdd), 1)
        return _retry('rnea_wrench_one', model, (q, qd, qdd, wrench), 1)
    return out if ok else None


def bias_forces_one(model, q, qd):
    try:
        P = model._kernels.values['loops_packed']
    except (AttributeError, KeyError):
        P = packed(model)
    out = np.empty(len(P) - 1)
    try:
        ok = _compiled['bias_one'](P, q, qd, out)
    except (KeyError, TypeError):
        return _retry('bias_one', model, (q, qd), 1)
    return out if ok else None


def gravity_torques_one(model, q):
    try:
        P = model._kernels.values['loops_packed']
    except (AttributeError, KeyError):
        P = packed(model)
    out = np.empty(len(P) - 1)
    try:
        ok = _compiled['gravity_one'](P, q, out)
    except (KeyError, TypeError):
        return _retry('gravity_one', model, (q,), 1)
    return out if ok else None


def forward_dynamics_one(model, q, qd, tau, wrench=None):
    try:
        P = model._kernels.values['loops_packed']
    except (AttributeError, KeyError):
        P = packed(model)
    out = np.empty(len(P) - 1)
    try:
        if wrench is None:
            ok = _compiled['aba_one'](P, q, qd, tau, out)
        else:
            ok = _compiled['aba_wrench_one'](P, q, qd, tau, wrench, out)
    except (KeyError, TypeError):
        if wrench is None:
            return _retry('aba_one', model, (q, qd, tau), 1)
        return _retry('aba_wrench_one', model, (q, qd, tau, wrench), 1)
    return out if ok else None


def rk4_step_one(model, q, qd, tau, dt):
    """(q, q̇) after one RK4 step with τ held, as `integration.rk4_step` on one state (four
    articulated-body passes in one compiled call), or None."""
    try:
        P = model._kernels.values['loops_packed']
    except (AttributeError, KeyError):
        P = packed(model)
    out = np.empty((2, len(P) - 1))
    try:
        ok = _compiled['rk4_one'](P, q, qd, tau, dt, out)
    except (KeyError, TypeError):
        try:
            fn = _kernel('rk4_one')
            arrays = [np.array(x, dtype=float, order='C') for x in (q, qd, tau)]
            ok = fn(P, *arrays, float(dt), out)
        except (TypeError, ValueError, RuntimeError):
            return None
    return (out[0], out[1]) if ok else None


_IDENTITY = np.eye(4)
_IDENTITY.setflags(write=False)


def _kinematic_runner(model, name):
    """The one-state runner of a kinematic kernel ('tool_pose': run(q, tool),
    'jacobian': run(q, tool), 'jacobian_dot_qd': run(q, qd, tool), 'mass_matrix': run(q));
    tool None is the identity. None when the kernel does not take the arguments (lists,
    other dtypes, batches, a tool that is not a proper transform, non-finite states):
    then `kinematics` / `dynamics` run their own path, with its error messages."""
    fn = _kernel(name + '_one')
    P, n, empty = packed(model), model.n, np.empty
    identity = _IDENTITY
    if name == 'mass_matrix':
        def run(q):
            out = empty((n, n))
            try:
                ok = fn(P, q, out)
            except TypeError:
                return None
            return out if ok else None
    elif name == 'jacobian_dot_qd':
        def run(q, qd, tool=None):
            out = empty(6)
            try:
                ok = fn(P, q, qd, identity if tool is None else tool, out)
            except TypeError:
                return None
            return out if ok else None
    else:
        shape = (4, 4) if name == 'tool_pose' else (6, n)

        def run(q, tool=None):
            out = empty(shape)
            try:
                ok = fn(P, q, identity if tool is None else tool, out)
            except TypeError:
                return None
            return out if ok else None
    return run


KINEMATIC = ('tool_pose', 'jacobian', 'jacobian_dot_qd', 'mass_matrix')


_ONE_STATE = {'rnea': ('rnea_one', inverse_dynamics_one),
              'rnea_wrench': ('rnea_wrench_one', inverse_dynamics_one),
              'bias': ('bias_one', bias_forces_one),
              'gravity': ('gravity_one', gravity_torques_one),
              'aba': ('aba_one', forward_dynamics_one),
              'aba_wrench': ('aba_wrench_one', forward_dynamics_one)}


def runner(model, name):
    """The one-state call of `name` ('rnea', 'rnea_wrench', 'bias', 'gravity', 'aba',
    'aba_wrench': the *_one functions above) for this model: a function of the states
    (the wrench last) with the compiled kernel, the packed model and n bound, so that a
    call costs one allocation and the kernel (what `dynamics` keeps per model for its
    one-state fast path). Anything the kernel's signature does not take goes to the
    *_one function (copies, None), except a first state that is an array but not 1-D
    (a batch: None at once), because numba's dispatcher takes ~90 µs to refuse
    arguments (its TypeError), ~90 ns per sample of a 1000-sample batch."""
    if name in KINEMATIC:
        try:
            return _kinematic_runner(model, name)
        except (TypeError, ValueError, RuntimeError):
            return _none
    entry, general = _ONE_STATE[name]
    slow = functools.partial(general, model)
    try:
        fn = _kernel(entry)
    except (TypeError, ValueError, RuntimeError):
        return slow
    P, n, empty = packed(model), model.n, np.empty
    if name in ('rnea', 'aba'):                  # three states: no tuple of them

        def run(a, b, c):
            out = empty(n)
            try:
                if a.ndim != 1:
                    return None
                ok = fn(P, a, b, c, out)
            except (TypeError, AttributeError):
                return slow(a, b, c)
            return out if ok else None
        return run

    def run_any(*states):
        out = empty(n)
        try:
            if states[0].ndim != 1:
                return None
            ok = fn(P, *states, out)
        except (TypeError, AttributeError):
            return slow(*states)
        return out if ok else None
    return run_any


def _none(*states):
    return None


def _batch(name, model, arrays):
    try:
        out = np.empty(arrays[0].shape)
        ok = _compiled[name](_packed(model), *arrays, out)
    except (KeyError, TypeError, AttributeError):
        return _retry(name, model, arrays, 2)
    return out if ok else None


def _wrenches(wrench):
    """A (6,) wrench as (1, 6), applied to every sample."""
    wrench = np.asarray(wrench)
    return wrench.reshape(1, -1) if wrench.ndim == 1 else wrench


def inverse_dynamics_batch(model, q, qd, qdd, wrench=None):
    if wrench is None:
        return _batch('rnea_batch', model, (q, qd, qdd))
    return _batch('rnea_wrench_batch', model, (q, qd, qdd, _wrenches(wrench)))


def bias_forces_batch(model, q, qd):
    return _batch('bias_batch', model, (q, qd))


def gravity_torques_batch(model, q):
    return _batch('gravity_batch', model, (q,))


def forward_dynamics_batch(model, q, qd, tau, wrench=None):
    if wrench is None:
        return _batch('aba_batch', model, (q, qd, tau))
    return _batch('aba_wrench_batch', model, (q, qd, tau, _wrenches(wrench)))


def compile_kernels(names=None):
    """Compile (or load from numba's cache) the kernels `names` (default: all, see
    ENTRIES) now, instead of on first use; False without numba."""
    if numba is None:
        return False
    for name in ENTRIES if names is None else names:
        _kernel(name)
    return True


# ---------------------------------------------------------------------- compilation

def _signature(arrays, ndim):
    """(packed model, `arrays` float64 arrays of `ndim` dimensions, out): C-contiguous."""
    array = 'float64[::1]' if ndim == 1 else 'float64[:, ::1]'
    return '(' + ', '.join(['float64[:, ::1]'] + [array] * (arrays + 1)) + ')'


_TOOL = "Array(float64, 2, 'A', readonly=True)"
ENTRIES = {'rnea_one': _signature(3, 1), 'rnea_wrench_one': _signature(4, 1),
           'bias_one': _signature(2, 1), 'gravity_one': _signature(1, 1),
           'aba_one': _signature(3, 1), 'aba_wrench_one': _signature(4, 1),
           'rnea_batch': _signature(3, 2), 'rnea_wrench_batch': _signature(4, 2),
           'bias_batch': _signature(2, 2), 'gravity_batch': _signature(1, 2),
           'aba_batch': _signature(3, 2), 'aba_wrench_batch': _signature(4, 2),
           'rk4_one': ('(float64[:, ::1], float64[::1], float64[::1], float64[::1], float64, '
                       'float64[:, ::1])'),
           # the tool: any layout, read-only or not (a law keeps its tool read-only)
           'tool_pose_one': f'(float64[:, ::1], float64[::1], {_TOOL}, float64[:, ::1])',
           'jacobian_one': f'(float64[:, ::1], float64[::1], {_TOOL}, float64[:, ::1])',
           'jacobian_dot_qd_one': (f'(float64[:, ::1], float64[::1], float64[::1], {_TOOL}, '
                                   'float64[::1])'),
           'mass_matrix_one': '(float64[:, ::1], float64[::1], float64[:, ::1])'}


def _kernel(name):
    """The compiled entry `name`, compiled (or loaded from numba's cache) on first use for
    its one signature; other argument types then raise TypeError instead of compiling."""
    fn = _compiled.get(name)
    if fn is None:
        if numba is None:
            raise RuntimeError('numba is not installed')
        module = _modules.get('loops')
        if module is None:
            module = _modules['loops'] = _module()
        fn = getattr(module, name)
        fn.compile(ENTRIES[name])
        fn.disable_compile()
        _compiled[name] = fn
    return fn


def _module():
    """The kernels, compiled from a copy of their source in the cache directory (so that
    numba's on-disk cache finds it again), or from memory if that is not writable."""
    text = _SOURCE
    if text is None:
        raise RuntimeError('the kernel source could not be read')
    digest = hashlib.sha1(text.encode()).hexdigest()[:20]
    module_name = f'_robot_dynamics_loops_{digest}'
    path = _fast_numba._write(text, module_name)
    cached = path is not None
    if cached:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        module = types.ModuleType(module_name)
        exec(compile(text, module_name, 'exec'), module.__dict__)  # noqa: S102 - our source
    for fn in _KERNELS:
        name = fn.__name__
        setattr(module, name, numba.njit(cache=cached, error_model='numpy')(
            getattr(module, name)))
    return module


def kernel_source():
    """The source of the numba kernels: the section below of this file, verbatim."""
    with open(__file__, encoding='utf-8') as stream:
        text = stream.read()
    start, end = text.find(_KERNELS_BEGIN), text.find('\n_KERNELS = (')
    if start < 0 or end < 0:
        raise RuntimeError(f'{__file__}: kernel section not found')
    return 'import math\n\nimport numpy as np\n\n\n' + text[start:end]


_KERNELS_BEGIN = '# ' + '-' * 70 + ' kernels'


# ---------------------------------------------------------------------- kernels
# Plain Python on numpy arrays and floats (they run, slowly, without numba too); numba
# compiles a copy. Vectors are written out in scalars; 3×3 blocks are tuples.

FRICTION_NONE, FRICTION_PLAIN, FRICTION_LAWS = 0.0, 1.0, 2.0     # packed row n, column 15


def _tanh(x):
    """tanh x to 3 ulp, in half the time of libm's (the tanh friction law in a batch):
    (1 − e)/(1 + e), e = exp(−2|x|) ≤ e⁻¹ (no cancellation), for |x| ≥ 0.5; libm below."""
    ax = abs(x)
    if ax < 0.5:
        return math.tanh(x)
    e = math.exp(-2.0 * ax)
    return math.copysign((1.0 - e) / (1.0 + e), x)


def _friction(r, v):
    """The joint's friction law (dynamics.friction_laws, the same operations in the same
    order, tanh to 3 ulp) from its packed row; no branch on the sign of v (a batch's
    velocities change sign at random: a mispredicted branch per joint costs more than the
    law)."""
    sign = (1.0 if v > 0.0 else 0.0) - (1.0 if v < 0.0 else 0.0)      # selects
    s = _tanh(v / r[30]) if r[31] != 0.0 else sign
    tau = r[26] * v + (s if s > 0.0 else 0.0) * r[27] + (s if s < 0.0 else 0.0) * r[28]
    if r[29] != 0.0:
        tau += r[29] * math.exp(-(v / r[30]) ** 2) * sign
    return tau


def add_friction(P, qd, out):
    """out[i] += friction of joint i at qd[i], for every joint, in a loop of its own after
    the Newton–Euler recursion (whose loops then carry no friction law: no branches, no
    calls to tanh or exp around which the compiler would spill their many live values).
    The packed model says which friction applies (row n, column 15): none (nothing to
    do), viscous and Coulomb only (b q̇ + f_c sign(q̇), without branches), or the
    per-joint laws (`_friction` written out: a call per joint costs as much as the law)."""
    n = qd.shape[0]
    kind = P[n, 15]
    if kind == FRICTION_PLAIN:
        for i in range(n):
            v = qd[i]
            sign = (1.0 if v > 0.0 else 0.0) - (1.0 if v < 0.0 else 0.0)
            out[i] += v * P[i, 26] + sign * P[i, 27]
    elif kind != FRICTION_NONE:
        for i in range(n):
            r = P[i]
            v = qd[i]
            sign = (1.0 if v > 0.0 else 0.0) - (1.0 if v < 0.0 else 0.0)
            s = _tanh(v / r[30]) if r[31] != 0.0 else sign
            tau = r[26] * v + (s if s > 0.0 else 0.0) * r[27] + (s if s < 0.0 else 0.0) * r[28]
            if r[29] != 0.0:
                tau += r[29] * math.exp(-(v / r[30]) ** 2) * sign
            out[i] += tau


def r0t(r, x, y, z):
    """R0ᵀ (x, y, z) for link row r; R0 = Rx(α) (flag r[13]: DH placements, identity) in
    4 multiplications instead of 9."""
    if r[13] != 0.0:
        return x, r[4] * y + r[7] * z, r[4] * z - r[7] * y
    return (r[0] * x + r[3] * y + r[6] * z, r[1] * x + r[4] * y + r[7] * z,
            r[2] * x + r[5] * y + r[8] * z)


def r0(r, x, y, z):
    """R0 (x, y, z) for link row r."""
    if r[13] != 0.0:
        return x, r[4] * y - r[7] * z, r[7] * y + r[4] * z
    return (r[0] * x + r[1] * y + r[2] * z, r[3] * x + r[4] * y + r[5] * z,
            r[6] * x + r[7] * y + r[8] * z)


def rnea_into(P, q, qd, qdd, w, mode, out, S):
    """Newton–Euler τ into out (n,); mode 0: full (armature, friction), 3: full with the
    tip wrench w (6,), 1: q̈ = 0 (bias, friction), 2: q̇ = q̈ = 0 (gravity; qd, qdd are not
    read). S: (n, ≥ 8) scratch. False if an input or the result is not finite."""
    n = q.shape[0]
    G = P[n]
    wx = wy = wz = 0.0                       # ω, ω̇, v̇ of body i-1 in its frame
    ax = ay = az = 0.0
    vx, vy, vz = -G[12], -G[13], -G[14]      # gravity as base acceleration ([CSDN] §2.4)
    full = mode == 0 or mode == 3
    check = 0.0
    for i in range(n):
        r = P[i]
        qi = q[i]
        qdi = qd[i] if mode != 2 else 0.0
        qddi = qdd[i] if full else 0.0
        check += qi + qdi + qddi
        # into the joint frame: x' = R0ᵀ x
        w0, w1, w2 = r0t(r, wx, wy, wz)
        a0, a1, a2 = r0t(r, ax, ay, az)
        v0, v1, v2 = r0t(r, vx, vy, vz)
        px, py, pz = r[9], r[10], r[11]
        prismatic = r[14] != 0.0
        if prismatic:
            pz += qi
            theta = r[12]
        else:
            theta = r[12] + qi
        # v̇ of body i's origin: v̇ + ω̇ × p + ω × (ω × p)
        t0 = w1 * pz - w2 * py
        t1 = w2 * px - w0 * pz
        t2 = w0 * py - w1 * px
        v0 += a1 * pz - a2 * py + w1 * t2 - w2 * t1
        v1 += a2 * px - a0 * pz + w2 * t0 - w0 * t2
        v2 += a0 * py - a1 * px + w0 * t1 - w1 * t0
        c = math.cos(theta)
        s = math.sin(theta)
        S[i, 6] = c
        S[i, 7] = s
        # into body i: x = Rz(θ)ᵀ x'
        wx, wy, wz = c * w0 + s * w1, c * w1 - s * w0, w2
        ax, ay, az = c * a0 + s * a1, c * a1 - s * a0, a2
        vx, vy, vz = c * v0 + s * v1, c * v1 - s * v0, v2
        if prismatic:
            vx += 2.0 * qdi * wy
            vy -= 2.0 * qdi * wx
            vz += qddi
        else:
            ax += wy * qdi
            ay -= wx * qdi
            az += qddi
            wz += qdi
        # body wrench about the origin: f = m v̇ + ω̇ × h + ω × (ω × h),
        # n = I_o ω̇ + ω × (I_o ω) + h × v̇
        m, hx, hy, hz = r[15], r[16], r[17], r[18]
        ixx, iyy, izz, ixy, ixz, iyz = r[19], r[20], r[21], r[22], r[23], r[24]
        t0 = wy * hz - wz * hy
        t1 = wz * hx - wx * hz
        t2 = wx * hy - wy * hx
        S[i, 0] = m * vx + ay * hz - az * hy + wy * t2 - wz * t1
        S[i, 1] = m * vy + az * hx - ax * hz + wz * t0 - wx * t2
        S[i, 2] = m * vz + ax * hy - ay * hx + wx * t1 - wy * t0
        lx = ixx * wx + ixy * wy + ixz * wz
        ly = ixy * wx + iyy * wy + iyz * wz
        lz = ixz * wx + iyz * wy + izz * wz
        S[i, 3] = (ixx * ax + ixy * ay + ixz * az + wy * lz - wz * ly
                   + hy * vz - hz * vy)
        S[i, 4] = (ixy * ax + iyy * ay + iyz * az + wz * lx - wx * lz
                   + hz * vx - hx * vz)
        S[i, 5] = (ixz * ax + iyz * ay + izz * az + wx * ly - wy * lx
                   + hx * vy - hy * vx)
    fx = fy = fz = nx = ny = nz = 0.0
    if mode == 3:                      # the tip wrench, into body n about its origin
        fx = G[0] * w[0] + G[1] * w[1] + G[2] * w[2]
        fy = G[3] * w[0] + G[4] * w[1] + G[5] * w[2]
        fz = G[6] * w[0] + G[7] * w[1] + G[8] * w[2]
        nx = G[0] * w[3] + G[1] * w[4] + G[2] * w[5] + G[10] * fz - G[11] * fy
        ny = G[3] * w[3] + G[4] * w[4] + G[5] * w[5] + G[11] * fx - G[9] * fz
        nz = G[6] * w[3] + G[7] * w[4] + G[8] * w[5] + G[9] * fy - G[10] * fx
        check += w[0] + w[1] + w[2] + w[3] + w[4] + w[5]
    total = 0.0
    for i in range(n - 1, -1, -1):
        r = P[i]
        fx += S[i, 0]
        fy += S[i, 1]
        fz += S[i, 2]
        nx += S[i, 3]
        ny += S[i, 4]
        nz += S[i, 5]
        prismatic = r[14] != 0.0
        tau = fz if prismatic else nz
        if full:
            tau += r[25] * qdd[i]
        out[i] = tau
        total += tau
        if i > 0:                            # into body i-1: R0 (Rz f), R0 (Rz n + p' × Rz f)
            c, s = S[i, 6], S[i, 7]
            f0, f1, f2 = c * fx - s * fy, s * fx + c * fy, fz
            m0, m1, m2 = c * nx - s * ny, s * nx + c * ny, nz
            px, py, pz = r[9], r[10], r[11]
            if prismatic:
                pz += q[i]
            m0 += py * f2 - pz * f1
            m1 += pz * f0 - px * f2
            m2 += px * f1 - py * f0
            fx, fy, fz = r0(r, f0, f1, f2)
            nx, ny, nz = r0(r, m0, m1, m2)
    if mode != 2:
        add_friction(P, qd, out)
    return math.isfinite(check * 0.0 + total)


def _fits(P, q, x, y, out):
    """One state: every array (n,) for the packed model P."""
    n = P.shape[0] - 1
    return q.shape[0] == n and x.shape[0] == n and y.shape[0] == n and out.shape[0] == n


def rnea_one(P, q, qd, qdd, out):
    if not _fits(P, q, qd, qdd, out):
        return False
    return rnea_into(P, q, qd, qdd, q, 0, out, P[:, 32:])


def rnea_wrench_one(P, q, qd, qdd, w, out):
    if not _fits(P, q, qd, qdd, out) or w.shape[0] != 6:
        return False
    return rnea_into(P, q, qd, qdd, w, 3, out, P[:, 32:])


def bias_one(P, q, qd, out):
    if not _fits(P, q, qd, qd, out):
        return False
    return rnea_into(P, q, qd, qd, q, 1, out, P[:, 32:])


def gravity_one(P, q, out):
    if not _fits(P, q, q, q, out):
        return False
    return rnea_into(P, q, q, q, q, 2, out, P[:, 32:])


def _rows_fit(P, q, x, y, out):
    """A batch: every array (B, n)."""
    n = P.shape[0] - 1
    size = q.shape[0]
    return (q.shape[1] == n and x.shape[1] == n and y.shape[1] == n and out.shape[1] == n
            and x.shape[0] == size and y.shape[0] == size and out.shape[0] == size)


def _wrenches_fit(q, w):
    """One wrench (1, 6) for all samples or one per sample (B, 6)."""
    return w.shape[1] == 6 and (w.shape[0] == 1 or w.shape[0] == q.shape[0])


def rnea_rows(P, q, qd, qdd, w, mode, out):
    S = P[:, 32:]
    step = 1 if w.shape[0] > 1 else 0
    for b in range(q.shape[0]):
        if not rnea_into(P, q[b], qd[b], qdd[b], w[b * step], mode, out[b], S):
            return False
    return True


def rnea_batch(P, q, qd, qdd, out):
    if not _rows_fit(P, q, qd, qdd, out):
        return False
    return rnea_rows(P, q, qd, qdd, q, 0, out)


def rnea_wrench_batch(P, q, qd, qdd, w, out):
    if not (_rows_fit(P, q, qd, qdd, out) and _wrenches_fit(q, w)):
        return False
    return rnea_rows(P, q, qd, qdd, w, 3, out)


def bias_batch(P, q, qd, out):
    if not _rows_fit(P, q, qd, qd, out):
        return False
    return rnea_rows(P, q, qd, qd, q, 1, out)


def gravity_batch(P, q, out):
    if not _rows_fit(P, q, q, q, out):
        return False
    return rnea_rows(P, q, q, q, q, 2, out)


def rot_z_sym(c, s, xx, yy, zz, xy, xz, yz):
    """Rz(θ) A Rz(θ)ᵀ of a symmetric A (xx yy zz xy xz yz)."""
    u00, u01, u02 = c * xx - s * xy, c * xy - s * yy, c * xz - s * yz
    u10, u11, u12 = s * xx + c * xy, s * xy + c * yy, s * xz + c * yz
    return (c * u00 - s * u01, s * u10 + c * u11, zz, s * u00 + c * u01, u02, u12)


def rot_z_gen(c, s, b):
    """Rz(θ) B Rz(θ)ᵀ of a general B (row-major 9-tuple)."""
    u00, u01, u02 = c * b[0] - s * b[3], c * b[1] - s * b[4], c * b[2] - s * b[5]
    u10, u11, u12 = s * b[0] + c * b[3], s * b[1] + c * b[4], s * b[2] + c * b[5]
    u20, u21, u22 = b[6], b[7], b[8]
    return (c * u00 - s * u01, s * u00 + c * u01, u02,
            c * u10 - s * u11, s * u10 + c * u11, u12,
            c * u20 - s * u21, s * u20 + c * u21, u22)


def rot_sym(r, xx, yy, zz, xy, xz, yz):
    """R A Rᵀ of a symmetric A, R = r[0:9] row-major: T = A Rᵀ, then the upper half of R T;
    for R = Rx(α) (flag r[13]) only the y, z rows and columns mix."""
    if r[13] != 0.0:
        c, s = r[4], r[7]
        u11, u12 = c * yy - s * yz, c * yz - s * zz
        u21, u22 = s * yy + c * yz, s * yz + c * zz
        return (xx, c * u11 - s * u12, s * u21 + c * u22, c * xy - s * xz, s * xy + c * xz,
                s * u11 + c * u12)
    t00 = xx * r[0] + xy * r[1] + xz * r[2]
    t01 = xx * r[3] + xy * r[4] + xz * r[5]
    t02 = xx * r[6] + xy * r[7] + xz * r[8]
    t10 = xy * r[0] + yy * r[1] + yz * r[2]
    t11 = xy * r[3] + yy * r[4] + yz * r[5]
    t12 = xy * r[6] + yy * r[7] + yz * r[8]
    t20 = xz * r[0] + yz * r[1] + zz * r[2]
    t21 = xz * r[3] + yz * r[4] + zz * r[5]
    t22 = xz * r[6] + yz * r[7] + zz * r[8]
    return (r[0] * t00 + r[1] * t10 + r[2] * t20,
            r[3] * t01 + r[4] * t11 + r[5] * t21,
            r[6] * t02 + r[7] * t12 + r[8] * t22,
            r[0] * t01 + r[1] * t11 + r[2] * t21,
            r[0] * t02 + r[1] * t12 + r[2] * t22,
            r[3] * t02 + r[4] * t12 + r[5] * t22)


def rot_gen(r, b):
    """R B Rᵀ of a general B (row-major 9-tuple), R = r[0:9] row-major (or Rx(α))."""
    if r[13] != 0.0:
        c, s = r[4], r[7]
        u10, u11, u12 = c * b[3] - s * b[6], c * b[4] - s * b[7], c * b[5] - s * b[8]
        u20, u21, u22 = s * b[3] + c * b[6], s * b[4] + c * b[7], s * b[5] + c * b[8]
        return (b[0], c * b[1] - s * b[2], s * b[1] + c * b[2],
                u10, c * u11 - s * u12, s * u11 + c * u12,
                u20, c * u21 - s * u22, s * u21 + c * u22)
    t00 = b[0] * r[0] + b[1] * r[1] + b[2] * r[2]
    t01 = b[0] * r[3] + b[1] * r[4] + b[2] * r[5]
    t02 = b[0] * r[6] + b[1] * r[7] + b[2] * r[8]
    t10 = b[3] * r[0] + b[4] * r[1] + b[5] * r[2]
    t11 = b[3] * r[3] + b[4] * r[4] + b[5] * r[5]
    t12 = b[3] * r[6] + b[4] * r[7] + b[5] * r[8]
    t20 = b[6] * r[0] + b[7] * r[1] + b[8] * r[2]
    t21 = b[6] * r[3] + b[7] * r[4] + b[8] * r[5]
    t22 = b[6] * r[6] + b[7] * r[7] + b[8] * r[8]
    return (r[0] * t00 + r[1] * t10 + r[2] * t20,
            r[0] * t01 + r[1] * t11 + r[2] * t21,
            r[0] * t02 + r[1] * t12 + r[2] * t22,
            r[3] * t00 + r[4] * t10 + r[5] * t20,
            r[3] * t01 + r[4] * t11 + r[5] * t21,
            r[3] * t02 + r[4] * t12 + r[5] * t22,
            r[6] * t00 + r[7] * t10 + r[8] * t20,
            r[6] * t01 + r[7] * t11 + r[8] * t21,
            r[6] * t02 + r[7] * t12 + r[8] * t22)


def aba_into(P, q, qd, tau, w, wrench, out, S):
    """Articulated-body q̈ into out (n,) (RBDA Table 7.1, spatial vectors [ω; v]).
    S is (n, ≥ 20) scratch per link: 0-5 the body's own bias force v ×f (I v) [n; f],
    6-9 c (its nonzero entries), 10-15 U, 16 D, 17 u, 18 cos, 19 sin (the articulated
    inertias pass from child to parent in local variables). The tip wrench w (6,) if
    `wrench`. The friction by the model's kind, as in `add_friction` (measured: here, in
    pass 2, costs less than in pass 1 or in a loop of its own). False if an input or the
    result is not finite, or D ≤ 0."""
    n = q.shape[0]
    G = P[n]
    wx = wy = wz = 0.0                       # spatial velocity of body i-1 in its frame
    vx = vy = vz = 0.0
    check = 0.0
    kind = G[15]
    for i in range(n):                       # pass 1: velocities, c, own bias force
        r = P[i]
        qi = q[i]
        qdi = qd[i]
        check += qi + qdi + tau[i]
        w0, w1, w2 = r0t(r, wx, wy, wz)
        v0, v1, v2 = r0t(r, vx, vy, vz)
        px, py, pz = r[9], r[10], r[11]
        prismatic = r[14] != 0.0
        if prismatic:
            pz += qi
            theta = r[12]
        else:
            theta = r[12] + qi
        v0 += w1 * pz - w2 * py              # v + ω × p
        v1 += w2 * px - w0 * pz
        v2 += w0 * py - w1 * px
        c = math.cos(theta)
        s = math.sin(theta)
        S[i, 18] = c
        S[i, 19] = s
        wx, wy, wz = c * w0 + s * w1, c * w1 - s * w0, w2
        vx, vy, vz = c * v0 + s * v1, c * v1 - s * v0, v2
        if prismatic:                        # c = v ×m (S q̇)
            vz += qdi
            S[i, 6] = 0.0
            S[i, 7] = 0.0
            S[i, 8] = wy * qdi
            S[i, 9] = -wx * qdi
        else:
            wz += qdi
            S[i, 6] = wy * qdi
            S[i, 7] = -wx * qdi
            S[i, 8] = vy * qdi
            S[i, 9] = -vx * qdi
        m, hx, hy, hz = r[15], r[16], r[17], r[18]
        ixx, iyy, izz, ixy, ixz, iyz = r[19], r[20], r[21], r[22], r[23], r[24]
        # momentum I v: l = I_o ω + h × v, k = m v - h × ω; pA = v ×f (I v)
        lx = ixx * wx + ixy * wy + ixz * wz + hy * vz - hz * vy
        ly = ixy * wx + iyy * wy + iyz * wz + hz * vx - hx * vz
        lz = ixz * wx + iyz * wy + izz * wz + hx * vy - hy * vx
        kx = m * vx - (hy * wz - hz * wy)
        ky = m * vy - (hz * wx - hx * wz)
        kz = m * vz - (hx * wy - hy * wx)
        S[i, 0] = wy * lz - wz * ly + vy * kz - vz * ky
        S[i, 1] = wz * lx - wx * lz + vz * kx - vx * kz
        S[i, 2] = wx * ly - wy * lx + vx * ky - vy * kx
        S[i, 3] = wy * kz - wz * ky
        S[i, 4] = wz * kx - wx * kz
        S[i, 5] = wx * ky - wy * kx
    # pass 2, inward: IA_i = I_i + (what the children pass on, carried in ca.., cb, cm..,
    # cn.., cf..: the child's Ia and pa already in body i's frame); the tip wrench is what
    # body n receives from its (absent) child
    caxx = cayy = cazz = caxy = caxz = cayz = 0.0
    cb = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    cmxx = cmyy = cmzz = cmxy = cmxz = cmyz = 0.0
    cn0 = cn1 = cn2 = cf0 = cf1 = cf2 = 0.0
    if wrench:                               # the tip wrench, into body n about its origin
        cf0 = G[0] * w[0] + G[1] * w[1] + G[2] * w[2]
        cf1 = G[3] * w[0] + G[4] * w[1] + G[5] * w[2]
        cf2 = G[6] * w[0] + G[7] * w[1] + G[8] * w[2]
        cn0 = G[0] * w[3] + G[1] * w[4] + G[2] * w[5] + G[10] * cf2 - G[11] * cf1
        cn1 = G[3] * w[3] + G[4] * w[4] + G[5] * w[5] + G[11] * cf0 - G[9] * cf2
        cn2 = G[6] * w[3] + G[7] * w[4] + G[8] * w[5] + G[9] * cf1 - G[10] * cf0
        check += w[0] + w[1] + w[2] + w[3] + w[4] + w[5]
    for i in range(n - 1, -1, -1):
        r = P[i]
        s_ = S[i]
        m, hx, hy, hz = r[15], r[16], r[17], r[18]
        axx, ayy, azz = r[19] + caxx, r[20] + cayy, r[21] + cazz     # I_o + carried
        axy, axz, ayz = r[22] + caxy, r[23] + caxz, r[24] + cayz
        b = (cb[0], cb[1] - hz, cb[2] + hy, cb[3] + hz, cb[4], cb[5] - hx,   # h× + carried
             cb[6] - hy, cb[7] + hx, cb[8])
        mxx, myy, mzz = m + cmxx, m + cmyy, m + cmzz
        mxy, mxz, myz = cmxy, cmxz, cmyz
        pn0, pn1, pn2 = s_[0] + cn0, s_[1] + cn1, s_[2] + cn2
        pf0, pf1, pf2 = s_[3] + cf0, s_[4] + cf1, s_[5] + cf2
        prismatic = r[14] != 0.0
        net = tau[i]                         # minus friction, by the model's kind
        if kind == FRICTION_PLAIN:
            v = qd[i]
            net -= v * r[26] + ((1.0 if v > 0.0 else 0.0) - (1.0 if v < 0.0 else 0.0)) * r[27]
        elif kind != FRICTION_NONE:
            net -= _friction(r, qd[i])
        if prismatic:                        # U = IA e_5, D = IA[5, 5] + armature
            u0, u1, u2, u3, u4, u5 = b[2], b[5], b[8], mxz, myz, mzz
            d = mzz + r[25]
            u = net - pf2
        else:                                # U = IA e_2
            u0, u1, u2, u3, u4, u5 = axz, ayz, azz, b[6], b[7], b[8]
            d = azz + r[25]
            u = net - pn2
        if not d > 0.0:
            return False
        s_[10] = u0
        s_[11] = u1
        s_[12] = u2
        s_[13] = u3
        s_[14] = u4
        s_[15] = u5
        s_[16] = d
        s_[17] = u
        if i == 0:
            break
        # Ia = IA − U Uᵀ / D
        e0, e1, e2, e3, e4, e5 = u0 / d, u1 / d, u2 / d, u3 / d, u4 / d, u5 / d
        axx -= e0 * u0
        ayy -= e1 * u1
        azz -= e2 * u2
        axy -= e0 * u1
        axz -= e0 * u2
        ayz -= e1 * u2
        b = (b[0] - e0 * u3, b[1] - e0 * u4, b[2] - e0 * u5,
             b[3] - e1 * u3, b[4] - e1 * u4, b[5] - e1 * u5,
             b[6] - e2 * u3, b[7] - e2 * u4, b[8] - e2 * u5)
        mxx -= e3 * u3
        myy -= e4 * u4
        mzz -= e5 * u5
        mxy -= e3 * u4
        mxz -= e3 * u5
        myz -= e4 * u5
        # pa = pA + Ia c + U u / D, c = (c0, c1, 0, c3, c4, 0)
        c0, c1, c3, c4 = s_[6], s_[7], s_[8], s_[9]
        ud = u / d
        n0 = pn0 + axx * c0 + axy * c1 + b[0] * c3 + b[1] * c4 + u0 * ud
        n1 = pn1 + axy * c0 + ayy * c1 + b[3] * c3 + b[4] * c4 + u1 * ud
        n2 = pn2 + axz * c0 + ayz * c1 + b[6] * c3 + b[7] * c4 + u2 * ud
        f0 = pf0 + b[0] * c0 + b[3] * c1 + mxx * c3 + mxy * c4 + u3 * ud
        f1 = pf1 + b[1] * c0 + b[4] * c1 + mxy * c3 + myy * c4 + u4 * ud
        f2 = pf2 + b[2] * c0 + b[5] * c1 + mxz * c3 + myz * c4 + u5 * ud
        # to the joint frame: rotate by Rz(θ)
        c, s = s_[18], s_[19]
        f0, f1 = c * f0 - s * f1, s * f0 + c * f1
        n0, n1 = c * n0 - s * n1, s * n0 + c * n1
        axx, ayy, azz, axy, axz, ayz = rot_z_sym(c, s, axx, ayy, azz, axy, axz, ayz)
        b = rot_z_gen(c, s, b)
        mxx, myy, mzz, mxy, mxz, myz = rot_z_sym(c, s, mxx, myy, mzz, mxy, mxz, myz)
        # shift to the parent's origin p': n += p × f; B += p× M; A += C + Cᵀ − (p× M) p×
        # with C = p× Bᵀ (RBDA eq. 2.66 for a general articulated inertia)
        px, py, pz = r[9], r[10], r[11]
        if prismatic:
            pz += q[i]
        n0 += py * f2 - pz * f1
        n1 += pz * f0 - px * f2
        n2 += px * f1 - py * f0
        # K = p× M, column by column (M symmetric)
        k00, k10, k20 = py * mxz - pz * mxy, pz * mxx - px * mxz, px * mxy - py * mxx
        k01, k11, k21 = py * myz - pz * myy, pz * mxy - px * myz, px * myy - py * mxy
        k02, k12, k22 = py * mzz - pz * myz, pz * mxz - px * mzz, px * myz - py * mxz
        # C = p× Bᵀ: column j is p × (row j of B)
        c00, c10, c20 = py * b[2] - pz * b[1], pz * b[0] - px * b[2], px * b[1] - py * b[0]
        c01, c11, c21 = py * b[5] - pz * b[4], pz * b[3] - px * b[5], px * b[4] - py * b[3]
        c02, c12, c22 = py * b[8] - pz * b[7], pz * b[6] - px * b[8], px * b[7] - py * b[6]
        # (K p×) row i is (row i of K) × p
        axx += 2.0 * c00 - (k01 * pz - k02 * py)
        ayy += 2.0 * c11 - (k12 * px - k10 * pz)
        azz += 2.0 * c22 - (k20 * py - k21 * px)
        axy += c01 + c10 - (k02 * px - k00 * pz)
        axz += c02 + c20 - (k00 * py - k01 * px)
        ayz += c12 + c21 - (k10 * py - k11 * px)
        b = (b[0] + k00, b[1] + k01, b[2] + k02, b[3] + k10, b[4] + k11, b[5] + k12,
             b[6] + k20, b[7] + k21, b[8] + k22)
        # to the parent's frame: rotate by R0, carried to the parent
        caxx, cayy, cazz, caxy, caxz, cayz = rot_sym(r, axx, ayy, azz, axy, axz, ayz)
        cb = rot_gen(r, b)
        cmxx, cmyy, cmzz, cmxy, cmxz, cmyz = rot_sym(r, mxx, myy, mzz, mxy, mxz, myz)
        cn0, cn1, cn2 = r0(r, n0, n1, n2)
        cf0, cf1, cf2 = r0(r, f0, f1, f2)
    wx = wy = wz = 0.0                       # pass 3: accelerations, a_0 = −g
    vx, vy, vz = -G[12], -G[13], -G[14]
    total = 0.0
    for i in range(n):
        r = P[i]
        s_ = S[i]
        w0, w1, w2 = r0t(r, wx, wy, wz)
        v0, v1, v2 = r0t(r, vx, vy, vz)
        px, py, pz = r[9], r[10], r[11]
        prismatic = r[14] != 0.0
        if prismatic:
            pz += q[i]
        v0 += w1 * pz - w2 * py
        v1 += w2 * px - w0 * pz
        v2 += w0 * py - w1 * px
        c, s = s_[18], s_[19]
        wx = c * w0 + s * w1 + s_[6]
        wy = c * w1 - s * w0 + s_[7]
        wz = w2
        vx = c * v0 + s * v1 + s_[8]
        vy = c * v1 - s * v0 + s_[9]
        vz = v2
        qddi = (s_[17] - (s_[10] * wx + s_[11] * wy + s_[12] * wz
                          + s_[13] * vx + s_[14] * vy + s_[15] * vz)) / s_[16]
        if prismatic:
            vz += qddi
        else:
            wz += qddi
        out[i] = qddi
        total += qddi
    return math.isfinite(check * 0.0 + total)


def aba_one(P, q, qd, tau, out):
    if not _fits(P, q, qd, tau, out):
        return False
    return aba_into(P, q, qd, tau, q, False, out, P[:, 32:])


def aba_wrench_one(P, q, qd, tau, w, out):
    if not _fits(P, q, qd, tau, out) or w.shape[0] != 6:
        return False
    return aba_into(P, q, qd, tau, w, True, out, P[:, 32:])


def aba_rows(P, q, qd, tau, w, wrench, out):
    S = P[:, 32:]
    step = 1 if w.shape[0] > 1 else 0
    for b in range(q.shape[0]):
        if not aba_into(P, q[b], qd[b], tau[b], w[b * step], wrench, out[b], S):
            return False
    return True


def aba_batch(P, q, qd, tau, out):
    if not _rows_fit(P, q, qd, tau, out):
        return False
    return aba_rows(P, q, qd, tau, q, False, out)


def aba_wrench_batch(P, q, qd, tau, w, out):
    if not (_rows_fit(P, q, qd, tau, out) and _wrenches_fit(q, w)):
        return False
    return aba_rows(P, q, qd, tau, w, True, out)


def rk4_one(P, q, qd, tau, dt, out):
    """One classical RK4 step of q̈ = aba(q, q̇, τ), τ held (as integration.rk4_step):
    q and q̇ after the step into out[0], out[1]."""
    n = P.shape[0] - 1
    if not _fits(P, q, qd, tau, out[0]) or out.shape[0] != 2:
        return False
    S = P[:, 32:]
    T = np.empty((3, n))                 # stage q, stage q̇, stage q̈
    if not aba_into(P, q, qd, tau, q, False, T[2], S):
        return False
    h = 0.5 * dt
    for j in range(n):                   # k1 = (q̇, k1v); stage 2 at q + h k1q, q̇ + h k1v
        out[0, j] = qd[j]
        out[1, j] = T[2, j]
        T[0, j] = q[j] + h * qd[j]
        T[1, j] = qd[j] + h * T[2, j]
    for stage in range(3):
        if not aba_into(P, T[0], T[1], tau, q, False, T[2], S):
            return False
        step = h if stage == 0 else dt       # inputs of k3 (half step), of k4 (full)
        for j in range(n):
            weight = 2.0 if stage < 2 else 1.0
            out[0, j] += weight * T[1, j]
            out[1, j] += weight * T[2, j]
            T[0, j] = q[j] + step * T[1, j]
            T[1, j] = qd[j] + step * T[2, j]
    sixth = dt / 6.0
    for j in range(n):
        out[0, j] = q[j] + sixth * out[0, j]
        out[1, j] = qd[j] + sixth * out[1, j]
    return True


# Kinematics and the joint-space inertia of one state: the body frames in the base first
# (`poses_into`, into the scratch columns), then the tool frame, its Jacobian, J̇ q̇ or the
# composite-rigid-body mass matrix from them (as `robot_dynamics.dynamics.kinematics` and
# `dynamics._mass_matrix_one` on Python floats, which these must match to rounding).


def poses_into(P, q, S):
    """Body i's rotation (row-major) into S[i, 0:9] and origin into S[i, 9:12], base
    frame: body i = body i-1 · R0_i · Tz(p'_i [+ q_i]) · Rz(θ_i); False if q is not
    finite."""
    n = q.shape[0]
    r0_ = r4 = r8 = 1.0
    r1 = r2 = r3 = r5 = r6 = r7 = 0.0
    x = y = z = 0.0
    check = 0.0
    for i in range(n):
        r = P[i]
        qi = q[i]
        check += qi
        a0, a1, a2, a3, a4, a5, a6, a7, a8 = r[0], r[1], r[2], r[3], r[4], r[5], r[6], \
            r[7], r[8]
        b0 = r0_ * a0 + r1 * a3 + r2 * a6
        b1 = r0_ * a1 + r1 * a4 + r2 * a7
        b2 = r0_ * a2 + r1 * a5 + r2 * a8
        b3 = r3 * a0 + r4 * a3 + r5 * a6
        b4 = r3 * a1 + r4 * a4 + r5 * a7
        b5 = r3 * a2 + r4 * a5 + r5 * a8
        b6 = r6 * a0 + r7 * a3 + r8 * a6
        b7 = r6 * a1 + r7 * a4 + r8 * a7
        b8 = r6 * a2 + r7 * a5 + r8 * a8
        px, py, pz = r[9], r[10], r[11]
        if r[14] != 0.0:
            pz += qi
            theta = r[12]
        else:
            theta = r[12] + qi
        x += b0 * px + b1 * py + b2 * pz
        y += b3 * px + b4 * py + b5 * pz
        z += b6 * px + b7 * py + b8 * pz
        co = math.cos(theta)
        si = math.sin(theta)
        r0_, r1, r2 = co * b0 + si * b1, co * b1 - si * b0, b2
        r3, r4, r5 = co * b3 + si * b4, co * b4 - si * b3, b5
        r6, r7, r8 = co * b6 + si * b7, co * b7 - si * b6, b8
        S[i, 0] = r0_
        S[i, 1] = r1
        S[i, 2] = r2
        S[i, 3] = r3
        S[i, 4] = r4
        S[i, 5] = r5
        S[i, 6] = r6
        S[i, 7] = r7
        S[i, 8] = r8
        S[i, 9] = x
        S[i, 10] = y
        S[i, 11] = z
    return math.isfinite(check * 0.0 + x + y + z)


def tool_valid(T):
    """Whether T (4, 4) is a finite homogeneous transform with a proper rotation (within
    the tolerance of `kinematics`: |RᵀR − I| ≤ 1e-6, det R ≥ 0)."""
    if T.shape[0] != 4 or T.shape[1] != 4:
        return False
    total = 0.0
    for i in range(4):
        for j in range(4):
            total += T[i, j]
    if not math.isfinite(total):
        return False
    if T[3, 0] != 0.0 or T[3, 1] != 0.0 or T[3, 2] != 0.0 or T[3, 3] != 1.0:
        return False
    for i in range(3):
        for j in range(3):
            d = T[0, i] * T[0, j] + T[1, i] * T[1, j] + T[2, i] * T[2, j]
            if abs(d - (1.0 if i == j else 0.0)) > 1e-6:
                return False
    det = (T[0, 0] * (T[1, 1] * T[2, 2] - T[1, 2] * T[2, 1])
           - T[0, 1] * (T[1, 0] * T[2, 2] - T[1, 2] * T[2, 0])
           + T[0, 2] * (T[1, 0] * T[2, 1] - T[1, 1] * T[2, 0]))
    return det >= 0.0


def tool_frame_into(P, T, S, F):
    """The tip frame (the last body · (R_tip, p_tip)) times the tool T into F (4, 4), from
    the body frames in S."""
    n = P.shape[0] - 1
    G = P[n]
    k = n - 1
    for i in range(3):                       # R = R_n R_tip, p = p_n + R_n p_tip
        a0, a1, a2 = S[k, 3 * i], S[k, 3 * i + 1], S[k, 3 * i + 2]
        F[i, 0] = a0 * G[0] + a1 * G[3] + a2 * G[6]
        F[i, 1] = a0 * G[1] + a1 * G[4] + a2 * G[7]
        F[i, 2] = a0 * G[2] + a1 * G[5] + a2 * G[8]
        F[i, 3] = S[k, 9 + i] + a0 * G[9] + a1 * G[10] + a2 * G[11]
    for i in range(3):                       # p += R t_p, then R = R t_R
        a0, a1, a2 = F[i, 0], F[i, 1], F[i, 2]
        F[i, 3] += a0 * T[0, 3] + a1 * T[1, 3] + a2 * T[2, 3]
        F[i, 0] = a0 * T[0, 0] + a1 * T[1, 0] + a2 * T[2, 0]
        F[i, 1] = a0 * T[0, 1] + a1 * T[1, 1] + a2 * T[2, 1]
        F[i, 2] = a0 * T[0, 2] + a1 * T[1, 2] + a2 * T[2, 2]
    F[3, 0] = 0.0
    F[3, 1] = 0.0
    F[3, 2] = 0.0
    F[3, 3] = 1.0


def tool_pose_one(P, q, T, out):
    """The tool frame (tip frame · T) into out (4, 4); False if it does not apply."""
    n = P.shape[0] - 1
    if q.shape[0] != n or out.shape[0] != 4 or out.shape[1] != 4 or not tool_valid(T):
        return False
    S = P[:, 32:]
    if not poses_into(P, q, S):
        return False
    tool_frame_into(P, T, S, out)
    return True


def jacobian_into(P, S, tx, ty, tz, out):
    """Geometric Jacobian (6, n), rows [v; ω], of the point t on the last body."""
    n = P.shape[0] - 1
    for j in range(n):
        zx, zy, zz = S[j, 2], S[j, 5], S[j, 8]
        if P[j, 14] != 0.0:
            out[0, j] = zx
            out[1, j] = zy
            out[2, j] = zz
            out[3, j] = 0.0
            out[4, j] = 0.0
            out[5, j] = 0.0
        else:
            lx, ly, lz = tx - S[j, 9], ty - S[j, 10], tz - S[j, 11]
            out[0, j] = zy * lz - zz * ly
            out[1, j] = zz * lx - zx * lz
            out[2, j] = zx * ly - zy * lx
            out[3, j] = zx
            out[4, j] = zy
            out[5, j] = zz


def jacobian_one(P, q, T, out):
    """The tool frame's geometric Jacobian into out (6, n); False if it does not apply."""
    n = P.shape[0] - 1
    if q.shape[0] != n or out.shape[0] != 6 or out.shape[1] != n or not tool_valid(T):
        return False
    S = P[:, 32:]
    if not poses_into(P, q, S):
        return False
    F = np.empty((4, 4))
    tool_frame_into(P, T, S, F)
    jacobian_into(P, S, F[0, 3], F[1, 3], F[2, 3], out)
    return True


def jacobian_dot_qd_one(P, q, qd, T, out):
    """J̇ q̇ (6,) of the tool frame's origin: its classical acceleration [a; α] at q̈ = 0
    (`kinematics._jacobian_dot_qd_one`); False if it does not apply."""
    n = P.shape[0] - 1
    if q.shape[0] != n or qd.shape[0] != n or out.shape[0] != 6 or not tool_valid(T):
        return False
    check = 0.0
    for i in range(n):
        check += qd[i]
    if not math.isfinite(check):
        return False
    S = P[:, 32:]
    if not poses_into(P, q, S):
        return False
    F = np.empty((4, 4))
    tool_frame_into(P, T, S, F)
    wx = wy = wz = 0.0
    bx = by = bz = 0.0                       # α
    ax = ay = az = 0.0
    ox = oy = oz = 0.0
    for i in range(n + 1):
        if i < n:
            px, py, pz = S[i, 9], S[i, 10], S[i, 11]
        else:
            px, py, pz = F[0, 3], F[1, 3], F[2, 3]
        rx, ry, rz = px - ox, py - oy, pz - oz
        cx, cy, cz = wy * rz - wz * ry, wz * rx - wx * rz, wx * ry - wy * rx
        ax += (by * rz - bz * ry) + (wy * cz - wz * cy)
        ay += (bz * rx - bx * rz) + (wz * cx - wx * cz)
        az += (bx * ry - by * rx) + (wx * cy - wy * cx)
        if i == n:
            break
        s = qd[i]
        ux, uy, uz = S[i, 2] * s, S[i, 5] * s, S[i, 8] * s
        if P[i, 14] != 0.0:
            ux, uy, uz = 2.0 * ux, 2.0 * uy, 2.0 * uz
            ax += wy * uz - wz * uy
            ay += wz * ux - wx * uz
            az += wx * uy - wy * ux
        else:
            bx += wy * uz - wz * uy
            by += wz * ux - wx * uz
            bz += wx * uy - wy * ux
            wx += ux
            wy += uy
            wz += uz
        ox, oy, oz = px, py, pz
    out[0] = ax
    out[1] = ay
    out[2] = az
    out[3] = bx
    out[4] = by
    out[5] = bz
    return True


def mass_matrix_one(P, q, out):
    """M(q) (n, n), armature included, into out: the composite-rigid-body algorithm
    (Featherstone, RBDA §6.2) in base coordinates (`dynamics._mass_matrix_one`), from the
    packed inertias about each body's origin: body i about the base origin has first
    moment m o + R h and inertia R I_o Rᵀ + m (|o|² 1 − o oᵀ) + 2 (o·h') 1 − o h'ᵀ − h' oᵀ
    (h' = R h, o its origin). False if it does not apply."""
    n = P.shape[0] - 1
    if q.shape[0] != n or out.shape[0] != n or out.shape[1] != n:
        return False
    S = P[:, 32:]
    if not poses_into(P, q, S):
        return False
    m = hx = hy = hz = 0.0
    i00 = i01 = i02 = i11 = i12 = i22 = 0.0
    for i in range(n - 1, -1, -1):
        r = P[i]
        R0, R1, R2, R3, R4, R5, R6, R7, R8 = S[i, 0], S[i, 1], S[i, 2], S[i, 3], S[i, 4], \
            S[i, 5], S[i, 6], S[i, 7], S[i, 8]
        px, py, pz = S[i, 9], S[i, 10], S[i, 11]
        mi = r[15]
        lx, ly, lz = r[16], r[17], r[18]
        gx = R0 * lx + R1 * ly + R2 * lz             # h' = R h
        gy = R3 * lx + R4 * ly + R5 * lz
        gz = R6 * lx + R7 * ly + R8 * lz
        xx, yy, zz, xy, xz, yz = r[19], r[20], r[21], r[22], r[23], r[24]
        b0 = R0 * xx + R1 * xy + R2 * xz             # B = R I_o
        b1 = R0 * xy + R1 * yy + R2 * yz
        b2 = R0 * xz + R1 * yz + R2 * zz
        b3 = R3 * xx + R4 * xy + R5 * xz
        b4 = R3 * xy + R4 * yy + R5 * yz
        b5 = R3 * xz + R4 * yz + R5 * zz
        b6 = R6 * xx + R7 * xy + R8 * xz
        b7 = R6 * xy + R7 * yy + R8 * yz
        b8 = R6 * xz + R7 * yz + R8 * zz
        oo = mi * (px * px + py * py + pz * pz) + 2.0 * (px * gx + py * gy + pz * gz)
        i00 += b0 * R0 + b1 * R1 + b2 * R2 + oo - mi * px * px - 2.0 * px * gx
        i01 += b0 * R3 + b1 * R4 + b2 * R5 - mi * px * py - px * gy - gx * py
        i02 += b0 * R6 + b1 * R7 + b2 * R8 - mi * px * pz - px * gz - gx * pz
        i11 += b3 * R3 + b4 * R4 + b5 * R5 + oo - mi * py * py - 2.0 * py * gy
        i12 += b3 * R6 + b4 * R7 + b5 * R8 - mi * py * pz - py * gz - gy * pz
        i22 += b6 * R6 + b7 * R7 + b8 * R8 + oo - mi * pz * pz - 2.0 * pz * gz
        m += mi
        hx += mi * px + gx
        hy += mi * py + gy
        hz += mi * pz + gz
        if r[14] != 0.0:
            wx = wy = wz = 0.0
            vx, vy, vz = R2, R5, R8
        else:
            wx, wy, wz = R2, R5, R8
            vx, vy, vz = py * R8 - pz * R5, pz * R2 - px * R8, px * R5 - py * R2
        # S_i into S[i, 0:6] and C_i S_i into S[i, 6:12] (the pose of body i is used up)
        S[i, 0] = wx
        S[i, 1] = wy
        S[i, 2] = wz
        S[i, 3] = vx
        S[i, 4] = vy
        S[i, 5] = vz
        S[i, 6] = i00 * wx + i01 * wy + i02 * wz + hy * vz - hz * vy
        S[i, 7] = i01 * wx + i11 * wy + i12 * wz + hz * vx - hx * vz
        S[i, 8] = i02 * wx + i12 * wy + i22 * wz + hx * vy - hy * vx
        S[i, 9] = m * vx - hy * wz + hz * wy
        S[i, 10] = m * vy - hz * wx + hx * wz
        S[i, 11] = m * vz - hx * wy + hy * wx
    total = 0.0
    for k in range(n):
        for j in range(k + 1):
            v = (S[j, 0] * S[k, 6] + S[j, 1] * S[k, 7] + S[j, 2] * S[k, 8]
                 + S[j, 3] * S[k, 9] + S[j, 4] * S[k, 10] + S[j, 5] * S[k, 11])
            if j == k:
                v += P[k, 25]
            out[k, j] = v
            out[j, k] = v
            total += v
    return math.isfinite(total)


_KERNELS = (_tanh, _friction, add_friction, r0t, r0, rnea_into, _fits, rnea_one,
            rnea_wrench_one, bias_one, gravity_one,
            _rows_fit, _wrenches_fit, rnea_rows, rnea_batch, rnea_wrench_batch, bias_batch,
            gravity_batch, rot_z_sym, rot_z_gen, rot_sym, rot_gen, aba_into, aba_one,
            aba_wrench_one, aba_rows, aba_batch, aba_wrench_batch, rk4_one, poses_into,
            tool_valid, tool_frame_into, tool_pose_one, jacobian_into, jacobian_one,
            jacobian_dot_qd_one, mass_matrix_one)


def _source_at_import():
    """Read once, when the module is imported: an edit of the file while a process runs
    cannot mix versions."""
    try:
        return kernel_source() if numba is not None else None
    except (OSError, RuntimeError):
        return None


_SOURCE = _source_at_import()
