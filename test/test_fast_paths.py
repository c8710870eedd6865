"""The generated fast path (robot_dynamics.codegen) behind the public dynamics functions
gives the reference algorithms' results to 1e-9 relative, on every preset in config/ and on
random chains, keeps their shapes, errors and non-finite behaviour, and is compiled lazily
and cached per model instance."""

import ast
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import (REPO, assert_same, both, preset_paths, random_chain_params, random_state,
                      with_backend)

from robot_dynamics.dynamics import codegen
from robot_dynamics import dynamics
from robot_dynamics.simulation import integration
from robot_dynamics.model import ModelWarning, RobotModel


def _preset_models():
    models = []
    for path in preset_paths():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', ModelWarning)
                model = RobotModel.from_yaml(path)
        except ValueError:          # a node-only parameter file without a robot block
            continue
        models.append(pytest.param(model, id=os.path.basename(path)))
    return models


MASKS = {'RRRRRR': [0, 0, 0, 0, 0, 0], 'PRRPRP': [1, 0, 0, 1, 0, 1], 'RPR': [0, 1, 0]}


def _random_models():
    rng = np.random.default_rng(6)
    params = []
    for convention in ('standard', 'modified'):
        for label, mask in MASKS.items():
            block = random_chain_params(rng, len(mask), convention, mask, friction=True,
                                        armature=True, payload=True)
            params.append(pytest.param(RobotModel.from_params(block),
                                       id=f'{convention}-{label}'))
        bare = random_chain_params(rng, 5, convention, [0, 1, 0, 0, 1])   # no armature:
        params.append(pytest.param(RobotModel.from_params(bare),          # exact-zero ABA
                                   id=f'{convention}-RPRRP-rigid'))
    return params


MODELS = _preset_models() + _random_models()


@pytest.mark.parametrize('model', MODELS)
@pytest.mark.parametrize('size', [None, 5])
def test_generated_inverse_dynamics_matches_reference(model, size, rng):
    q, qd, qdd = random_state(rng, model.n, size)
    assert_same(*both(dynamics.inverse_dynamics, model, q, qd, qdd))
    wrench = rng.normal(size=(6,) if size is None else (size, 6))
    assert_same(*both(dynamics.inverse_dynamics, model, q, qd, qdd, wrench=wrench))


@pytest.mark.parametrize('model', MODELS)
@pytest.mark.parametrize('size', [None, 5])
def test_generated_bias_and_gravity_match_reference(model, size, rng):
    q, qd, _ = random_state(rng, model.n, size)
    assert_same(*both(dynamics.bias_forces, model, q, qd))
    assert_same(*both(dynamics.gravity_torques, model, q))


@pytest.mark.parametrize('model', MODELS)
def test_one_state_mass_matrix_matches_the_reference_columns(model, rng):
    """One state: composite rigid bodies on floats; the reference backend (and a batch):
    one Newton–Euler pass per column."""
    q = random_state(rng, model.n)[0]
    fast, reference = both(dynamics.mass_matrix, model, q)
    assert_same(fast, reference)
    assert_same(fast, dynamics.mass_matrix(model, q[None])[0])
    np.testing.assert_array_equal(dynamics.mass_matrix(model, q.tolist()), fast)
    with np.errstate(invalid='ignore'):
        for bad in (np.nan, np.inf):
            assert np.isnan(dynamics.mass_matrix(model, np.full(model.n, bad))).any()


@pytest.mark.parametrize('model', MODELS)
@pytest.mark.parametrize('size', [None, 5])
def test_generated_forward_dynamics_matches_reference(model, size, rng):
    q, qd, _ = random_state(rng, model.n, size)
    tau = rng.normal(scale=5.0, size=q.shape)
    assert_same(*both(dynamics.forward_dynamics, model, q, qd, tau))
    wrench = rng.normal(size=(6,))
    assert_same(*both(dynamics.forward_dynamics, model, q, qd, tau, wrench=wrench))


@pytest.mark.parametrize('model', MODELS)
def test_fused_rk4_step_matches_reference_step(model, rng):
    q, qd, _ = random_state(rng, model.n)
    tau = rng.normal(scale=5.0, size=model.n)
    fast, reference = both(integration.rk4_step, model, q, qd, tau, 1e-3)
    for a, b in zip(fast, reference):
        assert_same(a, b)


def test_fast_path_inverts_itself_on_a_batch(rng):
    """FD(ID(q̈)) = q̈ with both directions on the generated array kernels."""
    model = RobotModel.from_params(random_chain_params(rng, 7, 'modified', [0, 1] * 3 + [0],
                                                       friction=True, armature=True))
    q, qd, qdd = random_state(rng, 7, 50)
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    np.testing.assert_allclose(dynamics.forward_dynamics(model, q, qd, tau), qdd,
                               rtol=1e-9, atol=1e-9)


def test_single_state_as_list_tuple_or_ints_gives_the_array_result(rng):
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard'))
    q, qd, qdd = random_state(rng, 3)
    expected = dynamics.inverse_dynamics(model, q, qd, qdd)
    assert_same(dynamics.inverse_dynamics(model, q.tolist(), tuple(qd), list(qdd)), expected)
    ints = dynamics.inverse_dynamics(model, [1, 0, -1], [0, 0, 0], [0, 0, 0])
    assert_same(ints, with_backend('reference', dynamics.inverse_dynamics, model,
                                   [1.0, 0.0, -1.0], [0.0] * 3, [0.0] * 3))
    one_row = dynamics.inverse_dynamics(model, q[None], qd[None], qdd[None])
    assert one_row.shape == (1, 3)
    assert_same(one_row[0], expected)


def test_shape_errors_are_unchanged_on_the_generated_backend(rng):
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard'))
    with pytest.raises(ValueError, match='qd: expected shape'):
        dynamics.inverse_dynamics(model, np.zeros(3), np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match='wrench: expected shape'):
        dynamics.forward_dynamics(model, np.zeros(3), np.zeros(3), np.zeros(3),
                                  wrench=np.zeros(5))
    with pytest.raises(ValueError, match='batch sizes differ'):
        dynamics.inverse_dynamics(model, np.zeros((2, 3)), np.zeros((3, 3)), np.zeros(3))


@pytest.mark.parametrize('function', [dynamics.inverse_dynamics, dynamics.forward_dynamics])
@pytest.mark.parametrize('position', [0, 1, 2])
@pytest.mark.parametrize('length', [2, 4])
def test_a_float_array_of_the_wrong_length_gets_the_shape_error(rng, function, position, length):
    """The one-state fast path checks only dtype and ndim and leaves the length to the
    kernel's unpacking; a shorter or longer float64 array must still get the named error."""
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard'))
    args = [np.zeros(3), np.zeros(3), np.zeros(3)]
    args[position] = np.ones(length)
    name = ['q', 'qd', 'qdd' if function is dynamics.inverse_dynamics else 'tau'][position]
    with pytest.raises(ValueError, match=f'{name}: expected shape'):
        function(model, *args)


@pytest.mark.parametrize('bad', [math.nan, math.inf])
def test_non_finite_inputs_give_the_reference_result(bad, rng):
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard', friction=True))
    q, qd, qdd = random_state(rng, 3)
    qd[1] = bad
    with np.errstate(all='ignore'):
        fast, reference = both(dynamics.inverse_dynamics, model, q, qd, qdd)
        np.testing.assert_array_equal(np.isnan(fast), np.isnan(reference))
        fast, reference = both(dynamics.forward_dynamics, model, q, qd, qdd)
        np.testing.assert_array_equal(np.isnan(fast), np.isnan(reference))


def test_singular_inertia_falls_back_to_the_reference_result():
    """A massless, inertia-free last link without armature has D = 0 in the ABA: the
    generated float code would divide by zero; the public function answers as the
    reference does (non-finite), without raising."""
    block = {'dh_convention': 'modified', 'joint_types': ['revolute', 'revolute'],
             'a': [0.0, 0.5], 'alpha': [0.0, 0.0], 'd': [0.0, 0.0], 'theta': [0.0, 0.0],
             'mass': [1.0, 0.0], 'com': [0.2, 0.0, 0.0, 0.0, 0.0, 0.0],
             'inertia': [0.1, 0.0, 0.0, 0.1, 0.0, 0.1] + [0.0] * 6}
    model = RobotModel.from_params(block)
    with np.errstate(all='ignore'):
        fast, reference = both(dynamics.forward_dynamics, model, [0.1, 0.2], [0.0, 0.0],
                               [1.0, 1.0])
    np.testing.assert_array_equal(np.isfinite(fast), np.isfinite(reference))
    assert not np.all(np.isfinite(fast))


def test_kernels_are_compiled_lazily_and_cached_on_the_model(rng):
    model = RobotModel.from_params(random_chain_params(rng, 4, 'standard'))
    assert '_kernels' not in model.__dict__
    q, qd, qdd = random_state(rng, 4)
    dynamics.inverse_dynamics(model, q, qd, qdd)
    first = codegen.kernel(model, 'rnea')
    dynamics.inverse_dynamics(model, q, qd, qdd)
    assert codegen.kernel(model, 'rnea') is first
    heavier = model.with_payload(mass=2.0)
    assert '_kernels' not in heavier.__dict__
    assert not np.allclose(dynamics.gravity_torques(heavier, q),
                           dynamics.gravity_torques(model, q))


# ---------------------------------------------------------------- payload as a runtime input

PAYLOAD = dict(mass=1.7, com=(0.03, -0.02, 0.08),
               inertia=[0.004, 0.0003, -0.0002, 0.005, 0.0001, 0.003])


def _all_results(model, rng):
    """Every public function with a generated path, one state and a batch, per backend."""
    q, qd, qdd = random_state(rng, model.n)
    Q, QD, QDD = random_state(rng, model.n, 4)
    wrench = rng.normal(size=6)
    calls = [(dynamics.inverse_dynamics, (model, q, qd, qdd)),
             (dynamics.inverse_dynamics, (model, Q, QD, QDD)),
             (dynamics.bias_forces, (model, q, qd)), (dynamics.gravity_torques, (model, Q)),
             (dynamics.forward_dynamics, (model, q, qd, qdd)),
             (dynamics.forward_dynamics, (model, Q, QD, QDD)),
             (dynamics.mass_matrix, (model, q))]
    out = [both(f, *args) for f, args in calls]
    out.append(both(dynamics.inverse_dynamics, model, q, qd, qdd, wrench=wrench))
    out.append(both(dynamics.forward_dynamics, model, q, qd, qdd, wrench=wrench))
    out += list(zip(*both(integration.rk4_step, model, q, qd, qdd, 1e-3)))
    return out


def _no_generation(monkeypatch):
    def refuse(*args):
        raise AssertionError('code was generated again')
    monkeypatch.setattr(codegen, 'source', refuse)
    monkeypatch.setattr(codegen, 'compile', refuse, raising=False)


def _warm(model, rng):
    for _ in _all_results(model, rng):
        pass


def _urdf_model():
    from robot_dynamics.model.urdf import model_from_urdf
    with open(os.path.join(REPO, 'test', 'data', 'ur5.urdf'), encoding='utf-8') as stream:
        return model_from_urdf(stream.read(), tip_link='tool0')


PAYLOAD_MODELS = [
    pytest.param(lambda rng: RobotModel.from_params(random_chain_params(
        rng, 6, 'standard', [0, 0, 1, 0, 0, 0], friction=True, armature=True)), id='dh'),
    pytest.param(lambda rng: RobotModel.from_params(random_chain_params(
        rng, 4, 'modified', [0, 1, 0, 0])), id='dh-rigid'),
    pytest.param(lambda rng: _urdf_model(), id='urdf-ur5')]


@pytest.mark.parametrize('build', PAYLOAD_MODELS)
def test_payload_change_reuses_the_compiled_kernels_and_gives_the_reference_result(
        build, rng, monkeypatch):
    model = build(rng)
    _warm(model, rng)
    names = [key for key in model.__dict__['_kernels'] if isinstance(key, tuple)]
    _no_generation(monkeypatch)
    loaded = model.with_payload(**PAYLOAD)
    for fast, reference in _all_results(loaded, rng):
        assert_same(fast, reference)
    assert loaded.__dict__['_kernel_code'] is model.__dict__['_kernel_code']
    for key in names:
        assert loaded.__dict__['_kernels'][key].__code__ is \
            model.__dict__['_kernels'][key].__code__
    again = loaded.with_payload()                      # and back to no payload
    for fast, reference in _all_results(again, rng):
        assert_same(fast, reference)


def test_payload_on_a_massless_last_link_reuses_the_kernels_and_gives_the_reference(
        rng, monkeypatch):
    """A last link without mass, inertia or armature: its ABA pivot is zero at run time
    (the fast path answers as the reference does, non-finite, without warnings); a payload
    makes it a regular body with the same compiled code."""
    block = random_chain_params(rng, 3, 'modified')
    block['mass'][-1] = 0.0
    block['com'][-3:] = [0.0, 0.0, 0.0]
    block['inertia'][-6:] = [0.0] * 6
    model = RobotModel.from_params(block)
    q, qd, tau = random_state(rng, 3)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with np.errstate(all='ignore'):
            for size in (None, 3):
                args = random_state(rng, 3, size)
                fast, reference = both(dynamics.forward_dynamics, model, *args)
                np.testing.assert_array_equal(np.isfinite(fast), np.isfinite(reference))
                assert not np.all(np.isfinite(fast))
    with warnings.catch_warnings(), np.errstate(all='ignore'):
        warnings.simplefilter('ignore')                # the reference path's 1/0
        _warm(model, rng)                              # every kernel, compiled massless
    _no_generation(monkeypatch)
    heavier = model.with_payload(**PAYLOAD)
    for fast, reference in _all_results(heavier, rng):
        assert_same(fast, reference)
    assert np.all(np.isfinite(dynamics.forward_dynamics(heavier, q, qd, tau)))


def test_payload_change_costs_no_compilation_of_a_new_model(rng):
    """The derived model shares its parent's code cache even if nothing was compiled yet."""
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard'))
    loaded = model.with_payload(**PAYLOAD)
    q, qd, qdd = random_state(rng, 3)
    dynamics.inverse_dynamics(loaded, q, qd, qdd)
    assert ('rnea', 'scalar') in model.__dict__['_kernel_code']


def test_model_with_compiled_kernels_pickles_and_recompiles(rng):
    import pickle
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard')).with_payload(1.0)
    q, qd, qdd = random_state(rng, 3)
    expected = dynamics.inverse_dynamics(model, q, qd, qdd)
    copy = pickle.loads(pickle.dumps(model))
    assert '_kernel_code' not in copy.__dict__
    assert_same(dynamics.inverse_dynamics(copy, q, qd, qdd), expected)


def test_numba_payload_change_compiles_nothing_and_uses_the_new_payload(
        monkeypatch, tmp_path, rng):
    pytest.importorskip('numba')
    from robot_dynamics.dynamics import _numba_loops
    monkeypatch.setenv('ROBOT_DYNAMICS_CACHE', str(tmp_path))
    model = _two_link()
    q, qd, qdd = random_state(rng, 2)
    Q, QD, QDD = random_state(rng, 2, 3)
    with_backend('numba', dynamics.inverse_dynamics, model, q, qd, qdd)
    with_backend('numba', dynamics.forward_dynamics, model, Q, QD, QDD)
    with_backend('numba', integration.rk4_step, model, q, qd, qdd, 1e-3)
    compiled = dict(_numba_loops._compiled)
    _no_generation(monkeypatch)
    loaded = model.with_payload(**PAYLOAD)
    calls = [(dynamics.inverse_dynamics, (loaded, q, qd, qdd)),
             (dynamics.forward_dynamics, (loaded, Q, QD, QDD))]
    for function, args in calls:
        assert_same(with_backend('numba', function, *args),
                    with_backend('reference', function, *args))
    for a, b in zip(with_backend('numba', integration.rk4_step, loaded, q, qd, qdd, 1e-3),
                    with_backend('reference', integration.rk4_step, loaded, q, qd, qdd, 1e-3)):
        assert_same(a, b)
    assert _numba_loops._compiled == compiled              # nothing new compiled
    assert not np.allclose(with_backend('numba', dynamics.inverse_dynamics, loaded, q, qd, qdd),
                           with_backend('numba', dynamics.inverse_dynamics, model, q, qd, qdd))


@pytest.mark.parametrize('name', codegen.KERNELS)
def test_generated_source_is_inspectable_python_defining_the_kernel(name, rng):
    model = RobotModel.from_params(random_chain_params(rng, 3, 'modified', [0, 1, 0]))
    text = codegen.source(model, name)
    assert text.startswith(f'def {name}(')
    namespace = {'aba': None, 'sin': math.sin, 'cos': math.cos, 'sign': np.sign}
    exec(compile(text, name, 'exec'), namespace)
    assert callable(namespace[name])


def test_unknown_backend_or_kernel_is_refused():
    with pytest.raises(ValueError, match='backend'):
        dynamics.set_backend('fortran')
    assert dynamics.get_backend() in dynamics.BACKENDS + dynamics.OPTIONAL_BACKENDS
    with pytest.raises(ValueError, match='kernel'):
        codegen.source(RobotModel.from_params(random_chain_params(
            np.random.default_rng(0), 2, 'standard')), 'crba')


def test_environment_variable_selects_the_reference_backend():
    code = 'from robot_dynamics import dynamics; print(dynamics.get_backend())'
    env = dict(os.environ, ROBOT_DYNAMICS_BACKEND='reference', PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == 'reference'


# ---------------------------------------------------------------- optional accelerator

def _two_link():
    return RobotModel.from_params(random_chain_params(np.random.default_rng(2), 2, 'standard',
                                                      [0, 1], friction=True))


def test_numba_requested_without_numba_warns_and_stays_generated(monkeypatch, rng):
    from robot_dynamics.dynamics import _fast_numba
    monkeypatch.setattr(_fast_numba, 'numba', None)
    previous = dynamics.get_backend()
    try:
        with pytest.warns(RuntimeWarning, match='numba'):
            dynamics.set_backend('numba')
        assert dynamics.get_backend() == 'generated'
    finally:
        dynamics.set_backend(previous)
    model = _two_link()
    q, qd, qdd = random_state(rng, 2)
    assert_same(*both(dynamics.inverse_dynamics, model, q, qd, qdd))


def test_numba_backend_matches_reference(monkeypatch, tmp_path, rng):
    pytest.importorskip('numba')
    monkeypatch.setenv('ROBOT_DYNAMICS_CACHE', str(tmp_path))
    model = _two_link()
    q, qd, qdd = random_state(rng, 2)
    Q, QD, QDD = random_state(rng, 2, 4)
    calls = [(dynamics.inverse_dynamics, (model, q, qd, qdd)),
             (dynamics.inverse_dynamics, (model, Q, QD, QDD)),
             (dynamics.forward_dynamics, (model, q, qd, qdd)),
             (integration.rk4_step, (model, q, qd, qdd, 1e-3))]
    for function, args in calls:
        fast = with_backend('numba', function, *args)
        reference = with_backend('reference', function, *args)
        for a, b in zip(np.atleast_1d(fast) if function is not integration.rk4_step else fast,
                        np.atleast_1d(reference) if function is not integration.rk4_step
                        else reference):
            assert_same(a, b)


def test_environment_variable_selects_the_numba_backend(tmp_path):
    """ROBOT_DYNAMICS_BACKEND=numba, as the nodes are started with it: the module imports
    with the backend selected, and its kernels agree with the reference."""
    pytest.importorskip('numba')
    code = ('import numpy as np\n'
            'from robot_dynamics import dynamics\n'
            'from robot_dynamics.model import RobotModel\n'
            f'model = RobotModel.from_yaml({os.path.join(REPO, "config", "puma560.yaml")!r})\n'
            'q, qd, qdd = np.full(6, 0.3), np.full(6, -0.2), np.full(6, 0.5)\n'
            'fast = dynamics.inverse_dynamics(model, q, qd, qdd)\n'
            'accelerated = dynamics.kinematics._accelerated is not None\n'
            'dynamics.set_backend("reference")\n'
            'slow = dynamics.inverse_dynamics(model, q, qd, qdd)\n'
            'print(accelerated, float(np.max(np.abs(fast - slow))))\n'
            'dynamics.set_backend("numba"); print(dynamics.get_backend())\n')
    env = dict(os.environ, ROBOT_DYNAMICS_BACKEND='numba', PYTHONPATH=REPO,
               ROBOT_DYNAMICS_CACHE=str(tmp_path))
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    accelerated, difference, backend = out.stdout.split()
    assert accelerated == 'True' and backend == 'numba'
    assert float(difference) < 1e-10


def test_numba_backend_works_without_a_writable_cache(monkeypatch, tmp_path, rng):
    pytest.importorskip('numba')
    blocker = tmp_path / 'a_file'
    blocker.write_text('not a directory')
    monkeypatch.setenv('ROBOT_DYNAMICS_CACHE', str(blocker / 'cache'))
    model = _two_link()
    q, qd, qdd = random_state(rng, 2)
    assert_same(with_backend('numba', dynamics.gravity_torques, model, q),
                with_backend('reference', dynamics.gravity_torques, model, q))


def test_unknown_backend_in_the_environment_warns_and_keeps_generated():
    code = ('import warnings; warnings.simplefilter("error")\n'
            'try:\n    import robot_dynamics.dynamics\n'
            'except RuntimeWarning as w:\n    print("warned:", w)\n')
    env = dict(os.environ, ROBOT_DYNAMICS_BACKEND='fortran', PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert 'ROBOT_DYNAMICS_BACKEND' in out.stdout and 'fortran' in out.stdout
    code = ('import warnings; warnings.simplefilter("ignore")\n'
            'from robot_dynamics import dynamics; print(dynamics.get_backend())')
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == 'generated'


def test_numba_one_state_accepts_any_input_kind_and_compiles_nothing_more(
        monkeypatch, tmp_path, rng):
    """The numba one-state kernels are compiled for C-contiguous float64 (n,) arrays only;
    lists, ints, float32, strided and read-only arrays are copied once, with the same
    answer, and a wrong length still raises the general path's error."""
    pytest.importorskip('numba')
    from robot_dynamics.dynamics import _numba_loops
    monkeypatch.setenv('ROBOT_DYNAMICS_CACHE', str(tmp_path))
    model = _two_link()
    q, qd, qdd = random_state(rng, 2)
    readonly = qdd.copy()
    readonly.setflags(write=False)
    kinds = [(q, qd, qdd), (q.tolist(), tuple(qd), list(qdd)),
             (np.array([1, 0]), np.array([0, 2]), np.array([3, -1])),
             (q.astype(np.float32), qd, qdd), (np.repeat(q, 2)[::2], qd, readonly)]
    for function in (dynamics.inverse_dynamics, dynamics.forward_dynamics):
        for args in kinds:
            fast = with_backend('numba', function, model, *args)
            assert type(fast) is np.ndarray and fast.shape == (2,)
            assert_same(fast, with_backend('reference', function, model,
                                           *(np.asarray(a, dtype=float) for a in args)))
        with pytest.raises(ValueError, match='qd: expected shape'):
            with_backend('numba', function, model, q, np.zeros(3), qdd)
    for name in ('rnea_one', 'aba_one'):
        assert len(_numba_loops._kernel(name).signatures) == 1


@pytest.mark.parametrize('model', MODELS)
def test_array_mode_updates_only_its_own_temporaries_and_computes_the_same_floats(model, rng):
    """Array mode rewrites ``t = (a * b) + c`` as ``t = a * b; t += c`` (codegen._InPlace).
    The rewritten code must really update in place, leave its input arrays untouched and
    give exactly the floats of the generated source as written."""
    for name in ('rnea', 'aba'):
        text = codegen.source(model, name)
        tree = codegen._InPlace().visit(ast.parse(text))
        assert any(isinstance(node, ast.AugAssign) for node in ast.walk(tree)), name
        plain = dict(codegen._ARRAY)
        exec(compile(text, name, 'exec'), plain)
        q, qd, third = random_state(rng, model.n, 4)
        inputs = [np.ascontiguousarray(x.T) for x in (q, qd, third)]
        kept = [x.copy() for x in inputs]
        columns = codegen.kernel(model, name, 'array')(*inputs)
        for before, after in zip(kept, inputs):
            np.testing.assert_array_equal(after, before)
        expected = codegen.bind(model, plain[name])(*kept)
        for got, want in zip(columns, expected):
            np.testing.assert_array_equal(got, want)
