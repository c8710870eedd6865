"""robot_dynamics.kinematics against Pinocchio and against its own definitions.

Pinocchio (`pip install pin`, a test dependency) is the yardstick of the first part: every
preset of config/ is rebuilt in Pinocchio straight from its DH numbers by
tools/make_reference_data.py's `build_model` (which imports nothing of robot_dynamics), and
the URDFs of test/data are read by Pinocchio's own URDF parser. Compared, to 1e-12: the tip
(tool) pose, every link frame, the LOCAL_WORLD_ALIGNED frame Jacobian of the tip, of a tool
frame and of points on every link, and J̇q̇ as Pinocchio's classical frame acceleration at
q̈ = 0. Those tests are skipped only when Pinocchio cannot be imported.

The second part needs no Pinocchio: the Jacobian is the derivative of the pose, J̇q̇ the
derivative of J q̇ along q̇ (and the second derivative of the position), the tip wrench of
`dynamics.inverse_dynamics` acts through the same Jacobian, quaternions round-trip, batches
equal stacked single states, bad arguments are named.
"""

import importlib.util
import math
import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml

from conftest import preset_paths, random_chain_params, random_rotation
from robot_dynamics import dynamics
from robot_dynamics.dynamics import kinematics
from robot_dynamics.model import ModelWarning, RobotModel
from robot_dynamics.model.urdf import model_from_urdf, model_to_urdf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, 'test', 'data')
PRESETS = [os.path.splitext(os.path.basename(p))[0] for p in preset_paths()]
URDFS = {'ur5.urdf': 'tool0', 'skewed_arm.urdf': 'tool'}
TOL = 1e-12

pytestmark = pytest.mark.filterwarnings('ignore::robot_dynamics.model.ModelWarning')


def test_every_preset_and_fixture_is_covered():
    assert {'puma560', 'stanford', 'panda', 'sasaki6', 'planar2'} <= set(PRESETS)
    assert any('prismatic' in model_from_urdf(_text(name), tip_link=tip).joint_types
               for name, tip in URDFS.items())


def assert_close(actual, expected, what, tol=TOL):
    """Same shape and max |actual − expected| <= tol · max(1, max |expected|)."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, f'{what}: shape {actual.shape} != {expected.shape}'
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    error = float(np.max(np.abs(actual - expected), initial=0.0))
    assert error <= tol * scale, f'{what}: max error {error:.2e} > {tol * scale:.1e}'


def _text(name):
    with open(os.path.join(DATA, name), encoding='utf-8') as stream:
        return stream.read()


def preset(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', name + '.yaml'))


def random_transform(rng, reach=0.2):
    T = np.eye(4)
    T[:3, :3] = random_rotation(rng)
    T[:3, 3] = rng.uniform(-reach, reach, 3)
    return T


def random_states(rng, model, count):
    """q within the joint limits where there are some (|q| <= π), q̇ in ±2."""
    low = np.maximum(np.nan_to_num(model.position_min, neginf=-math.pi), -math.pi)
    high = np.minimum(np.nan_to_num(model.position_max, posinf=math.pi), math.pi)
    return rng.uniform(low, high, (count, model.n)), rng.uniform(-2.0, 2.0, (count, model.n))


# ---------------------------------------------------------------------- Pinocchio

@pytest.fixture(scope='module')
def pin():
    try:
        import pinocchio
    except ImportError:
        pytest.skip('pinocchio is not importable (pip install pin): the comparisons with '
                    'Pinocchio need it')
    return pinocchio


@pytest.fixture(scope='module')
def reference_builder(pin):
    """tools/make_reference_data.py as a module: `build_model(block)` is Pinocchio's model
    of a DH robot block and the frame ids of DH link frames 1..n."""
    path = os.path.join(REPO, 'tools', 'make_reference_data.py')
    spec = importlib.util.spec_from_file_location('make_reference_data', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PinArm:
    """A Pinocchio model of one arm with the frames of its n links; `q_pin` maps our joint
    coordinates to Pinocchio's (a continuous URDF joint is a (cos, sin) pair there)."""

    def __init__(self, pin, model, link_frames, continuous):
        self.pin, self.model, self.links = pin, model, list(link_frames)
        self.data = model.createData()
        self.continuous = continuous

    def q_pin(self, q):
        if not self.continuous:
            return np.asarray(q, dtype=float)
        return self.pin.integrate(self.model, self.pin.neutral(self.model), q)

    def add_frame(self, k, T):
        """A new frame fixed in link frame k+1 at placement T (4×4); its id."""
        pin = self.pin
        parent = self.model.frames[self.links[k]]
        placement = parent.placement * pin.SE3(T[:3, :3].copy(), T[:3, 3].copy())
        frame = pin.Frame(f'extra_{len(self.model.frames)}', parent.parentJoint, placement,
                          pin.FrameType.OP_FRAME)
        fid = self.model.addFrame(frame)
        self.data = self.model.createData()
        return fid

    def poses(self, q):
        self.pin.framesForwardKinematics(self.model, self.data, self.q_pin(q))
        return [self.data.oMf[f].homogeneous.copy() for f in range(len(self.model.frames))]

    def jacobian(self, q, fid):
        return self.pin.computeFrameJacobian(self.model, self.data, self.q_pin(q), fid,
                                             self.pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).copy()

    def jacobian_dot_qd(self, q, qd, fid):
        pin = self.pin
        pin.forwardKinematics(self.model, self.data, self.q_pin(q), qd, np.zeros(len(qd)))
        return pin.getFrameClassicalAcceleration(
            self.model, self.data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).vector.copy()


def preset_arm(pin, reference_builder, name):
    with open(os.path.join(REPO, 'config', name + '.yaml'), encoding='utf-8') as stream:
        block = yaml.safe_load(stream)['/**']['ros__parameters']['robot']
    pm, link_frames = reference_builder.build_model(block)
    return preset(name), PinArm(pin, pm, link_frames, continuous=False)


def urdf_arm(pin, path, tip):
    """Our model and Pinocchio's of a URDF file; link frames = the child links of the
    movable joints on the path to `tip`, the last one replaced by `tip` itself."""
    with open(path, encoding='utf-8') as stream:
        model = model_from_urdf(stream.read(), tip_link=tip)
    joints = {j.get('name'): j for j in ET.parse(path).getroot().findall('joint')}
    children = [joints[name].find('child').get('link') for name in model.joint_names]
    children[-1] = tip
    pm = pin.buildModelFromUrdf(path)
    assert pm.nv == model.n
    frames = [pm.getFrameId(link) for link in children]
    return model, PinArm(pin, pm, frames, continuous=pm.nq != pm.nv)


def arms(pin, reference_builder, tmp_path_factory):
    for name in PRESETS:
        yield name, preset_arm(pin, reference_builder, name)
    for name, tip in URDFS.items():
        yield name, urdf_arm(pin, os.path.join(DATA, name), tip)
    # a DH chain with prismatic joints and a payload, exported as URDF and read back by both
    params = random_chain_params(np.random.default_rng(5), 6, 'standard',
                                 prismatic_mask=[0, 1, 0, 0, 1, 0], payload=True)
    path = tmp_path_factory.mktemp('urdf') / 'exported.urdf'
    path.write_text(model_to_urdf(RobotModel.from_params(params)), encoding='utf-8')
    yield 'exported.urdf', urdf_arm(pin, str(path), 'tool0')


ARMS = PRESETS + list(URDFS) + ['exported.urdf']


@pytest.fixture(scope='module')
def all_arms(pin, reference_builder, tmp_path_factory):
    return dict(arms(pin, reference_builder, tmp_path_factory))


@pytest.mark.parametrize('name', ARMS)
def test_link_frames_and_tool_pose_match_pinocchio(all_arms, name, rng):
    model, arm = all_arms[name]
    tool = random_transform(rng)
    tool_frame = arm.add_frame(model.n - 1, tool)
    q, _ = random_states(rng, model, 6)
    links, tips, tools = (kinematics.link_poses(model, q), kinematics.tool_pose(model, q),
                          kinematics.tool_pose(model, q, tool))
    for b in range(len(q)):
        poses = arm.poses(q[b])
        expected = np.array([poses[f] for f in arm.links])
        assert_close(links[b], expected, f'{name} link frames in a batch')
        assert_close(kinematics.link_poses(model, q[b]), expected, f'{name} link frames')
        assert_close(tips[b], poses[arm.links[-1]], f'{name} tip pose')
        assert_close(tools[b], poses[tool_frame], f'{name} tool pose')
        assert_close(kinematics.tool_pose(model, q[b], tool), poses[tool_frame],
                     f'{name} tool pose, one state')


@pytest.mark.parametrize('name', ARMS)
def test_jacobians_and_jdot_qd_match_pinocchio(all_arms, name, rng):
    """At the tip, at a tool frame, at every link frame's origin and at a point on every
    link, single states and a batch."""
    model, arm = all_arms[name]
    tool = random_transform(rng)
    points = rng.uniform(-0.3, 0.3, (model.n, 3))
    targets = [({}, arm.links[-1]), ({'tool': tool}, arm.add_frame(model.n - 1, tool))]
    for k in range(model.n):
        offset = np.eye(4)
        offset[:3, 3] = points[k]
        targets.append(({'link': k}, arm.links[k]))
        targets.append(({'link': k, 'point': points[k]}, arm.add_frame(k, offset)))
    q, qd = random_states(rng, model, 4)
    for options, fid in targets:
        J_batch = kinematics.jacobian(model, q, **options)
        a_batch = kinematics.jacobian_dot_qd(model, q, qd, **options)
        for b in range(len(q)):
            what = f'{name} {options}'
            expected_J = arm.jacobian(q[b], fid)
            expected_a = arm.jacobian_dot_qd(q[b], qd[b], fid)
            assert_close(kinematics.jacobian(model, q[b], **options), expected_J,
                         f'{what}: J')
            assert_close(J_batch[b], expected_J, f'{what}: J in a batch')
            assert_close(kinematics.jacobian_dot_qd(model, q[b], qd[b], **options),
                         expected_a, f'{what}: J̇q̇')
            assert_close(a_batch[b], expected_a, f'{what}: J̇q̇ in a batch')


@pytest.mark.parametrize('name', ['puma560', 'skewed_arm.urdf'])
def test_quaternion_of_the_tool_pose_is_pinocchios(all_arms, name, rng, pin):
    """Up to the sign Pinocchio leaves free: ours has w >= 0."""
    model, _ = all_arms[name]
    q, _ = random_states(rng, model, 8)
    T = kinematics.tool_pose(model, q)
    ours = kinematics.quaternion_from_matrix(T)
    for b in range(len(q)):
        theirs = pin.Quaternion(T[b, :3, :3].copy()).coeffs()      # (x, y, z, w)
        theirs = theirs if theirs[3] >= 0.0 else -theirs
        assert_close(ours[b], theirs, f'{name} quaternion', tol=1e-12)


# ---------------------------------------------------------------------- no Pinocchio

def chains():
    """Presets, a URDF, and random chains of both conventions with prismatic joints and a
    payload."""
    rng = np.random.default_rng(11)
    out = {name: preset(name) for name in ('puma560', 'stanford')}
    out['skewed_arm.urdf'] = model_from_urdf(_text('skewed_arm.urdf'), tip_link='tool')
    for convention in ('standard', 'modified'):
        out[f'random {convention}'] = RobotModel.from_params(random_chain_params(
            rng, 6, convention, prismatic_mask=[0, 0, 1, 0, 1, 0], payload=True))
    return out


CHAINS = chains()


def _skew_part(A):
    return np.array([A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1]]) / 2.0


def numerical_jacobian(model, q, k, T_local, h=1e-6):
    """Central differences of the pose of frame `T_local` (4×4) in link frame k+1."""
    J = np.zeros((6, model.n))
    for j in range(model.n):
        e = np.zeros(model.n)
        e[j] = h
        Tp = kinematics.link_poses(model, q + e)[k] @ T_local
        Tm = kinematics.link_poses(model, q - e)[k] @ T_local
        T0 = kinematics.link_poses(model, q)[k] @ T_local
        J[:3, j] = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
        J[3:, j] = _skew_part((Tp[:3, :3] - Tm[:3, :3]) / (2 * h) @ T0[:3, :3].T)
    return J


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_jacobian_is_the_derivative_of_the_pose(name, rng):
    model = CHAINS[name]
    q = rng.uniform(-1.0, 1.0, model.n)
    tool = random_transform(rng)
    np.testing.assert_allclose(kinematics.jacobian(model, q, tool=tool),
                               numerical_jacobian(model, q, model.n - 1, tool), atol=1e-8)
    for k in range(model.n):
        point = rng.uniform(-0.3, 0.3, 3)
        offset = np.eye(4)
        offset[:3, 3] = point
        J = kinematics.jacobian(model, q, link=k, point=point)
        np.testing.assert_allclose(J, numerical_jacobian(model, q, k, offset), atol=1e-8)
        assert not np.any(J[:, k + 1:]), 'columns of joints after the link must be zero'


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_jdot_qd_is_the_derivative_of_j_qd_along_qd(name, rng):
    model = CHAINS[name]
    q, qd = rng.uniform(-1.0, 1.0, model.n), rng.uniform(-2.0, 2.0, model.n)
    h = 1e-6
    for options in ({}, {'tool': random_transform(rng)},
                    {'link': 2, 'point': rng.uniform(-0.3, 0.3, 3)}):
        J_dot = (kinematics.jacobian(model, q + h * qd, **options)
                 - kinematics.jacobian(model, q - h * qd, **options)) / (2 * h)
        np.testing.assert_allclose(kinematics.jacobian_dot_qd(model, q, qd, **options),
                                   J_dot @ qd, atol=1e-7)


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_jdot_qd_linear_part_is_the_second_derivative_of_the_position(name, rng):
    """Along q(t) = q + t q̇ (q̈ = 0): d²p/dt² = J̇ q̇, with no Jacobian involved."""
    model = CHAINS[name]
    q, qd = rng.uniform(-1.0, 1.0, model.n), rng.uniform(-2.0, 2.0, model.n)
    tool = random_transform(rng)
    h = 1e-4
    p = [kinematics.tool_pose(model, q + s * h * qd, tool)[:3, 3] for s in (-1, 0, 1)]
    np.testing.assert_allclose(kinematics.jacobian_dot_qd(model, q, qd, tool=tool)[:3],
                               (p[2] - 2 * p[1] + p[0]) / h ** 2, atol=1e-5)


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_tip_wrench_of_inverse_dynamics_acts_through_the_tip_jacobian(name, rng):
    """dynamics.inverse_dynamics' wrench is given in the tip frame (moment about its
    origin): its efforts are Jᵀ [R f; R n] with J and R of `kinematics` at the tip."""
    model = CHAINS[name]
    q = rng.uniform(-1.0, 1.0, (3, model.n))
    wrench = rng.uniform(-5.0, 5.0, (3, 6))
    zeros = np.zeros_like(q)
    tau = (dynamics.inverse_dynamics(model, q, zeros, zeros, wrench)
           - dynamics.inverse_dynamics(model, q, zeros, zeros))
    R = kinematics.tool_pose(model, q)[:, :3, :3]
    w_base = np.concatenate((np.einsum('bij,bj->bi', R, wrench[:, :3]),
                             np.einsum('bij,bj->bi', R, wrench[:, 3:])), axis=1)
    expected = np.einsum('bji,bj->bi', kinematics.jacobian(model, q), w_base)
    np.testing.assert_allclose(tau, expected, atol=1e-9)


def test_tool_moves_the_origin_and_point_in_the_tool_frame(rng):
    model = CHAINS['random standard']
    q = rng.uniform(-1.0, 1.0, model.n)
    tool = random_transform(rng)
    # the Jacobian depends on the tool only through its origin
    np.testing.assert_allclose(kinematics.jacobian(model, q, tool=tool),
                               kinematics.jacobian(model, q, point=tool[:3, 3]), atol=1e-14)
    np.testing.assert_allclose(kinematics.tool_pose(model, q, tool),
                               kinematics.link_poses(model, q)[-1] @ tool, atol=1e-14)
    np.testing.assert_allclose(kinematics.tool_pose(model, q),
                               kinematics.link_poses(model, q)[-1], atol=0)
    # link = n − 1 is the tip; negative indices count from the end
    np.testing.assert_array_equal(kinematics.jacobian(model, q, link=model.n - 1),
                                  kinematics.jacobian(model, q))
    np.testing.assert_array_equal(kinematics.jacobian(model, q, link=-2),
                                  kinematics.jacobian(model, q, link=model.n - 2))


def test_dynamics_forward_kinematics_and_jacobian_are_the_kinematics(rng):
    model = CHAINS['random modified']
    q = rng.uniform(-1.0, 1.0, (4, model.n))
    np.testing.assert_array_equal(dynamics.forward_kinematics(model, q),
                                  kinematics.link_poses(model, q))
    np.testing.assert_array_equal(dynamics.jacobian(model, q), kinematics.jacobian(model, q))


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_batch_equals_stacked_single_states(name, rng):
    """One state runs on Python floats, a batch on numpy arrays: the same to rounding."""
    model = CHAINS[name]
    q, qd = rng.uniform(-1.0, 1.0, (5, model.n)), rng.uniform(-2.0, 2.0, (5, model.n))
    tool = random_transform(rng)
    point = rng.uniform(-0.2, 0.2, 3)
    calls = {
        'link_poses': lambda q, qd: kinematics.link_poses(model, q),
        'tool_pose': lambda q, qd: kinematics.tool_pose(model, q, tool),
        'jacobian': lambda q, qd: kinematics.jacobian(model, q, tool=tool),
        'jacobian link': lambda q, qd: kinematics.jacobian(model, q, link=1, point=point),
        'jdot_qd': lambda q, qd: kinematics.jacobian_dot_qd(model, q, qd, tool=tool),
        'jdot_qd link': lambda q, qd: kinematics.jacobian_dot_qd(model, q, qd, link=1,
                                                                 point=point),
    }
    for what, call in calls.items():
        batch = call(q, qd)
        single = np.array([call(q[b], qd[b]) for b in range(len(q))])
        assert batch.shape == single.shape, what
        np.testing.assert_allclose(batch, single, rtol=0, atol=1e-13, err_msg=what)
    # one q̇ for a batch of q, and per-sample tools and points
    np.testing.assert_allclose(kinematics.jacobian_dot_qd(model, q, qd[0]),
                               kinematics.jacobian_dot_qd(model, q, np.tile(qd[0], (5, 1))),
                               atol=0)
    tools = np.array([random_transform(rng) for _ in q])
    np.testing.assert_allclose(kinematics.jacobian(model, q, tool=tools),
                               [kinematics.jacobian(model, q[b], tool=tools[b]) for b in range(5)],
                               atol=1e-13)


def test_lists_and_non_finite_states(rng):
    """A list of floats is one state; NaN or inf in q gives NaN (no exception), as the
    rest of the core does."""
    model = CHAINS['stanford']
    q = rng.uniform(-1.0, 1.0, model.n)
    np.testing.assert_array_equal(kinematics.jacobian(model, q.tolist()),
                                  kinematics.jacobian(model, q))
    np.testing.assert_allclose(kinematics.jacobian(model, [q.tolist()])[0],
                               kinematics.jacobian(model, q), atol=1e-13)
    for bad in (np.nan, np.inf):
        q_bad = q.copy()
        q_bad[1] = bad
        for result in (kinematics.link_poses(model, q_bad), kinematics.tool_pose(model, q_bad),
                       kinematics.jacobian(model, q_bad),
                       kinematics.jacobian_dot_qd(model, q_bad, q)):
            assert np.isnan(result).any()
    qd_bad = np.full(model.n, np.nan)
    assert np.isnan(kinematics.jacobian_dot_qd(model, q, qd_bad)).all()


def test_shapes(rng):
    model = CHAINS['puma560']
    n = model.n
    q = np.zeros(n)
    assert kinematics.link_poses(model, q).shape == (n, 4, 4)
    assert kinematics.tool_pose(model, q).shape == (4, 4)
    assert kinematics.jacobian(model, q).shape == (6, n)
    assert kinematics.jacobian_dot_qd(model, q, q).shape == (6,)
    Q = np.zeros((3, n))
    assert kinematics.link_poses(model, Q).shape == (3, n, 4, 4)
    assert kinematics.tool_pose(model, Q).shape == (3, 4, 4)
    assert kinematics.jacobian(model, Q).shape == (3, 6, n)
    assert kinematics.jacobian_dot_qd(model, Q, Q).shape == (3, 6)
    # at rest J̇q̇ vanishes
    assert not np.any(kinematics.jacobian_dot_qd(model, rng.uniform(-1, 1, n), q))


@pytest.mark.parametrize('call, message', [
    (lambda m: kinematics.link_poses(m, np.zeros(5)), r'^q: expected shape \(6,\)'),
    (lambda m: kinematics.tool_pose(m, np.zeros((2, 3, 6))), r'^q: '),
    (lambda m: kinematics.tool_pose(m, np.zeros(6), tool=np.eye(3)), r'^tool: expected'),
    (lambda m: kinematics.tool_pose(m, np.zeros(6), tool=2 * np.eye(4)), r'^tool: '),
    (lambda m: kinematics.tool_pose(m, np.zeros(6), tool=np.diag([1, 1, -1, 1.0])),
     r'^tool: .*reflection'),
    (lambda m: kinematics.jacobian(m, np.zeros(6), tool=np.full((4, 4), np.nan)),
     r'^tool: not finite'),
    (lambda m: kinematics.jacobian(m, np.zeros(6), link=6), r'^link: index 6 out of range'),
    (lambda m: kinematics.jacobian(m, np.zeros(6), link=1.0), r'^link: expected an integer'),
    (lambda m: kinematics.jacobian(m, np.zeros(6), link=True), r'^link: expected an integer'),
    (lambda m: kinematics.jacobian(m, np.zeros(6), link=2, point=[0.0, 1.0]), r'^point: '),
    (lambda m: kinematics.jacobian(m, np.zeros(6), point=[np.inf, 0, 0]), r'^point: not'),
    (lambda m: kinematics.jacobian_dot_qd(m, np.zeros(6), np.zeros(7)), r'^qd: expected'),
    (lambda m: kinematics.jacobian_dot_qd(m, np.zeros((2, 6)), np.zeros((3, 6))),
     r'^q and qd: batch sizes differ'),
    (lambda m: kinematics.quaternion_from_matrix(np.eye(2)), r'^R: expected shape'),
    (lambda m: kinematics.quaternion_from_matrix(2 * np.eye(3)), r'^R: .*orthonormal'),
    (lambda m: kinematics.quaternion_from_matrix(-np.eye(3)), r'^R: .*reflection'),
    (lambda m: kinematics.matrix_from_quaternion([0.0, 0.0, 1.0]), r'^q_xyzw: expected'),
    (lambda m: kinematics.matrix_from_quaternion([0.0, 0.0, 0.0, 0.0]), r'^q_xyzw: not'),
    (lambda m: kinematics.matrix_from_quaternion([np.nan, 0.0, 0.0, 1.0]), r'^q_xyzw: not'),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(CHAINS['puma560'])


# ---------------------------------------------------------------------- quaternions

def axis_angle(axis, angle):
    """(quaternion x, y, z, w, rotation matrix) from the closed forms: q = (sin(θ/2) u,
    cos(θ/2)) and Rodrigues' formula R = I + sin θ K + (1 − cos θ) K²."""
    u = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    K = np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])
    R = np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * K @ K
    return np.append(math.sin(angle / 2) * u, math.cos(angle / 2)), R


ANGLES = [0.0, 1e-9, 0.3, 1.5, math.pi / 2, 2.5, math.pi - 1e-7, math.pi, math.pi + 0.4,
          2 * math.pi - 0.1]


def test_quaternions_match_the_axis_angle_closed_forms(rng):
    """Every branch of the conversion (w, x, y or z the largest) and angles beyond π, where
    the closed form gives w < 0: ours is the same rotation's quaternion with w >= 0."""
    axes = [np.eye(3)[i] for i in range(3)] + list(rng.normal(size=(6, 3)))
    for axis in axes:
        for angle in ANGLES:
            quat, R = axis_angle(axis, angle)
            expected = quat if quat[3] >= 0.0 else -quat
            ours = kinematics.quaternion_from_matrix(R)
            np.testing.assert_allclose(ours, expected, atol=1e-12,
                                       err_msg=f'axis {axis}, angle {angle}')
            assert ours[3] >= 0.0
            np.testing.assert_allclose(kinematics.matrix_from_quaternion(quat), R, atol=1e-14)
            np.testing.assert_allclose(kinematics.matrix_from_quaternion(-quat), R, atol=1e-14)


def test_quaternion_round_trip_with_the_w_flip(rng):
    quats = rng.normal(size=(200, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    assert np.any(quats[:, 3] < 0.0)
    R = kinematics.matrix_from_quaternion(quats)
    assert R.shape == (200, 3, 3)
    np.testing.assert_allclose(np.swapaxes(R, 1, 2) @ R, np.broadcast_to(np.eye(3), R.shape),
                               atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)
    back = kinematics.quaternion_from_matrix(R)
    np.testing.assert_allclose(back, quats * np.sign(quats[:, 3:]), atol=1e-14)
    # a homogeneous transform gives its rotation's quaternion; batches of any leading shape
    T = np.broadcast_to(np.eye(4), (200, 4, 4)).copy()
    T[:, :3, :3] = R
    np.testing.assert_array_equal(kinematics.quaternion_from_matrix(T), back)
    np.testing.assert_array_equal(kinematics.quaternion_from_matrix(R.reshape(20, 10, 3, 3)),
                                  back.reshape(20, 10, 4))
    np.testing.assert_array_equal(kinematics.quaternion_from_matrix(R[7]), back[7])
    # a quaternion that is not unit is normalised
    np.testing.assert_allclose(kinematics.matrix_from_quaternion(3.0 * quats[0]), R[0],
                               atol=1e-14)
