"""The Lagrange–Euler reference (robot_dynamics.lagrange) against Newton–Euler and against
the identities of Lagrangian mechanics.

`lagrange` reads the DH table and the inertials directly (never `model.chain`), so
agreement with `dynamics` checks the chain construction of `RobotModel` as well as the
recursions (the two formulations agree to ~1e-14, as [TML] proves they must).
"""

import math
import os

import numpy as np
import pytest
from conftest import preset_paths, random_chain_params, random_inertia, random_state

from robot_dynamics import dynamics
from robot_dynamics.dynamics import lagrange
from robot_dynamics.model import RobotModel

MASKS = [(0, 0, 0, 0, 0, 0), (0, 1, 0, 0, 1, 0), (1, 0, 1, 1), (1, 1, 0), (0, 0, 1, 0, 0, 0, 1),
         (1,), (0,)]


def _model(rng, convention, mask, **kwargs):
    return RobotModel.from_params(random_chain_params(rng, len(mask), convention, mask,
                                                      **kwargs))


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MASKS)
def test_newton_euler_equals_lagrange_euler_on_random_chains(rng, dynamics_backend, convention,
                                                             mask):
    model = _model(rng, convention, mask, friction=True, armature=True, payload=True)
    assert np.all(np.abs(model.theta) > 0.0) and np.all(np.abs(model.d) > 0.0)
    for _ in range(4):
        q, qd, qdd = random_state(rng, model.n)
        w = rng.normal(size=6)
        ne = dynamics.inverse_dynamics(model, q, qd, qdd, wrench=w)
        le = lagrange.inverse_dynamics(model, q, qd, qdd, wrench=w)
        np.testing.assert_allclose(le, ne, rtol=0, atol=1e-10)


@pytest.mark.filterwarnings('ignore::robot_dynamics.model.ModelWarning')  # textbook data
@pytest.mark.parametrize('path', preset_paths(), ids=os.path.basename)
def test_newton_euler_equals_lagrange_euler_on_dh_preset(rng, dynamics_backend, path):
    model = RobotModel.from_yaml(path)
    if model.dh_convention is None:
        pytest.skip('not a DH preset (the Lagrange reference reads the DH table)')
    for _ in range(3):
        q, qd, qdd = random_state(rng, model.n)
        np.testing.assert_allclose(lagrange.inverse_dynamics(model, q, qd, qdd),
                                   dynamics.inverse_dynamics(model, q, qd, qdd),
                                   rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MASKS)
def test_lagrange_terms_equal_newton_euler_terms(rng, convention, mask):
    """D = strobed M, h + G = bias forces (friction off), G = gravity torques."""
    model = _model(rng, convention, mask, armature=True, payload=True)
    q, qd, _ = random_state(rng, model.n)
    np.testing.assert_allclose(lagrange.mass_matrix(model, q), dynamics.mass_matrix(model, q),
                               rtol=0, atol=1e-11)
    np.testing.assert_allclose(lagrange.gravity(model, q), dynamics.gravity_torques(model, q),
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        lagrange.coriolis_centrifugal(model, q, qd) + lagrange.gravity(model, q),
        dynamics.bias_forces(model, q, qd), rtol=0, atol=1e-10)
    assert lagrange.potential_energy(model, q) == pytest.approx(
        dynamics.potential_energy(model, q), abs=1e-10)
    assert lagrange.kinetic_energy(model, q, qd) == pytest.approx(
        dynamics.kinetic_energy(model, q, qd), abs=1e-10)


def test_payload_changes_the_torques_and_both_formulations_see_it(rng):
    block = random_chain_params(rng, 4, 'standard', (0, 1, 0, 0), payload=True)
    with_load = RobotModel.from_params(block)
    without = RobotModel.from_params({k: v for k, v in block.items() if k != 'payload'})
    q, qd, qdd = random_state(rng, 4)
    difference = lagrange.inverse_dynamics(with_load, q, qd, qdd) \
        - lagrange.inverse_dynamics(without, q, qd, qdd)
    assert np.max(np.abs(difference)) > 1e-2
    np.testing.assert_allclose(difference, dynamics.inverse_dynamics(with_load, q, qd, qdd)
                               - dynamics.inverse_dynamics(without, q, qd, qdd), atol=1e-10)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('mask', MASKS)
def test_lagrange_forward_kinematics_equals_dynamics_forward_kinematics(rng, convention, mask):
    model = _model(rng, convention, mask)
    q, _, _ = random_state(rng, model.n)
    np.testing.assert_allclose(lagrange.forward_kinematics(model, q),
                               dynamics.forward_kinematics(model, q), rtol=0, atol=1e-12)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('joint_type', ['revolute', 'prismatic'])
def test_link_transform_derivatives_match_finite_differences(rng, convention, joint_type):
    model = _model(rng, convention, (0, 1, 0) if joint_type == 'revolute' else (1, 0, 1))
    q, _, _ = random_state(rng, model.n)
    T, dT, ddT = lagrange.link_transforms(model, q)
    h = 1e-5
    for i in range(model.n):
        e = np.zeros(model.n)
        e[i] = h
        Tp = lagrange.link_transforms(model, q + e)[0][i]
        Tm = lagrange.link_transforms(model, q - e)[0][i]
        np.testing.assert_allclose(dT[i], (Tp - Tm) / (2 * h), atol=1e-9)
        np.testing.assert_allclose(ddT[i], (Tp - 2 * T[i] + Tm) / h ** 2, atol=1e-5)


def test_link_transform_follows_the_dh_formula_of_each_convention():
    """Standard: Rz(θ) Tz(d) Tx(a) Rx(α); modified: Rx(α) Tx(a) Rz(θ) Tz(d), with the
    doc/conventions.md offsets θ = q + theta (revolute), d = q + d (prismatic); checked on
    points."""
    a, alpha, d, theta, q = 0.3, 0.7, 0.2, -0.4, 0.9
    params = dict(joint_types=['revolute'], a=[a], alpha=[alpha], d=[d], theta=[theta],
                  mass=[1.0], com=[0.0] * 3, inertia=[0.1, 0, 0, 0.1, 0, 0.1])
    point = np.array([0.1, -0.2, 0.3, 1.0])

    def rz(t, p):
        return np.array([p[0] * math.cos(t) - p[1] * math.sin(t),
                         p[0] * math.sin(t) + p[1] * math.cos(t), p[2], 1.0])

    def rx(t, p):
        return np.array([p[0], p[1] * math.cos(t) - p[2] * math.sin(t),
                         p[1] * math.sin(t) + p[2] * math.cos(t), 1.0])

    def shift(x, z, p):
        return p + np.array([x, 0.0, z, 0.0])

    std = RobotModel.from_params(dict(params, dh_convention='standard'))
    expected = rz(theta + q, shift(0.0, d, shift(a, 0.0, rx(alpha, point))))
    np.testing.assert_allclose(lagrange.link_transforms(std, [q])[0][0] @ point, expected)
    mod = RobotModel.from_params(dict(params, dh_convention='modified'))
    expected = rx(alpha, shift(a, 0.0, rz(theta + q, shift(0.0, d, point))))
    np.testing.assert_allclose(lagrange.link_transforms(mod, [q])[0][0] @ point, expected)
    pris = RobotModel.from_params(dict(params, dh_convention='standard',
                                       joint_types=['prismatic']))
    expected = rz(theta, shift(0.0, d + q, shift(a, 0.0, rx(alpha, point))))
    np.testing.assert_allclose(lagrange.link_transforms(pris, [q])[0][0] @ point, expected)


def test_pseudo_inertia_is_the_second_moment_of_a_point_cloud(rng):
    """[LEE] (2.18)/(2.22): J = Σ m_k r̃_k r̃_kᵀ, r̃ = (r, 1), for a body made of point
    masses, from its mass, centre of mass and centroidal inertia computed directly."""
    points = rng.normal(size=(12, 3)) * 0.2 + rng.normal(size=3)
    masses = rng.uniform(0.1, 1.0, size=12)
    m = masses.sum()
    c = masses @ points / m
    r = points - c
    inertia = sum(mk * (rk @ rk * np.eye(3) - np.outer(rk, rk)) for mk, rk in zip(masses, r))
    homogeneous = np.hstack((points, np.ones((12, 1))))
    expected = np.einsum('k,ki,kj->ij', masses, homogeneous, homogeneous)
    np.testing.assert_allclose(lagrange.pseudo_inertia(m, c, inertia), expected, atol=1e-12)


def test_pseudo_inertia_round_trips_to_the_centroidal_inertia(rng):
    """[LEE] (2.21) corrected (m_i restored; doc/references.md): I = Tr(J_c)E − J_c,
    J_c = J^r − m r̄r̄ᵀ."""
    m = 2.3
    c = rng.normal(size=3)
    inertia = random_inertia(rng, m)
    J = lagrange.pseudo_inertia(m, c, inertia)
    Jc = J[:3, :3] - m * np.outer(c, c)
    np.testing.assert_allclose(np.trace(Jc) * np.eye(3) - Jc, inertia, atol=1e-12)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
def test_coriolis_tensor_equals_christoffel_symbols_of_the_mass_matrix(rng, convention):
    """C^i_jk = ½(∂M_ij/∂q_k + ∂M_ik/∂q_j − ∂M_jk/∂q_i) ([TML] (2.11) corrected), and
    C^i_jk = C^i_kj."""
    model = _model(rng, convention, (0, 1, 0, 0), payload=True)
    q, _, _ = random_state(rng, model.n)
    h = 1e-6
    dM = np.zeros((model.n,) * 3)                       # dM[i, j, k] = ∂M_ij/∂q_k
    for k in range(model.n):
        e = np.zeros(model.n)
        e[k] = h
        dM[:, :, k] = (lagrange.mass_matrix(model, q + e)
                       - lagrange.mass_matrix(model, q - e)) / (2 * h)
    christoffel = 0.5 * (dM + np.swapaxes(dM, 1, 2) - np.transpose(dM, (2, 0, 1)))
    C = lagrange.coriolis_tensor(model, q)
    np.testing.assert_allclose(C, np.swapaxes(C, 1, 2), atol=1e-12)
    np.testing.assert_allclose(C, christoffel, atol=1e-7)


def test_mass_matrix_derivative_minus_twice_coriolis_matrix_is_skew_symmetric(rng):
    """Ṁ − 2C(q, q̇) is skew-symmetric for the Christoffel C_ij = Σ_k C^i_jk q̇_k."""
    model = _model(rng, 'modified', (1, 0, 0, 1, 0))
    q, qd, _ = random_state(rng, model.n)
    h = 1e-6
    Mdot = (lagrange.mass_matrix(model, q + h * qd)
            - lagrange.mass_matrix(model, q - h * qd)) / (2 * h)
    C = np.einsum('ijk,k->ij', lagrange.coriolis_tensor(model, q), qd)
    N = Mdot - 2.0 * C
    np.testing.assert_allclose(N, -N.T, atol=1e-7)


@pytest.mark.parametrize('convention', ['standard', 'modified'])
def test_lagrange_gravity_is_the_gradient_of_its_potential_energy(rng, convention):
    model = _model(rng, convention, (0, 1, 0, 1), payload=True)
    q, _, _ = random_state(rng, model.n)
    h = 1e-6
    grad = [(lagrange.potential_energy(model, q + h * e)
             - lagrange.potential_energy(model, q - h * e)) / (2 * h) for e in np.eye(model.n)]
    np.testing.assert_allclose(lagrange.gravity(model, q), grad, atol=1e-7)


def test_lagrange_rejects_batches_and_wrong_lengths(rng):
    model = _model(rng, 'standard', (0, 0))
    with pytest.raises(ValueError, match='qd'):
        lagrange.inverse_dynamics(model, np.zeros(2), np.zeros((3, 2)), np.zeros(2))
    with pytest.raises(ValueError, match='q'):
        lagrange.mass_matrix(model, np.zeros(3))
    with pytest.raises(ValueError, match='wrench'):
        lagrange.inverse_dynamics(model, np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(5))
