"""Shared test fixtures: random but physically valid serial chains.

Other test modules import `random_chain_params` from here (`from conftest import ...`
works because pytest puts this directory on sys.path); keep its signature stable.
"""

import glob
import math
import os
import tempfile

import numpy as np
import pytest
import yaml

from robot_dynamics import dynamics

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def preset_paths():
    """The robot presets in config/ at collection time (possibly none): the parameter
    files with a `robot` block under `/**` (node files such as sim.yaml, which only
    override a few robot keys for one node, are not presets)."""
    return [path for path in sorted(glob.glob(os.path.join(REPO, 'config', '*.yaml')))
            if _has_robot_block(path)]


def _has_robot_block(path):
    with open(path, encoding='utf-8') as stream:
        document = yaml.safe_load(stream)
    section = document.get('/**') if isinstance(document, dict) else None
    params = section.get('ros__parameters') if isinstance(section, dict) else None
    return isinstance(params, dict) and isinstance(params.get('robot'), dict)


def random_rotation(rng):
    """A uniformly random 3×3 rotation (QR of a Gaussian matrix, sign-fixed)."""
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q @ np.diag(np.sign(np.diag(R)))
    if np.linalg.det(Q) < 0.0:
        Q[:, 0] = -Q[:, 0]
    return Q


def random_inertia(rng, mass):
    """Centroidal inertia of a solid ellipsoid of that mass with random semi-axes, turned
    by a random rotation: full (non-diagonal), symmetric positive definite, and its
    principal moments satisfy the triangle inequality."""
    a, b, c = rng.uniform(0.03, 0.25, size=3)
    moments = mass / 5.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    R = random_rotation(rng)
    inertia = R @ np.diag(moments) @ R.T
    return 0.5 * (inertia + inertia.T)


def urdf6(inertia):
    """3×3 -> (ixx, ixy, ixz, iyy, iyz, izz)."""
    return [inertia[0, 0], inertia[0, 1], inertia[0, 2],
            inertia[1, 1], inertia[1, 2], inertia[2, 2]]


def _away_from_zero(rng, low, high, size):
    """Uniform magnitudes in [low, high] with random signs (never near zero)."""
    return rng.uniform(low, high, size=size) * rng.choice([-1.0, 1.0], size=size)


def random_chain_params(rng, n, convention, prismatic_mask=None, friction=False,
                        armature=False, payload=False):
    """A `robot` parameter block (nested dict, plain Python floats) for a random n-joint
    chain in the given DH convention ('standard' or 'modified').

    prismatic_mask: sequence of n bools (True = prismatic); None = all revolute.
    Random a, alpha, link masses 0.5–5 kg, centres of mass within 0.2 m of the link frame,
    full ellipsoid inertias; the constant parts theta and d are non-zero on every joint.
    friction adds viscous and Coulomb friction, armature adds rotor inertias, payload adds
    a random payload on the last link; all three are off by default.
    """
    if prismatic_mask is None:
        prismatic_mask = [False] * n
    prismatic_mask = [bool(p) for p in prismatic_mask]
    if len(prismatic_mask) != n:
        raise ValueError(f'prismatic_mask: expected {n} values, got {len(prismatic_mask)}')
    mass = rng.uniform(0.5, 5.0, size=n)
    block = {
        'dh_convention': convention,
        'joint_types': ['prismatic' if p else 'revolute' for p in prismatic_mask],
        'a': rng.uniform(-0.5, 0.5, size=n).tolist(),
        'alpha': rng.uniform(-math.pi, math.pi, size=n).tolist(),
        'd': _away_from_zero(rng, 0.05, 0.4, n).tolist(),
        'theta': _away_from_zero(rng, 0.1, 1.5, n).tolist(),
        'mass': mass.tolist(),
        'com': rng.uniform(-0.2, 0.2, size=3 * n).tolist(),
        'inertia': [float(v) for m in mass for v in urdf6(random_inertia(rng, m))],
        'gravity': [0.0, 0.0, -9.81],
    }
    if friction:
        block['viscous_friction'] = rng.uniform(0.1, 2.0, size=n).tolist()
        block['coulomb_friction'] = rng.uniform(0.1, 1.0, size=n).tolist()
    if armature:
        block['armature'] = rng.uniform(0.01, 0.5, size=n).tolist()
    if payload:
        m = float(rng.uniform(0.2, 3.0))
        block['payload'] = {'mass': m, 'com': rng.uniform(-0.1, 0.1, size=3).tolist(),
                            'inertia': [float(v) for v in urdf6(random_inertia(rng, m))]}
    return block


def random_state(rng, n, size=None):
    """Random (q, q̇, q̈), each (n,) or (size, n): |q| ≤ 1 (rad or m), |q̇| ≤ 2, |q̈| ≤ 3."""
    shape = (n,) if size is None else (size, n)
    return (rng.uniform(-1.0, 1.0, size=shape), rng.uniform(-2.0, 2.0, size=shape),
            rng.uniform(-3.0, 3.0, size=shape))


@pytest.fixture
def rng():
    """A fixed-seed generator, fresh for every test (tests stay independent)."""
    return np.random.default_rng(20260522)


@pytest.fixture(params=getattr(dynamics, 'BACKENDS', (None,)))
def dynamics_backend(request):
    """Runs the test once per backend of robot_dynamics.dynamics (generated kernels for
    single states, readable reference algorithms), restoring the previous one afterwards."""
    if request.param is None:
        yield None
        return
    previous = dynamics.get_backend()
    dynamics.set_backend(request.param)
    try:
        yield request.param
    finally:
        dynamics.set_backend(previous)


# ---------------------------------------------------------------- fast paths vs reference

FAST_RTOL = 1e-9     # every fast path agrees with the reference algorithms to this


def with_backend(name, function, *args, **kwargs):
    """`function(*args, **kwargs)` with dynamics backend `name`, restored afterwards."""
    previous = dynamics.get_backend()
    dynamics.set_backend(name)
    try:
        return function(*args, **kwargs)
    finally:
        dynamics.set_backend(previous)


def assert_same(fast, reference):
    """Same shape, and equal to FAST_RTOL relative to the reference's largest entry."""
    fast, reference = np.asarray(fast), np.asarray(reference)
    assert fast.shape == reference.shape
    scale = max(1.0, float(np.max(np.abs(reference))))
    np.testing.assert_allclose(fast, reference, rtol=FAST_RTOL, atol=FAST_RTOL * scale)


def both(function, *args, **kwargs):
    """(generated backend result, reference backend result)."""
    return (with_backend('generated', function, *args, **kwargs),
            with_backend('reference', function, *args, **kwargs))



DOMAINS = range(1, 231)     # ROS_DOMAIN_ID values whose DDS ports are valid on Linux
_domain = {'lock': None, 'claims': 0}


def _claim_free_domain():
    """A domain id no other test process on this machine holds (a lock file per id in the
    temporary directory, held while the module runs); successive claims of a process walk
    through all ids, so a module does not get the id of a recent one. None if file locks
    are unavailable."""
    try:
        import fcntl
    except ImportError:
        return None
    _domain['claims'] += 1
    start = os.getpid() + 7 * _domain['claims']       # 7 and 230 are coprime
    for k in range(len(DOMAINS)):
        domain = DOMAINS[(start + 7 * k) % len(DOMAINS)]
        path = os.path.join(tempfile.gettempdir(), f'robot_dynamics_test_domain_{domain}.lock')
        try:
            handle = open(path, 'a')
        except OSError:                 # another user's lock file: taken for us
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _domain['lock'] = handle
        return domain
    return None


@pytest.fixture(scope='module', autouse=True)
def private_dds_domain():
    """Each test module on its own DDS domain (ROS_DOMAIN_ID, read by rclpy.init and
    inherited by the processes a test starts), held exclusively against other test runs on
    the machine (e.g. the Kilted and the Jazzy suite at once) and changed between modules,
    so that nothing another run, or a previous module, left running reaches this module's
    nodes."""
    previous = os.environ.get('ROS_DOMAIN_ID')
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    domain = _claim_free_domain()
    if domain is not None:
        os.environ['ROS_DOMAIN_ID'] = str(domain)
    try:
        yield
    finally:
        if _domain['lock'] is not None:
            _domain['lock'].close()         # releases the lock
            _domain['lock'] = None
        if previous is None:
            os.environ.pop('ROS_DOMAIN_ID', None)
        else:
            os.environ['ROS_DOMAIN_ID'] = previous
