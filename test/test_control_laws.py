"""The compliant control laws (robot_dynamics.control): gravity compensation, joint and
Cartesian impedance, the effort rate limiter. Each test checks a property of the closed loop
or of the law against ground truth derived apart from the law: the potential energy's
gradient, the static equilibrium K Δq = Jᵀ F, F / K, the eigenvalues of the frozen linear
loop, the self-motion manifold of the Panda. Loops are closed with the package's own
integrator (`simulation.simulate_closed_loop`, RK4, 1 kHz); simulated time only."""

import math

import numpy as np
import pytest

from robot_dynamics import dynamics, simulation
from robot_dynamics.dynamics import kinematics
from robot_dynamics.control import (CartesianImpedanceLaw, CartesianTarget, ComputedTorqueLaw,
                                    EffortRateLimiter, GravityCompensationLaw,
                                    JointImpedanceLaw, validate_target)
from robot_dynamics.control._terms import (coriolis_product, damping_from_ratio,
                                           velocity_product)
from robot_dynamics.control.cartesian_impedance import orientation_error
from robot_dynamics.model import RobotModel

from conftest import REPO

DT = 1e-3
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])     # a Panda pose away from limits
ZERO = np.zeros(7)
TOOL = np.array([[0.0, -1.0, 0.0, 0.01], [1.0, 0.0, 0.0, -0.02], [0.0, 0.0, 1.0, 0.107],
                 [0.0, 0.0, 0.0, 1.0]])                    # a flange-like offset


@pytest.fixture(scope='module')
def panda():
    return RobotModel.from_yaml(f'{REPO}/config/panda.yaml')


@pytest.fixture(scope='module')
def panda_with_friction(panda):
    """The Panda with viscous and Coulomb friction, two joints of other laws."""
    return RobotModel.from_params(dict(
        panda.to_params(), viscous_friction=[0.5, 0.4, 0.3, 0.3, 0.1, 0.1, 0.05],
        coulomb_friction=[2.0, 1.5, 1.2, 1.0, 0.5, 0.4, 0.3],
        friction_model=['coulomb', 'coulomb', 'stribeck', 'coulomb', 'asymmetric', 'tanh',
                        'coulomb'],
        stribeck_friction=[0.0, 0.0, 0.8, 0.0, 0.0, 0.0, 0.0],
        coulomb_friction_negative=[0.0, 0.0, 0.0, 0.0, 0.7, 0.0, 0.0]))


def closed_loop(model, law, duration, q0=Q0, wrench=None, tool=None):
    """Simulate τ = law(t, q, q̇) + Jᵀ(q) F(t) (F = wrench(t) on the tool, base frame)."""
    def controller(t, q, qd):
        tau = law(t, q, qd)
        if wrench is not None:
            tau = tau + kinematics.jacobian(model, q, tool).T @ wrench(t)
        return tau
    z = np.zeros(model.n)
    return simulation.simulate_closed_loop(model, controller, lambda t: (q0, z, z), duration,
                                           DT, DT, q0, z)


def rotation_vector(R):
    """log(R) by the closed form (angle from the trace, axis from the skew part)."""
    angle = math.acos(max(-1.0, min(1.0, (np.trace(R) - 1.0) / 2.0)))
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return w * (angle / (2.0 * math.sin(angle))) if angle > 1e-9 else 0.5 * w


# ---------------------------------------------------------------------- gravity compensation


def test_gravity_compensation_at_rest_is_the_potential_energy_gradient(panda):
    """At q̇ = 0, τ = ∂V/∂q (central differences of dynamics.potential_energy)."""
    law = GravityCompensationLaw(panda, damping=3.0)
    rng = np.random.default_rng(5)
    for q in rng.uniform(panda.position_min, panda.position_max, (5, 7)):
        h = 1e-6
        grad = np.array([(dynamics.potential_energy(panda, q + h * e)
                          - dynamics.potential_energy(panda, q - h * e)) / (2 * h)
                         for e in np.eye(7)])
        np.testing.assert_allclose(law.effort(q, ZERO, None, None, None), grad, atol=1e-6)


def test_compensated_friction_is_continuous_at_rest_and_the_model_law_away(panda_with_friction):
    """Across q̇ = 0 the compensation moves by at most its slope bound f/v_ε · Δq̇ (no jump);
    at |q̇| ≥ 20 v_ε it equals dynamics.friction_torques."""
    model = panda_with_friction
    law = GravityCompensationLaw(model, friction_smoothing=0.01)
    g = dynamics.gravity_torques(model, Q0)
    eps = 1e-7
    jump = law.effort(Q0, np.full(7, eps)) - law.effort(Q0, np.full(7, -eps))
    # tanh(x/v) has slope 1/v at 0: the Coulomb (either side's level) and Stribeck parts
    # move by at most their level · 2ε/v_ε, the viscous part by b · 2ε
    coulomb = np.maximum(model.coulomb_friction, model.coulomb_friction_negative)
    bound = (coulomb + model.stribeck_friction) * 2 * eps / 0.01 + model.viscous_friction * 2 * eps
    assert np.all(np.abs(jump) <= bound * (1 + 1e-6))
    plain = dynamics.friction_torques(model, np.full(7, eps)) - \
        dynamics.friction_torques(model, np.full(7, -eps))
    assert np.max(np.abs(plain)) > 1.0       # the model's own law does jump
    for v in (0.2, -0.2, 0.5):
        qd = np.full(7, v)
        np.testing.assert_allclose(law.effort(Q0, qd) - g,
                                   dynamics.friction_torques(model, qd), atol=1e-6)


def test_gravity_compensated_panda_at_rest_drifts_less_than_a_milliradian_in_ten_seconds(panda):
    run = closed_loop(panda, lambda t, q, qd: GravityCompensationLaw(panda).effort(q, qd), 10.0)
    assert np.max(np.abs(run.q - Q0)) < 1e-3


def test_a_pushed_gravity_compensated_panda_comes_to_rest_and_stays(panda):
    """D = 5 N m s/rad, 10 N at the tool for 0.3 s: the arm moves, then within 3 s of the
    release every joint is below 1 mrad/s and stays within 1 mrad for the next 5 s."""
    law = GravityCompensationLaw(panda, damping=5.0)
    push = np.array([0.0, 10.0, 0.0, 0.0, 0.0, 0.0])
    run = closed_loop(panda, lambda t, q, qd: law.effort(q, qd), 8.3,
                      wrench=lambda t: push if t < 0.3 - 1e-9 else 0.0 * push)
    settled = int(round(3.3 / DT))
    assert np.max(np.abs(run.q[settled] - Q0)) > 0.05          # the push moved it
    assert np.max(np.abs(run.qd[settled:])) < 1e-3
    assert np.max(np.abs(run.q[settled:] - run.q[settled])) < 1e-3


# ---------------------------------------------------------------------- joint impedance


def test_joint_impedance_deflects_by_the_static_balance_under_a_wrench_at_the_tool(panda):
    """At rest under a constant wrench F at the tool, K (q − q_d) = J(q)ᵀ F within 1 %."""
    K = np.array([300.0, 200.0, 250.0, 150.0, 60.0, 40.0, 20.0])
    law = JointImpedanceLaw(panda, K, damping_ratio=1.0)
    F = np.array([12.0, -8.0, 10.0, 0.5, -0.4, 0.6])
    run = closed_loop(panda, lambda t, q, qd: law.effort(q, qd, Q0, ZERO, ZERO), 3.0,
                      wrench=lambda t: F)
    q = run.q[-1]
    assert np.max(np.abs(run.qd[-1])) < 1e-4
    balance = kinematics.jacobian(panda, q).T @ F
    np.testing.assert_allclose(K * (q - Q0), balance, atol=0.01 * np.max(np.abs(balance)))
    assert np.max(np.abs(q - Q0)) > 0.01


def test_joint_damping_from_a_ratio_gives_every_frozen_mode_that_ratio(panda):
    """The eigenvalues of M ë + D ė + K e = 0 (M at a random pose, D = 2ζ M # K) have
    −Re λ / |λ| = ζ (ζ < 1) or are real and repeated per mode (ζ = 1)."""
    rng = np.random.default_rng(3)
    q = rng.uniform(panda.position_min, panda.position_max)
    K = rng.uniform(20.0, 400.0, 7)
    M = dynamics.mass_matrix(panda, q)
    for zeta in (0.3, 0.7):
        D = JointImpedanceLaw(panda, K, damping_ratio=zeta).damping_matrix(q)
        Minv = np.linalg.inv(M)
        A = np.block([[np.zeros((7, 7)), np.eye(7)], [-Minv @ np.diag(K), -Minv @ D]])
        lam = np.linalg.eigvals(A)
        np.testing.assert_allclose(-lam.real / np.abs(lam), zeta, atol=1e-6)
    D = damping_from_ratio(M, K, 1.0)
    assert np.all(np.linalg.eigvalsh(D) > 0.0)
    np.testing.assert_allclose(D, D.T)


def test_christoffel_coriolis_makes_mdot_minus_two_c_skew_symmetric(panda):
    """vᵀ (Ṁ − 2 C(q, q̇)) v = 0 with Ṁ by central differences of the mass matrix, and
    C(q, q̇) q̇ equals the Newton–Euler velocity product."""
    rng = np.random.default_rng(8)
    q, qd = rng.uniform(-1.5, 1.5, 7), rng.normal(size=7)
    h = 1e-6
    Mdot = (dynamics.mass_matrix(panda, q + h * qd) - dynamics.mass_matrix(panda, q - h * qd)) \
        / (2 * h)
    C = np.column_stack([coriolis_product(panda, q, qd, e) for e in np.eye(7)])
    S = Mdot - 2.0 * C
    np.testing.assert_allclose(S, -S.T, atol=1e-6)
    np.testing.assert_allclose(C @ qd, velocity_product(panda, q, qd), atol=1e-10)
    np.testing.assert_allclose(
        velocity_product(panda, q, qd),
        dynamics.inverse_dynamics(panda, q, qd, ZERO) - dynamics.gravity_torques(panda, q),
        atol=1e-10)


def test_joint_impedance_with_inverse_dynamics_feedforward_tracks_a_motion_exactly(panda):
    """Exact model, 'inverse_dynamics' feed-forward, start on the reference: the error
    stays below 0.1 mrad (no feed-forward: above 1 mrad, so the term matters)."""
    w = 2 * math.pi * 0.5
    amp = np.array([0.3, 0.2, 0.3, 0.25, 0.4, 0.3, 0.5])

    def ref(t):
        s, c = math.sin(w * t), math.cos(w * t)
        return Q0 + amp * s, amp * w * c, -amp * w * w * s

    def run(ff):
        law = JointImpedanceLaw(panda, 200.0, damping_ratio=1.0, feedforward=ff)
        return simulation.simulate_closed_loop(
            panda, lambda t, q, qd: law.effort(q, qd, *ref(t)), ref, 1.0, DT, DT, Q0,
            ref(0.0)[1])
    assert np.max(np.abs(run('inverse_dynamics').error)) < 1e-4
    assert np.max(np.abs(run('none').error)) > 1e-3


# ---------------------------------------------------------------------- Cartesian impedance


def cartesian(panda, **options):
    parameters = dict(stiffness=[1000.0, 1000.0, 1000.0, 50.0, 50.0, 50.0],
                      nullspace_posture=Q0, nullspace_stiffness=10.0)
    parameters.update(options)
    return CartesianImpedanceLaw(panda, **parameters)


def test_cartesian_impedance_displaces_by_force_over_stiffness(panda):
    """A constant force and moment on the tool: p − p_d = f / K_t and the rotation from the
    target to the tool (closed-form log) = m / K_r, within 2 % per axis."""
    K = np.array([1000.0, 800.0, 1200.0, 60.0, 50.0, 40.0])
    law = cartesian(panda, stiffness=K, tool=TOOL)
    position, quaternion = law.pose(Q0)
    target = CartesianTarget(position, quaternion)
    F = np.array([6.0, -5.0, 7.0, 0.6, -0.5, 0.4])
    run = closed_loop(panda, lambda t, q, qd: law.effort(q, qd, target), 3.0,
                      wrench=lambda t: F, tool=TOOL)
    T = kinematics.tool_pose(panda, run.q[-1], TOOL)
    R_d = kinematics.matrix_from_quaternion(quaternion)
    displacement = np.concatenate([T[:3, 3] - position, rotation_vector(T[:3, :3] @ R_d.T)])
    np.testing.assert_allclose(displacement, F / K, rtol=0.02)


def test_nullspace_posture_is_reached_while_the_tool_stays(panda):
    """A posture on the self-motion manifold of the start pose (found by following J's
    null vector with Newton corrections): the joints settle to it, the tool moves < 1 mm."""
    q1 = Q0.copy()
    T0 = kinematics.tool_pose(panda, Q0)
    for _ in range(60):                    # 0.3 rad of joint 1 along the self-motion
        J = kinematics.jacobian(panda, q1)
        null = np.linalg.svd(J)[2][-1]
        q1 = q1 + 0.005 * null / null[0]
        for _ in range(3):
            T = kinematics.tool_pose(panda, q1)
            err = np.concatenate([T0[:3, 3] - T[:3, 3], rotation_vector(T0[:3, :3] @ T[:3, :3].T)])
            q1 = q1 + np.linalg.pinv(kinematics.jacobian(panda, q1)) @ err
    assert abs(q1[0] - Q0[0]) > 0.25
    np.testing.assert_allclose(kinematics.tool_pose(panda, q1), T0, atol=1e-9)
    law = cartesian(panda, nullspace_posture=q1, nullspace_stiffness=20.0)
    target = CartesianTarget(*law.pose(Q0))
    run = closed_loop(panda, lambda t, q, qd: law.effort(q, qd, target), 4.0)
    assert np.max(np.abs(run.q[-1] - q1)) < 5e-3
    tip = kinematics.tool_pose(panda, run.q)[:, :3, 3]
    assert np.max(np.linalg.norm(tip - T0[:3, 3], axis=1)) < 1e-3


def test_a_five_centimetre_step_of_the_target_is_reached_within_a_millimetre(panda):
    law = cartesian(panda)
    position, quaternion = law.pose(Q0)
    target = CartesianTarget(position + np.array([0.03, -0.03, 0.0283]), quaternion)
    assert np.linalg.norm(target.position - position) == pytest.approx(0.05, abs=1e-3)
    run = closed_loop(panda, lambda t, q, qd: law.effort(q, qd, target), 2.0)
    assert np.linalg.norm(law.pose(run.q[-1])[0] - target.position) < 1e-3


def test_a_circle_is_tracked_within_three_millimetres_with_feedforward(panda):
    """10 cm diameter at 0.5 Hz, K = 1000 N/m, velocity and acceleration feed-forward,
    exact model: < 3 mm over the second second (after the start transient, the target
    moving at 0.16 m/s from rest); without feed-forward the error is larger."""
    radius, w = 0.05, 2 * math.pi * 0.5
    base = cartesian(panda)
    centre, quaternion = base.pose(Q0)
    centre = centre - np.array([radius, 0.0, 0.0])

    def target(t, ff=True):
        c, s = math.cos(w * t), math.sin(w * t)
        p = centre + radius * np.array([c, 0.0, s])
        v = radius * w * np.array([-s, 0.0, c, 0.0, 0.0, 0.0])
        a = radius * w * w * np.array([-c, 0.0, -s, 0.0, 0.0, 0.0])
        return CartesianTarget(p, quaternion, v if ff else None, a if ff else None)

    def error(ff):
        run = closed_loop(panda, lambda t, q, qd: base.effort(q, qd, target(t, ff)), 2.0)
        window = run.t >= 1.0
        tips = kinematics.tool_pose(panda, run.q[window])[:, :3, 3]
        goals = np.array([target(t).position for t in run.t[window]])
        return np.max(np.linalg.norm(tips - goals, axis=1))
    assert error(True) < 3e-3
    assert error(False) > 3e-3


def test_switching_at_rest_changes_the_effort_by_nothing(panda):
    """Bumpless start: a joint impedance with q_d = q and a Cartesian impedance whose
    target is the current pose both give g(q) (every feed-forward, with a tool)."""
    g = dynamics.gravity_torques(panda, Q0)
    for ff in ('none', 'coriolis', 'inverse_dynamics'):
        law = JointImpedanceLaw(panda, 100.0, feedforward=ff)
        np.testing.assert_allclose(law.effort(Q0, ZERO, Q0, ZERO, ZERO), g, atol=1e-12)
    law = cartesian(panda, tool=TOOL, nullspace_posture=None)
    p, quat = law.pose(Q0)
    np.testing.assert_allclose(law.effort(Q0, ZERO, CartesianTarget(p, quat)), g, atol=1e-9)
    np.testing.assert_allclose(law.effort(Q0, ZERO, CartesianTarget(p, quat, np.zeros(6),
                                                                    np.zeros(6))), g, atol=1e-9)
    assert np.max(np.abs(GravityCompensationLaw(panda).effort(Q0, ZERO) - g)) < 0.5


def test_operational_space_inertia_is_exact_away_from_singularities_and_finite_at_one(panda):
    law = cartesian(panda)
    J = kinematics.jacobian(panda, Q0)
    M = dynamics.mass_matrix(panda, Q0)
    exact = np.linalg.inv(J @ np.linalg.solve(M, J.T))
    np.testing.assert_allclose(law.task_inertia(Q0)[0], exact, rtol=1e-4,
                               atol=1e-4 * np.max(np.abs(exact)))
    stretched = np.array([0.0, 0.0, 0.0, -0.0698, 0.0, 0.0, 0.0])  # axes 1, 3, 5, 7 aligned
    Js = kinematics.jacobian(panda, stretched)
    assert np.linalg.svd(Js, compute_uv=False)[-1] < 0.1
    Lam = law.task_inertia(stretched)[0]
    assert np.all(np.isfinite(Lam))
    assert np.max(np.linalg.eigvalsh(Lam)) <= 1.0 / (2 * law.singular_damping) * (1 + 1e-9)
    p, quat = law.pose(stretched)
    tau = law.effort(stretched, np.full(7, 0.1),
                     CartesianTarget(p + 0.05, quat, np.ones(6), np.ones(6)))
    assert np.all(np.isfinite(tau))


def test_orientation_error_is_the_short_rotation_vector():
    rng = np.random.default_rng(2)
    for _ in range(20):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        angle = rng.uniform(0.0, math.pi - 1e-3)
        q_now = rng.normal(size=4)
        q_now /= np.linalg.norm(q_now)
        R = kinematics.matrix_from_quaternion(q_now)
        c, s = math.cos(angle), math.sin(angle)
        Kx = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        R_turn = np.eye(3) + s * Kx + (1 - c) * Kx @ Kx          # Rodrigues
        q_target = kinematics.quaternion_from_matrix(R_turn @ R)
        np.testing.assert_allclose(orientation_error(q_target, q_now), angle * axis, atol=1e-9)
        np.testing.assert_allclose(orientation_error(-q_target, q_now), angle * axis, atol=1e-9)
        np.testing.assert_allclose(orientation_error(q_target, -q_now), angle * axis, atol=1e-9)


def test_the_target_used_lies_within_the_step_limit_of_the_tool(panda):
    law = cartesian(panda, max_target_step=(0.1, 0.5))
    p, quat = law.pose(Q0)
    direction = np.array([2.0, -1.0, 2.0]) / 3.0
    turn = np.array([0.0, math.sin(0.6), 0.0, math.cos(0.6)])     # 1.2 rad about y
    from robot_dynamics.control.cartesian_impedance import quaternion_product
    far = CartesianTarget(p + 0.3 * direction, quaternion_product(turn, quat))
    limited = law.limited_target(Q0, far)
    np.testing.assert_allclose(limited.position, p + 0.1 * direction, atol=1e-12)
    np.testing.assert_allclose(orientation_error(limited.quaternion, quat), [0.0, 0.5, 0.0],
                               atol=1e-9)
    near = CartesianTarget(p + 0.05 * direction, quat)
    np.testing.assert_allclose(law.limited_target(Q0, near).position, near.position)
    unlimited = cartesian(panda, max_target_step=None)
    np.testing.assert_allclose(unlimited.limited_target(Q0, far).position, far.position)


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize('build, message', [
    (lambda m: JointImpedanceLaw(m, [100, 100, -1.0, 100, 100, 100, 100]),
     'joint_impedance.stiffness[2]: must be finite and >= 0, got -1.0'),
    (lambda m: JointImpedanceLaw(m, 100, damping_ratio=float('nan')),
     'joint_impedance.damping_ratio: must be finite'),
    (lambda m: JointImpedanceLaw(m, [100] * 6), 'joint_impedance.stiffness: expected 7 values'),
    (lambda m: JointImpedanceLaw(m, 100, damping=5, damping_ratio=1),
     'joint_impedance.damping and joint_impedance.damping_ratio'),
    (lambda m: JointImpedanceLaw(m, 100, feedforward='full'), 'joint_impedance.feedforward'),
    (lambda m: GravityCompensationLaw(m, damping=[1, 1, 1, 1, 1, -2, 1]),
     'gravity_compensation.damping[5]'),
    (lambda m: GravityCompensationLaw(m, friction_smoothing=0.0),
     'gravity_compensation.friction_smoothing: must be finite and > 0'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 5), 'cartesian.stiffness: expected 6'),
    (lambda m: CartesianImpedanceLaw(m, 1000.0), 'cartesian.stiffness: expected 6'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 3 + [50, float('inf'), 50]),
     'cartesian.stiffness[4]'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, damping_ratio=-0.5),
     'cartesian.damping_ratio'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, nullspace_posture=[0.0] * 6),
     'cartesian.nullspace_posture'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, nullspace_stiffness=-1.0),
     'cartesian.nullspace_stiffness[0]'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, max_target_step=(0.1, 0.0)),
     'cartesian.max_target_step[1]'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, tool=np.eye(3)), 'cartesian.tool'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, tool=2 * np.eye(4)), 'cartesian.tool'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, nullspace_damping=[1.0] * 6 + [-1.0]),
     'cartesian.nullspace_damping[6]'),
    (lambda m: CartesianImpedanceLaw(m, [1000] * 6, singular_damping=0.0),
     'cartesian.singular_damping'),
    (lambda m: ComputedTorqueLaw(m, [100.0] * 6 + [0.0], 20.0),
     'gains.kp[6]: must be finite and > 0'),
    (lambda m: EffortRateLimiter([10.0, -1.0], 0.001), 'effort_rate_limit[1]'),
    (lambda m: EffortRateLimiter(10.0, 0.0), 'period'),
])
def test_bad_parameters_are_refused_naming_the_parameter(panda, build, message):
    with pytest.raises(ValueError) as error:
        build(panda)
    assert message in str(error.value)


@pytest.mark.parametrize('fields, message', [
    (([0.1, float('nan'), 0.3], [0, 0, 0, 1]), 'target.position'),
    (([0.1, 0.2], [0, 0, 0, 1]), 'target.position'),
    (([0.1, 0.2, 0.3], [0, 0, 0, 1.01]), 'target.quaternion: not a unit quaternion'),
    (([0.1, 0.2, 0.3], [0, 0, float('inf'), 1]), 'target.quaternion'),
    (([0.1, 0.2, 0.3], [0, 0, 0, 1], [0.0] * 5 + [float('nan')]), 'target.velocity'),
    (([0.1, 0.2, 0.3], [0, 0, 0, 1], None, [1.0] * 3), 'target.acceleration'),
])
def test_bad_targets_are_refused_naming_the_field(fields, message):
    with pytest.raises(ValueError) as error:
        validate_target(*fields)
    assert message in str(error.value)
    assert CartesianImpedanceLaw.validate_target is validate_target


def test_a_nearly_unit_quaternion_is_accepted_and_normalised():
    target = validate_target([0.1, 0.2, 0.3], [0.0, 0.0, 0.0, 1.0005])
    assert np.linalg.norm(target.quaternion) == pytest.approx(1.0, abs=1e-15)


# ---------------------------------------------------------------------- rate limit


def test_rate_limiter_bounds_the_change_both_ways_and_zero_means_no_limit():
    limiter = EffortRateLimiter([100.0, 0.0, 50.0], 0.01)      # 1, unlimited, 0.5 per period
    np.testing.assert_allclose(limiter.limit([0.0, 0.0, 0.0]), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(limiter.limit([10.0, 10.0, -10.0]), [1.0, 10.0, -0.5])
    np.testing.assert_allclose(limiter.limit([10.0, -10.0, -10.0]), [2.0, -10.0, -1.0])
    np.testing.assert_allclose(limiter.limit([-10.0, 0.0, 0.8]), [1.0, 0.0, -0.5])
    np.testing.assert_allclose(limiter.limit([1.5, 0.0, -0.2]), [1.5, 0.0, -0.2])   # within
    limiter.reset([5.0, 5.0, 5.0])
    np.testing.assert_allclose(limiter.limit([0.0, 0.0, 0.0]), [4.0, 0.0, 4.5])
    limiter.reset()
    np.testing.assert_allclose(limiter.limit([7.0, 7.0, 7.0]), [7.0, 7.0, 7.0])
    np.testing.assert_allclose(limiter.limit([0.0, 0.0, 0.0], dt=0.03), [4.0, 0.0, 5.5])


def test_a_ramp_through_the_rate_limiter_takes_the_change_over_the_rate():
    """A 10 N m step at 100 N m/s, 1 ms periods: reached after exactly 100 periods."""
    limiter = EffortRateLimiter(100.0, 0.001)
    limiter.reset(np.zeros(2))
    outputs = np.array([limiter.limit([10.0, -10.0]) for _ in range(120)])
    np.testing.assert_allclose(np.abs(np.diff(outputs[:100], axis=0)), 0.1, atol=1e-12)
    np.testing.assert_allclose(outputs[99], [10.0, -10.0], atol=1e-9)
    np.testing.assert_allclose(outputs[100:], [[10.0, -10.0]] * 20)



def test_nullspace_damping_alone_stops_a_self_motion_without_moving_the_tool(panda):
    """Started with a pure self-motion (J q̇ = 0, 0.5 rad/s), no posture: with
    nullspace_damping the joints come to rest (< 1 mrad/s in 1.5 s) and the tool stays
    within 1 mm; without it the self-motion goes on (> 0.1 rad/s)."""
    null = np.linalg.svd(kinematics.jacobian(panda, Q0))[2][-1]
    qd0 = 0.5 * null / np.max(np.abs(null))
    z = np.zeros(7)

    def run(**options):
        law = cartesian(panda, nullspace_posture=None, **options)
        target = CartesianTarget(*law.pose(Q0))
        return simulation.simulate_closed_loop(
            panda, lambda t, q, qd: law.effort(q, qd, target), lambda t: (Q0, z, z), 1.5,
            DT, DT, Q0, qd0)
    damped = run(nullspace_damping=2.0)
    assert np.max(np.abs(damped.qd[-1])) < 1e-3
    tip = kinematics.tool_pose(panda, damped.q)[:, :3, 3]
    assert np.max(np.linalg.norm(tip - tip[0], axis=1)) < 1e-3
    assert np.max(np.abs(run().qd[-1])) > 0.1
