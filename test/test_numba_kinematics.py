"""The numba backend's kinematic kernels (tool frame, its Jacobian, J̇ q̇) and its
composite-rigid-body mass matrix give the reference results to 1e-12 (relative to the
largest entry) on every preset, the URDF fixtures and random chains, with and without a
tool; the public functions (`kinematics.tool_pose`, `jacobian`, `jacobian_dot_qd`,
`dynamics.mass_matrix`) reach them through the backend dispatcher when 'numba' is selected,
and keep their results and error messages for every other input. Also the one-matrix path
of `kinematics.quaternion_from_matrix` (Python floats; a Cartesian law's every cycle):
the array path's quaternion and errors.

The references are independent of the kernels: the vectorised numpy path of `kinematics`
(a batch of one state: `algorithms.body_poses`, Craig's forward pass for J̇ q̇) and, for
M(q), n Newton–Euler passes (`algorithms.mass_matrix_rnea`, the 'reference' backend)."""

import os
import warnings

import numpy as np
import pytest
from conftest import REPO, preset_paths, random_chain_params, random_state

from robot_dynamics import dynamics
from robot_dynamics.dynamics import _numba_loops, kinematics
from robot_dynamics.model import ModelWarning, RobotModel
from robot_dynamics.model.urdf import model_from_urdf

TOL = 1e-12


@pytest.fixture(scope='module')
def numba_backend(tmp_path_factory):
    """The numba backend selected, its kernels compiled into a fresh cache directory."""
    pytest.importorskip('numba')
    previous_cache = os.environ.get('ROBOT_DYNAMICS_CACHE')
    os.environ['ROBOT_DYNAMICS_CACHE'] = str(tmp_path_factory.mktemp('kinematics_cache'))
    try:
        assert _numba_loops.compile_kernels()
    finally:
        if previous_cache is None:
            os.environ.pop('ROBOT_DYNAMICS_CACHE')
        else:
            os.environ['ROBOT_DYNAMICS_CACHE'] = previous_cache
    previous = dynamics.get_backend()
    dynamics.set_backend('numba')
    yield
    dynamics.set_backend(previous)


def _models():
    params = []
    for path in preset_paths():
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', ModelWarning)
            params.append(pytest.param(RobotModel.from_yaml(path), id=os.path.basename(path)))
    for name, tip in (('skewed_arm', 'tool'), ('ur5', 'tool0')):
        with open(os.path.join(REPO, 'test', 'data', name + '.urdf'), encoding='utf-8') as f:
            params.append(pytest.param(model_from_urdf(f.read(), tip_link=tip), id=name))
    rng = np.random.default_rng(71)
    for convention, n in (('standard', 7), ('modified', 40)):
        block = random_chain_params(rng, n, convention, rng.random(n) < 0.3, friction=True,
                                    armature=True, payload=True)
        params.append(pytest.param(RobotModel.from_params(block), id=f'{convention}-{n}'))
    return params


MODELS = _models()


def _tool(rng):
    """A random proper rigid transform (rotation from a normalised random quaternion)."""
    T = np.eye(4)
    T[:3, :3] = kinematics.matrix_from_quaternion(rng.normal(size=4))
    T[:3, 3] = rng.uniform(-0.2, 0.2, 3)
    return T


def _reference_kinematics(model, q, qd, tool):
    """Tool frame, Jacobian and J̇ q̇ by the vectorised numpy path (a batch of one)."""
    return (kinematics.tool_pose(model, q[None], tool)[0],
            kinematics.jacobian(model, q[None], tool)[0],
            kinematics.jacobian_dot_qd(model, q[None], qd[None], tool)[0])


def _reference_mass_matrix(model, q):
    previous = dynamics.get_backend()
    dynamics.set_backend('reference')
    try:
        return dynamics.mass_matrix(model, q)
    finally:
        dynamics.set_backend(previous)


def assert_close(fast, expected):
    assert fast is not None
    assert fast.shape == expected.shape
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(fast, expected, rtol=0.0, atol=TOL * scale)


def forbidden(*args):
    raise AssertionError('the Python one-state path ran')


@pytest.mark.parametrize('model', MODELS)
def test_kernels_match_the_reference(numba_backend, model, rng, monkeypatch):
    for _ in range(5):
        q, qd, _ = random_state(rng, model.n)
        for tool in (None, _tool(rng)):
            T, J, a = _reference_kinematics(model, q, qd, tool)
            monkeypatch.setattr(kinematics, '_single_target', forbidden)
            monkeypatch.setattr(dynamics, '_mass_matrix_one', forbidden)
            assert_close(kinematics.tool_pose(model, q, tool), T)
            assert_close(kinematics.jacobian(model, q, tool), J)
            assert_close(kinematics.jacobian_dot_qd(model, q, qd, tool), a)
            M = dynamics.mass_matrix(model, q)
            monkeypatch.undo()
        assert_close(M, _reference_mass_matrix(model, q))
        np.testing.assert_array_equal(M, M.T)


def test_public_functions_run_the_kernels(numba_backend, rng, monkeypatch):
    """With 'numba' selected, one state never reaches the Python-float paths."""
    model = MODELS[0].values[0]
    q, qd, _ = random_state(rng, model.n)
    tool = _tool(rng)

    monkeypatch.setattr(kinematics, '_single_target', forbidden)
    monkeypatch.setattr(dynamics, '_mass_matrix_one', forbidden)
    read_only = tool.copy()
    read_only.setflags(write=False)             # CartesianImpedanceLaw keeps its tool so
    for t in (None, tool, read_only, np.asfortranarray(tool)):
        kinematics.tool_pose(model, q, t)
        kinematics.jacobian(model, q, t)
        kinematics.jacobian_dot_qd(model, q, qd, t)
    dynamics.mass_matrix(model, q)
    assert {'tool_pose', 'jacobian', 'jacobian_dot_qd', 'mass_matrix'} \
        <= set(model._kernels.runners['numba'])


def test_other_inputs_keep_their_results(numba_backend, rng):
    """Lists, batches, a link or point: the other paths, the same values."""
    model = MODELS[0].values[0]
    q, qd, _ = random_state(rng, model.n, 3)
    tool = _tool(rng)
    T, J, a = (np.array(x) for x in zip(*(_reference_kinematics(model, q[i], qd[i], tool)
                                          for i in range(3))))
    assert_close(kinematics.tool_pose(model, q, tool), T)
    assert_close(kinematics.jacobian(model, q, tool), J)
    assert_close(kinematics.jacobian_dot_qd(model, q, qd, tool), a)
    assert_close(kinematics.tool_pose(model, q[0].tolist(), tool), T[0])
    assert_close(dynamics.mass_matrix(model, q), np.array([_reference_mass_matrix(model, x)
                                                           for x in q]))
    J1 = kinematics.jacobian(model, q[0], link=1, point=(0.1, 0.0, 0.0))
    assert_close(J1, kinematics.jacobian(model, q[:1], link=1, point=(0.1, 0.0, 0.0))[0])
    assert np.all(J1[:, 2:] == 0.0)


@pytest.mark.parametrize('bad, message', [
    (np.diag([1.0, 1.0, 1.1, 1.0]), 'not orthonormal'),
    (np.diag([1.0, 1.0, -1.0, 1.0]), 'reflection'),
    (np.array([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0.5, 1]]), 'last row'),
    (np.full((4, 4), np.nan), 'not finite'),
])
def test_invalid_tool_is_still_named(numba_backend, rng, bad, message):
    model = MODELS[0].values[0]
    q, qd, _ = random_state(rng, model.n)
    for call in (lambda: kinematics.tool_pose(model, q, bad),
                 lambda: kinematics.jacobian(model, q, bad),
                 lambda: kinematics.jacobian_dot_qd(model, q, qd, bad)):
        with pytest.raises(ValueError, match=f'tool: .*{message}'):
            call()


def test_non_finite_state_keeps_the_reference_result(numba_backend, rng):
    model = MODELS[0].values[0]
    q, qd, _ = random_state(rng, model.n)
    q[2] = np.nan
    assert _numba_loops.runner(model, 'tool_pose')(q, None) is None
    assert _numba_loops.runner(model, 'mass_matrix')(q) is None
    np.testing.assert_array_equal(kinematics.jacobian(model, q),
                                  kinematics.jacobian(model, q[None])[0])
    np.testing.assert_array_equal(dynamics.mass_matrix(model, q),
                                  _reference_mass_matrix(model, q))


def test_plain_python_kernels_match_the_reference(rng):
    """The kernels' source runs as plain Python too (no numba needed): same answers."""
    model = RobotModel.from_params(random_chain_params(rng, 5, 'modified', [0, 1, 0, 1, 0],
                                                       armature=True, payload=True))
    P = _numba_loops.pack(model)
    q, qd, _ = random_state(rng, 5)
    tool = _tool(rng)
    T, J, a = _reference_kinematics(model, q, qd, tool)
    out = np.empty((4, 4))
    assert _numba_loops.tool_pose_one(P, q, tool, out)
    assert_close(out, T)
    out = np.empty((6, 5))
    assert _numba_loops.jacobian_one(P, q, tool, out)
    assert_close(out, J)
    out = np.empty(6)
    assert _numba_loops.jacobian_dot_qd_one(P, q, qd, tool, out)
    assert_close(out, a)
    out = np.empty((5, 5))
    assert _numba_loops.mass_matrix_one(P, q, out)
    assert_close(out, _reference_mass_matrix(model, q))
    assert not _numba_loops.tool_pose_one(P, q, np.diag([1.0, 1.0, -1.0, 1.0]),
                                          np.empty((4, 4)))


def test_without_numba_the_python_paths_run(monkeypatch, rng):
    monkeypatch.setattr(_numba_loops, 'numba', None)
    monkeypatch.setattr(_numba_loops, '_compiled', {})
    monkeypatch.setattr(_numba_loops, '_modules', {})
    model = RobotModel.from_params(random_chain_params(rng, 3, 'standard'))
    q, _, _ = random_state(rng, 3)
    for name in ('tool_pose', 'jacobian', 'mass_matrix'):
        assert _numba_loops.runner(model, name)(q) is None


def test_one_matrix_quaternion_is_the_array_path(rng):
    rotations = [kinematics.matrix_from_quaternion(rng.normal(size=4)) for _ in range(300)]
    rotations += [np.eye(3), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]),
                  np.diag([-1.0, -1.0, 1.0])]                 # each branch of Shepperd's
    for R in rotations:
        expected = kinematics.quaternion_from_matrix(R[None])[0]      # the array path
        np.testing.assert_allclose(kinematics.quaternion_from_matrix(R), expected,
                                   rtol=0.0, atol=1e-15)
        T = np.eye(4)
        T[:3, :3] = R
        np.testing.assert_allclose(kinematics.quaternion_from_matrix(T), expected,
                                   rtol=0.0, atol=1e-15)
        back = kinematics.matrix_from_quaternion(kinematics.quaternion_from_matrix(R))
        np.testing.assert_allclose(back, R, atol=1e-14)
    for bad, message in ((np.diag([1.0, 1.0, 1.1]), 'not orthonormal'),
                         (np.diag([1.0, 1.0, -1.0]), 'reflection'),
                         (np.full((3, 3), np.inf), 'not finite')):
        with pytest.raises(ValueError, match=f'R: .*{message}'):
            kinematics.quaternion_from_matrix(bad)
