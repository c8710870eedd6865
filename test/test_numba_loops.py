"""The looped numba kernels (robot_dynamics._numba_loops) give the reference algorithms'
results to 1e-9 relative on every preset and on random chains up to 100 links, one state
and batches, with payload, friction, armature and tip wrench; they return None (so that
the caller takes the reference path) for non-finite inputs, a singular articulated
inertia, wrong shapes, or without numba; and their compiled code is cached outside the
install space."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import REPO, preset_paths, random_chain_params, random_state

from robot_dynamics.dynamics import _numba_loops
from robot_dynamics import dynamics
from robot_dynamics.model import ModelWarning, RobotModel
from robot_dynamics.model.urdf import model_from_urdf, model_to_urdf

RTOL = 1e-9


@pytest.fixture(scope='module')
def loops(tmp_path_factory):
    """The module with its kernels compiled into a fresh cache directory."""
    pytest.importorskip('numba')
    previous = os.environ.get('ROBOT_DYNAMICS_CACHE')
    os.environ['ROBOT_DYNAMICS_CACHE'] = str(tmp_path_factory.mktemp('loops_cache'))
    try:
        assert _numba_loops.available()
        assert _numba_loops.compile_kernels()
    finally:
        if previous is None:
            os.environ.pop('ROBOT_DYNAMICS_CACHE')
        else:
            os.environ['ROBOT_DYNAMICS_CACHE'] = previous
    return _numba_loops


def _presets():
    params = []
    for path in preset_paths():
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', ModelWarning)
            model = RobotModel.from_yaml(path)
        params.append(pytest.param(model, id=os.path.basename(path)))
    return params


def _random_models():
    rng = np.random.default_rng(61)
    params = []
    for convention in ('standard', 'modified'):
        for n in (1, 6, 40, 100):
            mask = rng.random(n) < 0.3                 # mixed revolute / prismatic
            block = random_chain_params(rng, n, convention, mask, friction=True,
                                        armature=True, payload=True)
            params.append(pytest.param(RobotModel.from_params(block),
                                       id=f'{convention}-{n}-loaded'))
        bare = random_chain_params(rng, 7, convention, [0, 1, 0, 0, 1, 0, 0])
        params.append(pytest.param(RobotModel.from_params(bare), id=f'{convention}-7-rigid'))
    return params


def _urdf_models():
    """General placements R0 (not Rx(α)): the URDF fixtures and a 40-link random chain
    exported to URDF and read back, with a payload."""
    params = []
    for name, tip in (('skewed_arm', 'tool'), ('ur5', 'tool0')):
        with open(os.path.join(REPO, 'test', 'data', name + '.urdf'), encoding='utf-8') as f:
            params.append(pytest.param(model_from_urdf(f.read(), tip_link=tip), id=name))
    rng = np.random.default_rng(62)
    block = random_chain_params(rng, 40, 'modified', rng.random(40) < 0.3)
    model = model_from_urdf(model_to_urdf(RobotModel.from_params(block)))
    params.append(pytest.param(model.with_payload(1.5, (0.02, 0.0, 0.05)), id='urdf-40-loaded'))
    return params


MODELS = _presets() + _random_models() + _urdf_models()


def reference(function, *args, **kwargs):
    previous = dynamics.get_backend()
    dynamics.set_backend('reference')
    try:
        return function(*args, **kwargs)
    finally:
        dynamics.set_backend(previous)


def assert_same(fast, expected):
    assert fast is not None
    fast, expected = np.asarray(fast), np.asarray(expected)
    assert fast.shape == expected.shape
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(fast, expected, rtol=RTOL, atol=RTOL * scale)


@pytest.mark.parametrize('model', MODELS)
def test_one_state_matches_reference(loops, model, rng):
    q, qd, qdd = random_state(rng, model.n)
    tau = rng.normal(scale=5.0, size=model.n)
    wrench = rng.normal(size=6)
    assert_same(loops.inverse_dynamics_one(model, q, qd, qdd),
                reference(dynamics.inverse_dynamics, model, q, qd, qdd))
    assert_same(loops.inverse_dynamics_one(model, q, qd, qdd, wrench),
                reference(dynamics.inverse_dynamics, model, q, qd, qdd, wrench=wrench))
    assert_same(loops.bias_forces_one(model, q, qd),
                reference(dynamics.bias_forces, model, q, qd))
    assert_same(loops.gravity_torques_one(model, q),
                reference(dynamics.gravity_torques, model, q))
    assert_same(loops.forward_dynamics_one(model, q, qd, tau),
                reference(dynamics.forward_dynamics, model, q, qd, tau))
    assert_same(loops.forward_dynamics_one(model, q, qd, tau, wrench),
                reference(dynamics.forward_dynamics, model, q, qd, tau, wrench=wrench))


@pytest.mark.parametrize('model', MODELS)
def test_batch_matches_reference(loops, model, rng):
    size = 4
    q, qd, qdd = random_state(rng, model.n, size)
    tau = rng.normal(scale=5.0, size=(size, model.n))
    wrenches = rng.normal(size=(size, 6))
    for wrench in (None, wrenches[0], wrenches):
        assert_same(loops.inverse_dynamics_batch(model, q, qd, qdd, wrench),
                    reference(dynamics.inverse_dynamics, model, q, qd, qdd, wrench=wrench))
        assert_same(loops.forward_dynamics_batch(model, q, qd, tau, wrench),
                    reference(dynamics.forward_dynamics, model, q, qd, tau, wrench=wrench))
    assert_same(loops.bias_forces_batch(model, q, qd),
                reference(dynamics.bias_forces, model, q, qd))
    assert_same(loops.gravity_torques_batch(model, q),
                reference(dynamics.gravity_torques, model, q))


def _closed_form_friction(block, qd):
    """Each joint's law written out from its definition (doc/ of the model's friction
    laws), independently of the code under test."""
    tau = np.array(block['viscous_friction']) * qd
    for i, law in enumerate(block['friction_model']):
        v, fc = qd[..., i], block['coulomb_friction'][i]
        vs = block['stribeck_velocity'][i]
        if law == 'coulomb':
            tau[..., i] += fc * np.sign(v)
        elif law == 'asymmetric':
            tau[..., i] += np.where(v > 0, fc, 0.0) - np.where(
                v < 0, block['coulomb_friction_negative'][i], 0.0)
        elif law == 'tanh':
            tau[..., i] += fc * np.tanh(v / vs)
        else:
            tau[..., i] += (fc + block['stribeck_friction'][i] * np.exp(-(v / vs) ** 2)) \
                * np.sign(v)
    return tau


def _law_models(rng, laws):
    """(model with the friction laws `laws` per joint, the same model without friction,
    its parameter block); levels chosen so that the laws differ."""
    n = len(laws)
    block = random_chain_params(rng, n, 'modified', rng.random(n) < 0.3, friction=True,
                                armature=True, payload=True)
    rigid = RobotModel.from_params({k: v for k, v in block.items()
                                    if k not in ('viscous_friction', 'coulomb_friction')})
    block.update(friction_model=list(laws),
                 coulomb_friction_negative=rng.uniform(0.2, 1.5, n).tolist(),
                 stribeck_friction=rng.uniform(0.1, 1.0, n).tolist(),
                 stribeck_velocity=rng.uniform(0.02, 0.2, n).tolist())
    return RobotModel.from_params(block), rigid, block


LAW_SETS = [['coulomb'] * 6, ['asymmetric'] * 6, ['tanh'] * 6, ['stribeck'] * 6,
            ['coulomb', 'asymmetric', 'tanh', 'stribeck', 'tanh', 'coulomb']]


@pytest.mark.parametrize('laws', LAW_SETS, ids=['coulomb', 'asymmetric', 'tanh', 'stribeck',
                                                  'mixed'])
def test_every_friction_law_gives_the_reference_torques(loops, laws, rng):
    """Each friction law (and a mix, one per joint) through the numba kernels, one state
    and batches, directly and through the public functions on the numba backend: the
    reference backend's efforts and accelerations, and friction that is the law's closed
    form (velocities around the law's velocity scale, exact zeros included)."""
    model, rigid, block = _law_models(rng, laws)
    n, size = model.n, 5
    q, _, qdd = random_state(rng, n, size)
    vs = np.array(block['stribeck_velocity'])
    qd = rng.uniform(-4.0, 4.0, (size, n)) * vs
    qd[0, ::2] = 0.0
    tau = rng.normal(scale=5.0, size=(size, n))
    expected = reference(dynamics.inverse_dynamics, model, q, qd, qdd)
    friction = _closed_form_friction(block, qd)
    assert np.ptp(friction - _closed_form_friction(dict(block, friction_model=['coulomb'] * n),
                                                   qd)) > 0.01 or laws[0] == 'coulomb'
    assert_same(loops.inverse_dynamics_batch(model, q, qd, qdd), expected)
    assert_same(loops.inverse_dynamics_batch(model, q, qd, qdd)
                - loops.inverse_dynamics_batch(rigid, q, qd, qdd), friction)
    assert_same(loops.forward_dynamics_batch(model, q, qd, tau),
                reference(dynamics.forward_dynamics, model, q, qd, tau))
    assert_same(loops.bias_forces_batch(model, q, qd),
                reference(dynamics.bias_forces, model, q, qd))
    previous = dynamics.get_backend()
    dynamics.set_backend('numba')
    try:
        for k in range(size):
            assert_same(dynamics.inverse_dynamics(model, q[k], qd[k], qdd[k]), expected[k])
            assert_same(loops.inverse_dynamics_one(model, q[k], qd[k], qdd[k]), expected[k])
            assert_same(dynamics.forward_dynamics(model, q[k], qd[k], tau[k]),
                        reference(dynamics.forward_dynamics, model, q[k], qd[k], tau[k]))
            assert_same(dynamics.bias_forces(model, q[k], qd[k]),
                        reference(dynamics.bias_forces, model, q[k], qd[k]))
            assert_same(dynamics.forward_dynamics(model, q[k], qd[k], expected[k]), qdd[k])
        assert_same(dynamics.inverse_dynamics(model, q, qd, qdd), expected)
    finally:
        dynamics.set_backend(previous)


def test_one_state_runner_copies_other_inputs_and_leaves_batches(loops, rng):
    """The per-model one-state runner (dynamics' fast path): float64 arrays, lists and
    float32 arrays give the reference; a batch (or a wrench with a batch) gives None (the
    caller then takes its batch path)."""
    model, _, _ = _law_models(rng, ['tanh', 'coulomb', 'stribeck', 'asymmetric'])
    q, qd, qdd = random_state(rng, 4, 3)
    wrench = rng.normal(size=6)
    run, run_wrench = loops.runner(model, 'rnea'), loops.runner(model, 'rnea_wrench')
    for k in range(3):
        expected = reference(dynamics.inverse_dynamics, model, q[k], qd[k], qdd[k])
        assert_same(run(q[k], qd[k], qdd[k]), expected)
        assert_same(run(q[k].tolist(), qd[k].tolist(), qdd[k].tolist()), expected)
        assert_same(run(q[k].astype(np.float32), qd[k], qdd[k]),
                    reference(dynamics.inverse_dynamics, model,
                              q[k].astype(np.float32).astype(float), qd[k], qdd[k]))
        assert_same(run_wrench(q[k], qd[k], qdd[k], wrench),
                    reference(dynamics.inverse_dynamics, model, q[k], qd[k], qdd[k],
                              wrench=wrench))
    assert run(q, qd, qdd) is None
    assert run_wrench(q, qd, qdd, wrench) is None
    assert loops.runner(model, 'aba')(q, qd, qdd) is None


def test_forward_dynamics_inverts_inverse_dynamics_at_100_links(loops, rng):
    block = random_chain_params(rng, 100, 'modified', rng.random(100) < 0.5, friction=True,
                                armature=True, payload=True)
    model = RobotModel.from_params(block)
    q, qd, qdd = random_state(rng, 100, 3)
    wrench = rng.normal(size=(3, 6))
    tau = loops.inverse_dynamics_batch(model, q, qd, qdd, wrench)
    np.testing.assert_allclose(loops.forward_dynamics_batch(model, q, qd, tau, wrench), qdd,
                               rtol=1e-8, atol=1e-8)


def test_general_placements_take_the_general_rotation(rng):
    """The URDF models above exercise the 9-multiplication rotations, DH models the
    Rx(α) ones (column 13 of the packed model flags them)."""
    flags = [_numba_loops.pack(p.values[0])[:-1, 13] for p in _urdf_models()]
    assert not flags[0].any() and not flags[2].any()
    assert all(_numba_loops.pack(p.values[0])[:-1, 13].all() for p in _random_models())


def test_payload_change_is_packed_from_the_new_model(loops, rng):
    model = RobotModel.from_params(random_chain_params(rng, 6, 'standard', [0, 0, 1, 0, 0, 0]))
    q, qd, qdd = random_state(rng, 6)
    bare = loops.inverse_dynamics_one(model, q, qd, qdd)
    loaded = model.with_payload(mass=2.5, com=(0.05, -0.02, 0.1),
                                inertia=[0.02, 0.001, 0.0, 0.03, 0.002, 0.025])
    heavy = loops.inverse_dynamics_one(loaded, q, qd, qdd)
    assert not np.allclose(heavy, bare, rtol=1e-6)
    assert_same(heavy, reference(dynamics.inverse_dynamics, loaded, q, qd, qdd))
    assert_same(loops.forward_dynamics_one(loaded, q, qd, heavy), qdd)
    assert_same(loops.inverse_dynamics_one(model, q, qd, qdd), bare)    # base unchanged


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
def test_non_finite_input_returns_none(loops, bad, rng):
    model = RobotModel.from_params(random_chain_params(rng, 5, 'modified', [0, 1, 0, 0, 1],
                                                       friction=True, armature=True))
    q, qd, qdd = random_state(rng, 5)
    for k in range(3):
        states = [q.copy(), qd.copy(), qdd.copy()]
        states[k][k + 1] = bad
        assert loops.inverse_dynamics_one(model, *states) is None
        assert loops.forward_dynamics_one(model, *states) is None
        assert loops.bias_forces_one(model, *states[:2]) is None or k == 2
        batch = [np.repeat(s[None], 3, axis=0) for s in (q, qd, qdd)]
        batch[k][1] = states[k]                                 # one bad sample
        assert loops.inverse_dynamics_batch(model, *batch) is None
        assert loops.forward_dynamics_batch(model, *batch) is None
    wrench = np.array([0.0, 1.0, bad, 0.0, 0.0, 0.0])
    assert loops.inverse_dynamics_one(model, q, qd, qdd, wrench) is None
    assert loops.forward_dynamics_one(model, q, qd, qdd, wrench) is None
    bad_q = q.copy()
    bad_q[0] = bad
    assert loops.gravity_torques_one(model, bad_q) is None


def test_singular_articulated_inertia_returns_none(loops, rng):
    """A massless, inertia-free last link on a revolute joint without armature: its
    articulated inertia about the joint axis is zero (the reference divides by zero)."""
    block = random_chain_params(rng, 3, 'standard')
    block['mass'][2] = 0.0
    block['inertia'][12:18] = [0.0] * 6
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        model = RobotModel.from_params(block)
    q, qd, tau = random_state(rng, 3)
    assert loops.forward_dynamics_one(model, q, qd, tau) is None
    assert loops.forward_dynamics_batch(model, q[None], qd[None], tau[None]) is None
    assert loops.inverse_dynamics_one(model, q, qd, tau) is not None      # ID is fine


def test_other_layouts_and_dtypes_are_copied(loops, rng):
    model = RobotModel.from_params(random_chain_params(rng, 4, 'modified', [1, 0, 0, 0],
                                                       friction=True))
    q, qd, qdd = random_state(rng, 4)
    expected = reference(dynamics.inverse_dynamics, model, q, qd, qdd)
    strided = np.repeat(q, 2)[::2]
    read_only = qd.copy()
    read_only.setflags(write=False)
    assert_same(loops.inverse_dynamics_one(model, strided, read_only, qdd.tolist()), expected)
    single = loops.inverse_dynamics_one(model, q.astype(np.float32), qd, qdd)
    expected32 = reference(dynamics.inverse_dynamics, model, q.astype(np.float32).astype(float),
                           qd, qdd)
    assert_same(single, expected32)
    Q, QD, QDD = random_state(rng, 4, 3)
    assert_same(loops.inverse_dynamics_batch(model, np.asfortranarray(Q), QD, QDD),
                reference(dynamics.inverse_dynamics, model, Q, QD, QDD))


def test_wrong_shapes_return_none(loops, rng):
    model = RobotModel.from_params(random_chain_params(rng, 4, 'standard'))
    q, qd, qdd = random_state(rng, 4)
    Q, QD, QDD = random_state(rng, 4, 3)
    assert loops.inverse_dynamics_one(model, q[:3], qd[:3], qdd[:3]) is None
    assert loops.inverse_dynamics_one(model, Q, qd, qdd) is None
    assert loops.inverse_dynamics_one(model, q, qd, qdd, np.zeros(5)) is None
    assert loops.forward_dynamics_one(model, q, qd, np.zeros(5)) is None
    assert loops.gravity_torques_one(model, np.zeros(5)) is None
    assert loops.inverse_dynamics_batch(model, Q, QD[:2], QDD) is None
    assert loops.inverse_dynamics_batch(model, Q, QD, QDD, np.zeros((2, 6))) is None
    assert loops.forward_dynamics_batch(model, q, qd, qdd) is None


def test_without_numba_every_call_returns_none(monkeypatch, rng):
    monkeypatch.setattr(_numba_loops, 'numba', None)
    monkeypatch.setattr(_numba_loops, '_compiled', {})
    monkeypatch.setattr(_numba_loops, '_modules', {})
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard'))
    q, qd, qdd = random_state(rng, 3)
    assert not _numba_loops.available()
    assert not _numba_loops.compile_kernels()
    assert _numba_loops.inverse_dynamics_one(model, q, qd, qdd) is None
    assert _numba_loops.forward_dynamics_batch(model, q[None], qd[None], qdd[None]) is None


def test_plain_python_kernels_match_reference(rng):
    """The kernels' source also runs as plain Python (no numba needed): same answers."""
    model = RobotModel.from_params(random_chain_params(rng, 5, 'modified', [0, 1, 0, 1, 0],
                                                       friction=True, armature=True,
                                                       payload=True))
    P = _numba_loops.pack(model)
    q, qd, qdd = random_state(rng, 5)
    wrench = rng.normal(size=6)
    out = np.empty(5)
    assert _numba_loops.rnea_wrench_one(P, q, qd, qdd, wrench, out)
    assert_same(out, reference(dynamics.inverse_dynamics, model, q, qd, qdd, wrench=wrench))
    assert _numba_loops.aba_wrench_one(P, q, qd, qdd, wrench, out)
    assert_same(out, reference(dynamics.forward_dynamics, model, q, qd, qdd, wrench=wrench))


_PROBE = """
import numpy as np
from robot_dynamics.dynamics import _numba_loops
from robot_dynamics.model import RobotModel
model = RobotModel.from_params({params!r})
print(_numba_loops.gravity_torques_one(model, np.array({q!r})).tolist())
"""


def _probe(cache, params, q):
    env = dict(os.environ, ROBOT_DYNAMICS_CACHE=str(cache), PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, '-c', _PROBE.format(params=params, q=q)], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    return np.array(eval(out.stdout.strip().splitlines()[-1]))     # noqa: S307 - a list


def test_cache_outside_the_install_space_and_from_memory_if_not_writable(tmp_path, rng):
    pytest.importorskip('numba')
    params = random_chain_params(rng, 3, 'standard', [0, 1, 0])
    q = rng.uniform(-1.0, 1.0, 3).tolist()
    expected = reference(dynamics.gravity_torques, RobotModel.from_params(params), np.array(q))
    package = os.path.join(REPO, 'robot_dynamics')
    before = set(os.listdir(package)) | set(_listdir(os.path.join(package, '__pycache__')))
    assert_same(_probe(tmp_path / 'cache', params, q), expected)
    written = os.listdir(tmp_path / 'cache')
    assert any(name.startswith('_robot_dynamics_loops_') for name in written)
    assert any(name.endswith('.nbi') for name in os.listdir(tmp_path / 'cache' / '__pycache__'))
    after = set(os.listdir(package)) | set(_listdir(os.path.join(package, '__pycache__')))
    assert not [name for name in after - before if 'nbi' in name or 'nbc' in name]
    blocker = tmp_path / 'a_file'
    blocker.write_text('not a directory')
    assert_same(_probe(blocker / 'cache', params, q), expected)


def _listdir(path):
    return os.listdir(path) if os.path.isdir(path) else []


@pytest.mark.parametrize('model', MODELS)
def test_rk4_step_matches_reference(loops, model, rng):
    from robot_dynamics.simulation import integration
    q, qd, _ = random_state(rng, model.n)
    tau = rng.normal(scale=5.0, size=model.n)
    fast = loops.rk4_step_one(model, q, qd, tau, 1e-3)
    expected = reference(integration.rk4_step, model, q, qd, tau, 1e-3)
    assert fast is not None
    for a, b in zip(fast, expected):
        assert_same(a, b)
    bad = q.copy()
    bad[-1] = np.nan
    assert loops.rk4_step_one(model, bad, qd, tau, 1e-3) is None


def test_kernel_source_is_exactly_the_kernel_functions():
    """The source compiled by numba (the kernel section of the module file) defines the
    functions `_KERNELS` lists, in order, and nothing else that could shadow them."""
    import ast
    tree = ast.parse(_numba_loops.kernel_source())
    names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert names == [fn.__name__ for fn in _numba_loops._KERNELS]
    assert set(_numba_loops.ENTRIES) <= set(names)
