"""Properties of the dynamics core (robot_dynamics.dynamics), each one that could fail.

Closed forms come from doc/verification.md (textbook results, implemented here from the printed
formulas); everything else is an identity of rigid-body mechanics checked on random
chains (test/conftest.py) and on every preset in config/*.yaml.
"""

import math
import os

import numpy as np
import pytest
from conftest import preset_paths, random_chain_params, random_state, with_backend

from robot_dynamics import dynamics
from robot_dynamics.simulation import integration
from robot_dynamics.dynamics import lagrange
from robot_dynamics.model import RobotModel

G = 9.81
# the 2R test vector of doc/verification.md
ARM = dict(l1=1.0, l2=0.8, lc1=0.45, lc2=0.35, m1=3.0, m2=2.0, I1=0.12, I2=0.07)
IMPLEMENTATIONS = {'newton_euler': dynamics.inverse_dynamics,
                   'lagrange': lagrange.inverse_dynamics}
MIXED_MASKS = [(0, 0, 0, 0, 0, 0), (0, 1, 0, 0, 1, 0), (1, 0, 1), (0, 0, 1, 1, 0),
               (1,), (0,)]


def _model(rng, n=None, convention='standard', mask=None, **kwargs):
    if mask is None:
        mask = [False] * n
    return RobotModel.from_params(random_chain_params(rng, len(mask), convention, mask,
                                                      **kwargs))


def _rx(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


# ------------------------------------------------------------------ closed forms


def two_link_params(convention, l1, l2, lc1, lc2, m1, m2, I1, I2):
    """The planar 2R arm of doc/verification.md ([CRA] Ex. 6.6, [SPO]): q measured from x_0,
    gravity along −y_0,
    slender links (inertia I about the COM for axes ⊥ to the link, ~0 along it).
    Standard DH: link frame i at the distal end, so the COM sits at lc − l on x_i;
    modified DH: link frame i on joint i, COM at lc on x_i (doc/conventions.md)."""
    block = {'joint_types': ['revolute', 'revolute'], 'alpha': [0.0, 0.0],
             'd': [0.0, 0.0], 'theta': [0.0, 0.0], 'mass': [m1, m2],
             'inertia': [0.0, 0.0, 0.0, I1, 0.0, I1, 0.0, 0.0, 0.0, I2, 0.0, I2],
             'gravity': [0.0, -G, 0.0], 'dh_convention': convention}
    if convention == 'standard':
        block.update(a=[l1, l2], com=[lc1 - l1, 0.0, 0.0, lc2 - l2, 0.0, 0.0])
    else:
        block.update(a=[0.0, l1], com=[lc1, 0.0, 0.0, lc2, 0.0, 0.0])
    return block


def two_link_torques(q, qd, qdd, l1, l2, lc1, lc2, m1, m2, I1, I2):
    """The 2R closed form of doc/verification.md, written out from the formulas."""
    c2 = math.cos(q[1])
    M11 = m1 * lc1 ** 2 + m2 * (l1 ** 2 + lc2 ** 2 + 2 * l1 * lc2 * c2) + I1 + I2
    M12 = m2 * (lc2 ** 2 + l1 * lc2 * c2) + I2
    M22 = m2 * lc2 ** 2 + I2
    h = -m2 * l1 * lc2 * math.sin(q[1])
    g1 = (m1 * lc1 + m2 * l1) * G * math.cos(q[0]) + m2 * lc2 * G * math.cos(q[0] + q[1])
    g2 = m2 * lc2 * G * math.cos(q[0] + q[1])
    tau1 = M11 * qdd[0] + M12 * qdd[1] + h * qd[1] ** 2 + 2 * h * qd[0] * qd[1] + g1
    tau2 = M12 * qdd[0] + M22 * qdd[1] - h * qd[0] ** 2 + g2
    return np.array([tau1, tau2])


TWO_LINK_TABLE = [  # doc/verification.md: q, q̇, q̈, τ as tabulated there
    ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (39.7305, 6.867)),
    ((0.3, -0.7), (0.0, 0.0), (0.0, 0.0), (37.72062656, 6.32492585)),
    ((0.3, -0.7), (1.1, -0.4), (0.0, 0.0), (37.39594084, 5.77927346)),
    ((0.3, -0.7), (1.1, -0.4), (0.5, 2.0), (41.15335944, 6.83446823)),
    ((math.pi / 2, 0.0), (0.0, 0.0), (1.0, 0.0), (4.4425, 1.015)),
]


@pytest.mark.parametrize('impl', IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('row', TWO_LINK_TABLE)
def test_two_link_arm_matches_printed_test_vectors(dynamics_backend, impl, convention, row):
    model = RobotModel.from_params(two_link_params(convention, **ARM))
    q, qd, qdd, tau = row
    np.testing.assert_allclose(impl(model, q, qd, qdd), tau, rtol=0.0, atol=1e-7)


@pytest.mark.parametrize('impl', IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize('convention', ['standard', 'modified'])
def test_two_link_arm_matches_closed_form_at_random_states(rng, dynamics_backend, impl,
                                                           convention):
    model = RobotModel.from_params(two_link_params(convention, **ARM))
    for _ in range(20):
        q, qd, qdd = random_state(rng, 2)
        q = 3.0 * q
        np.testing.assert_allclose(impl(model, q, qd, qdd),
                                   two_link_torques(q, qd, qdd, **ARM), rtol=0, atol=1e-10)


def test_two_link_mass_matrix_matches_printed_value():
    model = RobotModel.from_params(two_link_params('standard', **ARM))
    np.testing.assert_allclose(dynamics.mass_matrix(model, [0.3, -0.7]),
                               [[4.11327906, 0.85038953], [0.85038953, 0.315]], atol=1e-8)


def craig_point_mass_params(convention, l1, l2, m1, m2):
    """Craig Ex. 6.6: point masses at the link tips, gravity along −y_0. Standard DH puts
    the tip at the link-frame origin (r̄ = 0); modified DH at (l, 0, 0) of link frame i."""
    com = [0.0] * 6 if convention == 'standard' else [l1, 0.0, 0.0, l2, 0.0, 0.0]
    return {'dh_convention': convention, 'joint_types': ['revolute', 'revolute'],
            'a': [l1, l2] if convention == 'standard' else [0.0, l1],
            'alpha': [0.0, 0.0], 'd': [0.0, 0.0], 'theta': [0.0, 0.0],
            'mass': [m1, m2], 'com': com, 'inertia': [0.0] * 12,
            'gravity': [0.0, -G, 0.0]}


@pytest.mark.parametrize('impl', IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize('convention', ['standard', 'modified'])
def test_craig_example_6_6_point_masses_match_closed_form(rng, dynamics_backend, impl, convention):
    l1, l2, m1, m2 = 0.7, 0.45, 2.5, 1.3
    model = RobotModel.from_params(craig_point_mass_params(convention, l1, l2, m1, m2))
    for _ in range(10):
        (t1, t2), (d1, d2), (a1, a2) = (3.0 * x for x in random_state(rng, 2))
        c1, c2, s2, c12 = math.cos(t1), math.cos(t2), math.sin(t2), math.cos(t1 + t2)
        tau1 = (m2 * l2 ** 2 * (a1 + a2) + m2 * l1 * l2 * c2 * (2 * a1 + a2)
                + (m1 + m2) * l1 ** 2 * a1 - m2 * l1 * l2 * s2 * d2 ** 2
                - 2 * m2 * l1 * l2 * s2 * d1 * d2 + m2 * l2 * G * c12 + (m1 + m2) * l1 * G * c1)
        tau2 = (m2 * l1 * l2 * c2 * a1 + m2 * l1 * l2 * s2 * d1 ** 2 + m2 * l2 * G * c12
                + m2 * l2 ** 2 * (a1 + a2))
        np.testing.assert_allclose(impl(model, [t1, t2], [d1, d2], [a1, a2]), [tau1, tau2],
                                   rtol=0, atol=1e-10)


def rp_polar_params(convention, izz1, m1, m2):
    """The RP polar arm of doc/verification.md: joint 1 turns about z_0, joint 2 slides
    radially and carries a point mass m2; link 1 is a disc on the axis (I = izz1 about the
    axis, izz1/2 across).
    Modified: row 2 has α = −π/2 (Craig's α_1), so the slide axis z_2 = y_1 and the radial
    angle is ψ = q1 + π/2. Standard: α_1 = −π/2 turns z_1 onto y of the joint-1 frame (the
    same ψ) and the axis z_0 reads −y_1 in link frame 1."""
    block = {'dh_convention': convention, 'joint_types': ['revolute', 'prismatic'],
             'a': [0.0, 0.0], 'd': [0.0, 0.0], 'theta': [0.0, 0.0], 'mass': [m1, m2],
             'com': [0.0] * 6, 'gravity': [0.0, -G, 0.0]}
    if convention == 'modified':
        block['alpha'] = [0.0, -math.pi / 2]
        disc = [izz1 / 2, 0.0, 0.0, izz1 / 2, 0.0, izz1]
    else:
        block['alpha'] = [-math.pi / 2, 0.0]
        disc = [izz1 / 2, 0.0, 0.0, izz1, 0.0, izz1 / 2]
    block['inertia'] = disc + [0.0] * 6
    return block


@pytest.mark.parametrize('impl', IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize('convention', ['standard', 'modified'])
def test_rp_polar_arm_matches_closed_form(rng, dynamics_backend, impl, convention):
    izz1, m1, m2 = 0.4, 3.0, 1.7
    model = RobotModel.from_params(rp_polar_params(convention, izz1, m1, m2))
    for _ in range(10):
        q, qd, qdd = random_state(rng, 2)
        q[0] *= 3.0
        d, d_dot, psi = q[1], qd[1], q[0] + math.pi / 2
        tau1 = (izz1 + m2 * d ** 2) * qdd[0] + 2 * m2 * d * d_dot * qd[0] \
            + m2 * G * d * math.cos(psi)
        tau2 = m2 * qdd[1] - m2 * d * qd[0] ** 2 + m2 * G * math.sin(psi)
        np.testing.assert_allclose(impl(model, q, qd, qdd), [tau1, tau2], rtol=0, atol=1e-10)


# ------------------------------------------------------------------ structure of τ


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_inverse_dynamics_equals_mass_matrix_times_qdd_plus_bias_forces(rng, convention, mask):
    model = _model(rng, convention=convention, mask=mask, friction=True, armature=True,
                   payload=True)
    q, qd, qdd = random_state(rng, model.n, size=8)
    expected = np.einsum('bij,bj->bi', dynamics.mass_matrix(model, q), qdd) \
        + dynamics.bias_forces(model, q, qd)
    np.testing.assert_allclose(dynamics.inverse_dynamics(model, q, qd, qdd), expected,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('forward', [dynamics.forward_dynamics,
                                     dynamics.forward_dynamics_mass_matrix])
@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_forward_dynamics_inverts_inverse_dynamics(rng, dynamics_backend, forward, convention,
                                                   mask):
    model = _model(rng, convention=convention, mask=mask, friction=True, armature=True,
                   payload=True)
    q, qd, qdd = random_state(rng, model.n, size=8)
    wrench = rng.normal(size=(8, 6))
    tau = dynamics.inverse_dynamics(model, q, qd, qdd, wrench=wrench)
    np.testing.assert_allclose(forward(model, q, qd, tau, wrench=wrench), qdd,
                               rtol=1e-8, atol=1e-8)


def _preset_configurations(model, rng, count):
    low = np.maximum(model.position_min, -math.pi)
    high = np.minimum(model.position_max, math.pi)
    return rng.uniform(low, high, size=(count, model.n))


def _assert_symmetric_positive_definite(M):
    np.testing.assert_allclose(M, np.swapaxes(M, -1, -2), rtol=0, atol=1e-12 * np.abs(M).max())
    np.linalg.cholesky(M)                       # raises LinAlgError unless SPD
    assert np.all(np.linalg.eigvalsh(M) > 0.0)


@pytest.mark.filterwarnings('ignore::robot_dynamics.model.ModelWarning')  # textbook data
@pytest.mark.parametrize('path', preset_paths(), ids=os.path.basename)
def test_mass_matrix_is_symmetric_positive_definite_on_preset(rng, path):
    model = RobotModel.from_yaml(path)
    _assert_symmetric_positive_definite(
        dynamics.mass_matrix(model, _preset_configurations(model, rng, 50)))


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS + [(0,) * 7])
def test_mass_matrix_is_symmetric_positive_definite_on_random_chains(rng, convention, mask):
    model = _model(rng, convention=convention, mask=mask, payload=True)
    q, _, _ = random_state(rng, model.n, size=50)
    _assert_symmetric_positive_definite(dynamics.mass_matrix(model, 3.0 * q))


@pytest.mark.filterwarnings('ignore::robot_dynamics.model.ModelWarning')  # textbook data
@pytest.mark.parametrize('path', preset_paths(), ids=os.path.basename)
def test_preset_forward_dynamics_inverts_inverse_dynamics(rng, dynamics_backend, path):
    model = RobotModel.from_yaml(path)
    q = _preset_configurations(model, rng, 10)
    _, qd, qdd = random_state(rng, model.n, size=10)
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    np.testing.assert_allclose(dynamics.forward_dynamics(model, q, qd, tau), qdd,
                               rtol=1e-8, atol=1e-8)


# ------------------------------------------------------------------ energy


def _numerical_gradient(f, x, h=1e-6):
    grad = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        grad[i] = (f(x + e) - f(x - e)) / (2 * h)
    return grad


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_gravity_torques_equal_gradient_of_potential_energy(rng, convention, mask):
    model = _model(rng, convention=convention, mask=mask, payload=True)
    for _ in range(3):
        q, _, _ = random_state(rng, model.n)
        grad = _numerical_gradient(lambda x: dynamics.potential_energy(model, x), q)
        np.testing.assert_allclose(dynamics.gravity_torques(model, q), grad,
                                   rtol=1e-7, atol=1e-7)


def _energy_rate(model, q, qd, qdd, h=1e-5):
    """d(KE + PE)/dt at t = 0 along q(t) = q + q̇t + ½q̈t², by central differences."""
    def energy(t):
        qt = q + qd * t + 0.5 * qdd * t * t
        qdt = qd + qdd * t
        return dynamics.kinetic_energy(model, qt, qdt) + dynamics.potential_energy(model, qt)
    return (energy(h) - energy(-h)) / (2 * h)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_energy_rate_equals_power_of_joint_efforts_without_friction(rng, dynamics_backend,
                                                                    convention, mask):
    model = _model(rng, convention=convention, mask=mask, armature=True, payload=True)
    for _ in range(3):
        q, qd, qdd = random_state(rng, model.n)
        tau = dynamics.inverse_dynamics(model, q, qd, qdd)
        assert _energy_rate(model, q, qd, qdd) == pytest.approx(qd @ tau, rel=1e-7, abs=1e-7)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_friction_dissipates_exactly_the_power_of_friction_torques(rng, dynamics_backend,
                                                                   convention, mask):
    model = _model(rng, convention=convention, mask=mask, friction=True, armature=True)
    for _ in range(3):
        q, qd, qdd = random_state(rng, model.n)
        tau = dynamics.inverse_dynamics(model, q, qd, qdd)
        loss = qd @ dynamics.friction_torques(model, qd)
        assert loss > 0.0
        assert _energy_rate(model, q, qd, qdd) == pytest.approx(qd @ tau - loss,
                                                                rel=1e-7, abs=1e-7)


def test_energy_is_conserved_by_rk4_with_zero_effort(rng):
    model = _model(rng, convention='standard', mask=(0, 1, 0, 0), payload=True)
    q, qd, _ = random_state(rng, model.n)
    q, qd = q * 0.3, qd * 0.5

    def energy(q, qd):
        return dynamics.kinetic_energy(model, q, qd) + dynamics.potential_energy(model, q)

    e0 = energy(q, qd)
    scale = abs(e0) + dynamics.kinetic_energy(model, q, qd)
    tau = np.zeros(model.n)
    for _ in range(200):
        q, qd = integration.rk4_step(model, q, qd, tau, 1e-3)
    assert abs(energy(q, qd) - e0) < 1e-7 * scale


def test_kinetic_energy_equals_half_qd_mass_matrix_qd(rng):
    model = _model(rng, convention='modified', mask=(0, 1, 0, 1, 0), armature=True,
                   payload=True)
    q, qd, _ = random_state(rng, model.n, size=10)
    M = dynamics.mass_matrix(model, q)
    np.testing.assert_allclose(dynamics.kinetic_energy(model, q, qd),
                               0.5 * np.einsum('bi,bij,bj->b', qd, M, qd), rtol=1e-12)


# ------------------------------------------------------------------ two conventions


def standard_to_modified(block):
    """The same physical arm in modified DH. Modified link frame i is the standard frame
    i−1 turned by joint i, i.e. standard link frame i = modified link frame i ·
    Tx(a_i) Rx(α_i). So the modified rows take a, α of the previous standard row (zero for
    the first: both share the base frame), θ and d stay, and every inertial given in
    standard link frame i is moved into the modified one: p ↦ (a_i, 0, 0) + Rx(α_i) p,
    I ↦ Rx(α_i) I Rx(α_i)ᵀ. The modified table has no a_n, α_n, so its last link frame is
    not the standard tool frame: the payload (and a tip wrench) must be moved the same way.
    """
    n = len(block['joint_types'])
    a, alpha = block['a'], block['alpha']
    com = np.reshape(block['com'], (n, 3))
    out = dict(block, dh_convention='modified', a=[0.0] + list(a[:-1]),
               alpha=[0.0] + list(alpha[:-1]))
    new_com, new_inertia = [], []
    for i in range(n):
        R = _rx(alpha[i])
        new_com += list(np.array([a[i], 0.0, 0.0]) + R @ com[i])
        new_inertia += _urdf6(R @ _from_urdf6(block['inertia'][6 * i:6 * i + 6]) @ R.T)
    out.update(com=new_com, inertia=new_inertia)
    if 'payload' in block:
        R = _rx(alpha[-1])
        pl = block['payload']
        out['payload'] = {
            'mass': pl['mass'],
            'com': list(np.array([a[-1], 0.0, 0.0]) + R @ np.asarray(pl['com'])),
            'inertia': _urdf6(R @ _from_urdf6(pl['inertia']) @ R.T)}
    return out


def _from_urdf6(v):
    return np.array([[v[0], v[1], v[2]], [v[1], v[3], v[4]], [v[2], v[4], v[5]]])


def _urdf6(m):
    return [m[0, 0], m[0, 1], m[0, 2], m[1, 1], m[1, 2], m[2, 2]]


@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_same_arm_in_standard_and_modified_dh_has_the_same_dynamics(rng, mask):
    block = random_chain_params(rng, len(mask), 'standard', mask, friction=True,
                                armature=True, payload=True)
    std = RobotModel.from_params(block)
    mod = RobotModel.from_params(standard_to_modified(block))
    q, qd, qdd = random_state(rng, std.n, size=6)
    # a tip wrench in the standard tool frame, moved into the modified last link frame
    a_n, R = block['a'][-1], _rx(block['alpha'][-1])
    w_std = rng.normal(size=(6, 6))
    f_mod = w_std[:, :3] @ R.T
    w_mod = np.hstack((f_mod, w_std[:, 3:] @ R.T + np.cross([a_n, 0.0, 0.0], f_mod)))
    np.testing.assert_allclose(dynamics.inverse_dynamics(mod, q, qd, qdd, wrench=w_mod),
                               dynamics.inverse_dynamics(std, q, qd, qdd, wrench=w_std),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dynamics.mass_matrix(mod, q), dynamics.mass_matrix(std, q),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dynamics.potential_energy(mod, q),
                               dynamics.potential_energy(std, q), rtol=1e-10, atol=1e-10)
    # the link frames differ by exactly Tx(a_i) Rx(α_i)
    T_mod = dynamics.forward_kinematics(mod, q)
    T_std = dynamics.forward_kinematics(std, q)
    for i in range(std.n):
        offset = np.eye(4)
        offset[:3, :3] = _rx(block['alpha'][i])
        offset[0, 3] = block['a'][i]
        np.testing.assert_allclose(T_mod[:, i] @ offset, T_std[:, i], atol=1e-12)


# ------------------------------------------------------------------ wrench, friction, armature


def _tip_jacobian_numerical(model, q, h=1e-6):
    """Columns [v; ω] of the tip frame by central differences of forward kinematics."""
    J = np.zeros((6, model.n))
    R = dynamics.forward_kinematics(model, q)[-1, :3, :3]
    for j in range(model.n):
        e = np.zeros(model.n)
        e[j] = h
        Tp = dynamics.forward_kinematics(model, q + e)[-1]
        Tm = dynamics.forward_kinematics(model, q - e)[-1]
        J[:3, j] = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
        W = (Tp[:3, :3] - Tm[:3, :3]) / (2 * h) @ R.T
        J[3:, j] = (W[2, 1], W[0, 2], W[1, 0])
    return J


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_jacobian_matches_finite_differences_of_forward_kinematics(rng, convention, mask):
    model = _model(rng, convention=convention, mask=mask)
    q, _, _ = random_state(rng, model.n)
    np.testing.assert_allclose(dynamics.jacobian(model, q), _tip_jacobian_numerical(model, q),
                               rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MIXED_MASKS)
def test_tip_wrench_adds_jacobian_transpose_times_wrench(rng, convention, mask):
    model = _model(rng, convention=convention, mask=mask, friction=True, payload=True)
    q, qd, qdd = random_state(rng, model.n, size=5)
    w = rng.normal(size=(5, 6))
    extra = dynamics.inverse_dynamics(model, q, qd, qdd, wrench=w) \
        - dynamics.inverse_dynamics(model, q, qd, qdd)
    R = dynamics.forward_kinematics(model, q)[:, -1, :3, :3]
    w_base = np.hstack((np.einsum('bij,bj->bi', R, w[:, :3]),
                        np.einsum('bij,bj->bi', R, w[:, 3:])))
    expected = np.einsum('bji,bj->bi', dynamics.jacobian(model, q), w_base)
    np.testing.assert_allclose(extra, expected, rtol=1e-10, atol=1e-10)


def test_viscous_friction_adds_exactly_b_qd(rng):
    block = random_chain_params(rng, 4, 'standard', (0, 1, 0, 0))
    b = rng.uniform(0.5, 3.0, size=4)
    plain = RobotModel.from_params(block)
    viscous = RobotModel.from_params(dict(block, viscous_friction=b.tolist()))
    q, qd, qdd = random_state(rng, 4, size=6)
    np.testing.assert_allclose(dynamics.inverse_dynamics(viscous, q, qd, qdd)
                               - dynamics.inverse_dynamics(plain, q, qd, qdd), b * qd,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dynamics.mass_matrix(viscous, q), dynamics.mass_matrix(plain, q))


def test_coulomb_friction_adds_fc_times_sign_of_qd(rng):
    block = random_chain_params(rng, 3, 'modified', (0, 0, 1))
    fc = rng.uniform(0.5, 3.0, size=3)
    plain = RobotModel.from_params(block)
    coulomb = RobotModel.from_params(dict(block, coulomb_friction=fc.tolist()))
    q, qd, qdd = random_state(rng, 3, size=6)
    qd[0, 1] = 0.0                                   # no friction at rest
    np.testing.assert_allclose(dynamics.inverse_dynamics(coulomb, q, qd, qdd)
                               - dynamics.inverse_dynamics(plain, q, qd, qdd),
                               fc * np.sign(qd), rtol=1e-12, atol=1e-12)
    assert dynamics.friction_torques(coulomb, qd)[0, 1] == 0.0


def test_armature_adds_armature_times_qdd_and_nothing_else(rng):
    block = random_chain_params(rng, 4, 'standard', (1, 0, 0, 1))
    k = rng.uniform(0.05, 1.0, size=4)
    plain = RobotModel.from_params(block)
    rotor = RobotModel.from_params(dict(block, armature=k.tolist()))
    q, qd, qdd = random_state(rng, 4, size=6)
    np.testing.assert_allclose(dynamics.inverse_dynamics(rotor, q, qd, qdd)
                               - dynamics.inverse_dynamics(plain, q, qd, qdd), k * qdd,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dynamics.mass_matrix(rotor, q) - dynamics.mass_matrix(plain, q),
                               np.broadcast_to(np.diag(k), (6, 4, 4)), atol=1e-12)
    np.testing.assert_allclose(dynamics.bias_forces(rotor, q, qd),
                               dynamics.bias_forces(plain, q, qd), atol=1e-12)


def test_gravity_torques_are_linear_in_the_gravity_vector(rng):
    block = random_chain_params(rng, 5, 'standard', (0, 1, 0, 0, 1))
    g1, g2 = rng.normal(size=3), rng.normal(size=3)
    q, _, _ = random_state(rng, 5, size=4)

    def gravity(g):
        return dynamics.gravity_torques(RobotModel.from_params(dict(block, gravity=list(g))), q)

    np.testing.assert_allclose(gravity(2.0 * g1 - 3.0 * g2), 2.0 * gravity(g1)
                               - 3.0 * gravity(g2), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gravity(np.zeros(3)), 0.0, atol=0.0)


def test_static_payload_equals_the_wrench_of_holding_its_weight(rng):
    """At rest, a payload of mass m with centre c (last link frame) costs the same efforts
    as the tip exerting the holding force f = −m g on its environment at c: wrench
    [Rᵀf; c × Rᵀf] in the last link frame (the documented wrench convention)."""
    block = random_chain_params(rng, 5, 'modified', (0, 1, 0, 0, 1))
    bare = RobotModel.from_params(block)
    m, c = 2.5, np.array([0.05, -0.1, 0.2])
    loaded = bare.with_payload(m, c, np.zeros((3, 3)))
    q, _, _ = random_state(rng, 5, size=4)
    zero = np.zeros_like(q)
    R = dynamics.forward_kinematics(bare, q)[:, -1, :3, :3]
    f = np.einsum('bji,j->bi', R, -m * bare.gravity)
    wrench = np.hstack((f, np.cross(c, f)))
    np.testing.assert_allclose(dynamics.gravity_torques(loaded, q),
                               dynamics.inverse_dynamics(bare, q, zero, zero, wrench=wrench),
                               rtol=1e-10, atol=1e-10)


def test_with_payload_equals_a_model_built_with_that_payload(rng):
    block = random_chain_params(rng, 4, 'standard', (0, 0, 1, 0), payload=True)
    built = RobotModel.from_params(block)
    bare = RobotModel.from_params({k: v for k, v in block.items() if k != 'payload'})
    pl = block['payload']
    copied = bare.with_payload(pl['mass'], pl['com'], pl['inertia'])
    q, qd, qdd = random_state(rng, 4, size=5)
    np.testing.assert_allclose(dynamics.inverse_dynamics(copied, q, qd, qdd),
                               dynamics.inverse_dynamics(built, q, qd, qdd), atol=1e-12)
    assert bare.payload.mass == 0.0                  # the original is unchanged
    assert np.max(np.abs(dynamics.inverse_dynamics(bare, q, qd, qdd)
                         - dynamics.inverse_dynamics(built, q, qd, qdd))) > 1e-3


def test_vertical_prismatic_joint_at_rest_carries_the_weight_of_everything_after_it(rng):
    """Joint 1 slides along z_0 (vertical); at rest τ_1 = Σ m · |g|."""
    for convention in ('standard', 'modified'):
        block = random_chain_params(rng, 4, convention, (1, 0, 1, 0), payload=True)
        if convention == 'modified':
            block['alpha'][0] = 0.0                  # modified row 1: z_1 parallel to z_0
        model = RobotModel.from_params(block)
        q, _, _ = random_state(rng, 4, size=3)
        total = sum(block['mass']) + block['payload']['mass']
        np.testing.assert_allclose(dynamics.gravity_torques(model, q)[:, 0], total * 9.81,
                                   rtol=1e-12)


def test_first_joint_about_the_vertical_feels_no_gravity(rng):
    """A revolute joint 1 about z_0 with gravity along −z_0 has G_1 = 0."""
    model = _model(rng, convention='standard', mask=(0, 1, 0, 0, 1), payload=True)
    q, _, _ = random_state(rng, 5, size=10)
    np.testing.assert_allclose(dynamics.gravity_torques(model, 3.0 * q)[:, 0], 0.0,
                               atol=1e-12)
    assert np.max(np.abs(dynamics.gravity_torques(model, 3.0 * q)[:, 1:])) > 1e-2


# ------------------------------------------------------------------ batches


def _calls(q, qd, qdd, tau, w):
    """Every public function of dynamics with its arguments (q … w batched or not)."""
    return {
        'inverse_dynamics': (q, qd, qdd, w),
        'mass_matrix': (q,),
        'bias_forces': (q, qd),
        'gravity_torques': (q,),
        'forward_dynamics': (q, qd, tau, w),
        'forward_dynamics_mass_matrix': (q, qd, tau, w),
        'forward_kinematics': (q,),
        'jacobian': (q,),
        'kinetic_energy': (q, qd),
        'potential_energy': (q,),
        'friction_torques': (qd,),
    }


def test_every_public_dynamics_function_is_covered_by_the_batch_test():
    assert set(_calls(*[None] * 5)) == set(dynamics.__all__)


@pytest.mark.parametrize('name', sorted(dynamics.__all__))
@pytest.mark.parametrize('convention', ['standard', 'modified'])
def test_batch_results_equal_per_sample_results(rng, dynamics_backend, name, convention):
    model = _model(rng, convention=convention, mask=(0, 1, 0, 0, 1), friction=True,
                   armature=True, payload=True)
    B = 7
    q, qd, qdd = random_state(rng, model.n, size=B)
    tau = rng.normal(size=(B, model.n)) * 10.0
    w = rng.normal(size=(B, 6))
    function = getattr(dynamics, name)
    batch = function(model, *_calls(q, qd, qdd, tau, w)[name])
    for b in range(B):
        single = function(model, *_calls(q[b], qd[b], qdd[b], tau[b], w[b])[name])
        assert np.shape(single) == np.shape(batch)[1:]
        np.testing.assert_allclose(batch[b], single, rtol=1e-13, atol=1e-13)


def test_single_state_broadcasts_against_a_batch(rng):
    model = _model(rng, convention='standard', mask=(0, 1, 0))
    q, qd, qdd = random_state(rng, 3, size=4)
    batch = dynamics.inverse_dynamics(model, q[0], qd, qdd[0])
    for b in range(4):
        np.testing.assert_allclose(batch[b], dynamics.inverse_dynamics(model, q[0], qd[b],
                                                                       qdd[0]), rtol=1e-13)


def test_wrong_state_shapes_raise_value_error_naming_the_argument(rng):
    model = _model(rng, convention='standard', mask=(0, 0, 0))
    with pytest.raises(ValueError, match='qd'):
        dynamics.inverse_dynamics(model, np.zeros(3), np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match='batch sizes'):
        dynamics.inverse_dynamics(model, np.zeros((2, 3)), np.zeros((3, 3)), np.zeros(3))
    with pytest.raises(ValueError, match='wrench'):
        dynamics.inverse_dynamics(model, np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(5))


@pytest.mark.parametrize('backend', ['generated', 'reference', 'numba'])
def test_with_gravity_equals_a_model_built_with_that_gravity(rng, backend):
    if backend == 'numba':
        pytest.importorskip('numba')
    block = random_chain_params(rng, 5, 'modified', (0, 1, 0, 0, 0), friction=True,
                                armature=True, payload=True)
    original = RobotModel.from_params(block)
    q, qd, qdd = random_state(rng, 5, size=4)
    tau = qdd * 7.0
    with_backend(backend, dynamics.inverse_dynamics, original, q[0], qd[0], qdd[0])
    for gravity in ([0.0, 0.0, 0.0], [1.5, -2.0, -9.0]):
        copied = original.with_gravity(gravity)     # after `original` made its kernels
        built = RobotModel.from_params(dict(block, gravity=gravity))
        assert copied.gravity.tolist() == gravity and copied.to_params() == built.to_params()
        for function, args in ((dynamics.inverse_dynamics, (q, qd, qdd)),
                               (dynamics.gravity_torques, (q,)),
                               (dynamics.forward_dynamics, (q, qd, tau))):
            for sample in (slice(None), 0):         # a batch, and one state
                inputs = [a[sample] for a in args]
                np.testing.assert_allclose(
                    with_backend(backend, function, copied, *inputs),
                    with_backend(backend, function, built, *inputs), rtol=1e-12, atol=1e-12)
    assert original.gravity.tolist() == [0.0, 0.0, -9.81]   # the original is unchanged
    np.testing.assert_allclose(                             # and still uses its own code
        with_backend(backend, dynamics.inverse_dynamics, original, q[0], qd[0], qdd[0]),
        with_backend('reference', dynamics.inverse_dynamics, original, q[0], qd[0], qdd[0]),
        rtol=1e-10, atol=1e-10)


def test_without_gravity_inverse_dynamics_is_the_full_one_less_the_gravity_torques(rng):
    """What compensate_gravity: false sends: τ − g(q), in one Newton–Euler call; a payload
    set afterwards (the controller's live parameter) keeps gravity off."""
    block = random_chain_params(rng, 6, 'standard', friction=True, payload=True)
    model = RobotModel.from_params(block)
    weightless = model.with_gravity([0.0, 0.0, 0.0]).with_payload(2.0, [0.0, 0.0, 0.1])
    loaded = model.with_payload(2.0, [0.0, 0.0, 0.1])
    q, qd, qdd = random_state(rng, 6, size=6)
    np.testing.assert_allclose(dynamics.inverse_dynamics(weightless, q, qd, qdd),
                               dynamics.inverse_dynamics(loaded, q, qd, qdd)
                               - dynamics.gravity_torques(loaded, q), rtol=1e-10, atol=1e-10)
    assert not np.any(dynamics.gravity_torques(weightless, q))
