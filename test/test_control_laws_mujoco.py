"""The compliant control laws driving the Panda simulated by MuJoCo, a physics engine that is
not this package's: the arm compiled by MuJoCo from a URDF written from config/panda.yaml's
DH table (benchmarks/mujoco_recordings.py, no drive terms), the law's effort applied as
``qfrc_applied`` every 1 ms, an external force at the tool as ``xfrc_applied`` (moved to the
body's centre of mass, world frame), MuJoCo's RK4 at 1 ms. The targets of the core tests,
measured with MuJoCo's own kinematics (``xpos``, ``xmat``, ``mj_jac``). Simulated time only."""

import numpy as np
import pytest

mujoco = pytest.importorskip('mujoco')

from robot_dynamics.dynamics import kinematics  # noqa: E402
from robot_dynamics.control import (CartesianImpedanceLaw, CartesianTarget,  # noqa: E402
                                    GravityCompensationLaw, JointImpedanceLaw)
from benchmark_modules import benchmark_module  # noqa: E402

DT = 1e-3
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
ZERO = np.zeros(7)

mr = benchmark_module('mujoco_recordings')


class Panda:
    """The MuJoCo Panda (`mj`, addresses `qadr`, `dadr`, the tool body `link7`) and ours."""

    def __init__(self):
        self.ours = mr.our_model('panda')
        joints = tuple(self.ours.joint_names) if self.ours.joint_names else \
            mr.rr.joint_names('panda')
        zeros = np.zeros(self.ours.n)
        self.mj, self.qadr, self.dadr = mr.mujoco_model(mr.arm_urdf('panda'), joints, zeros,
                                                        zeros, zeros, timestep=DT)
        self.body = self.mj.body('link7').id

    def start(self, q):
        data = mujoco.MjData(self.mj)
        data.qpos[self.qadr] = q
        mujoco.mj_forward(self.mj, data)
        return data

    def tool(self, data):
        """(position, rotation) of the tool (link7's frame) by MuJoCo's kinematics."""
        mujoco.mj_kinematics(self.mj, data)
        return data.xpos[self.body].copy(), data.xmat[self.body].reshape(3, 3).copy()

    def run(self, law, duration, q0=Q0, wrench=None):
        """Close the loop: τ = law(q, q̇) as qfrc_applied, `wrench(t)` = [f; m] on the tool
        (f at its origin) as xfrc_applied at the body's centre of mass. Returns t, q, q̇."""
        data = self.start(q0)
        steps = int(round(duration / DT))
        qs, qds = np.empty((steps + 1, 7)), np.empty((steps + 1, 7))
        for k in range(steps + 1):
            q, qd = data.qpos[self.qadr].copy(), data.qvel[self.dadr].copy()
            qs[k], qds[k] = q, qd
            if k == steps:
                break
            data.qfrc_applied[self.dadr] = law(q, qd)
            if wrench is not None:
                w = wrench(k * DT)
                point, _ = self.tool(data)
                data.xfrc_applied[self.body, :3] = w[:3]
                data.xfrc_applied[self.body, 3:] = w[3:] + np.cross(
                    point - data.xipos[self.body], w[:3])
            mujoco.mj_step(self.mj, data)
        return np.arange(steps + 1) * DT, qs, qds

    def jacobian(self, q):
        """MuJoCo's [v; ω] Jacobian of the tool origin (mj_jac), our joint order."""
        data = self.start(q)
        jacp, jacr = np.zeros((3, self.mj.nv)), np.zeros((3, self.mj.nv))
        mujoco.mj_jac(self.mj, data, jacp, jacr, data.xpos[self.body], self.body)
        return np.vstack([jacp, jacr])[:, self.dadr]


@pytest.fixture(scope='module')
def panda():
    return Panda()


def rotation_vector(R):
    angle = np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return w * (angle / (2.0 * np.sin(angle))) if angle > 1e-9 else 0.5 * w


def test_mujoco_panda_has_our_tool_frame_and_gravity(panda):
    """The tool frame the laws use is MuJoCo's link7 frame; MuJoCo's bias at rest (its
    gravity efforts) equals the gravity compensation's effort."""
    rng = np.random.default_rng(1)
    law = GravityCompensationLaw(panda.ours)
    for q in rng.uniform(panda.ours.position_min, panda.ours.position_max, (5, 7)):
        data = panda.start(q)
        p, R = panda.tool(data)
        T = kinematics.tool_pose(panda.ours, q)
        np.testing.assert_allclose(p, T[:3, 3], atol=1e-12)
        np.testing.assert_allclose(R, T[:3, :3], atol=1e-12)
        np.testing.assert_allclose(data.qfrc_bias[panda.dadr], law.effort(q, ZERO), atol=1e-9)


def test_gravity_compensated_panda_in_mujoco_drifts_less_than_a_milliradian_in_ten_seconds(panda):
    law = GravityCompensationLaw(panda.ours)
    _, q, _ = panda.run(law.effort, 10.0)
    assert np.max(np.abs(q - Q0)) < 1e-3


def test_a_pushed_gravity_compensated_panda_in_mujoco_comes_to_rest_and_stays(panda):
    """D = 5 N m s/rad, 10 N at the tool for 0.3 s: within 3 s of the release every joint
    is below 1 mrad/s and stays within 1 mrad for the next 5 s."""
    law = GravityCompensationLaw(panda.ours, damping=5.0)
    push = np.array([0.0, 10.0, 0.0, 0.0, 0.0, 0.0])
    t, q, qd = panda.run(law.effort, 8.3,
                         wrench=lambda t: push if t < 0.3 - 1e-9 else 0.0 * push)
    settled = int(round(3.3 / DT))
    assert np.max(np.abs(q[settled] - Q0)) > 0.05
    assert np.max(np.abs(qd[settled:])) < 1e-3
    assert np.max(np.abs(q[settled:] - q[settled])) < 1e-3


def test_joint_impedance_in_mujoco_deflects_by_the_static_balance(panda):
    """K (q − q_d) = J(q)ᵀ F within 1 %, J from MuJoCo's mj_jac at the deflected pose."""
    K = np.array([300.0, 200.0, 250.0, 150.0, 60.0, 40.0, 20.0])
    law = JointImpedanceLaw(panda.ours, K, damping_ratio=1.0)
    F = np.array([12.0, -8.0, 10.0, 0.5, -0.4, 0.6])
    _, q, qd = panda.run(lambda q, qd: law.effort(q, qd, Q0, ZERO, ZERO), 3.0,
                         wrench=lambda t: F)
    assert np.max(np.abs(qd[-1])) < 1e-4
    balance = panda.jacobian(q[-1]).T @ F
    np.testing.assert_allclose(K * (q[-1] - Q0), balance, atol=0.01 * np.max(np.abs(balance)))


def test_cartesian_impedance_in_mujoco_displaces_by_force_over_stiffness(panda):
    """A constant force and moment on the tool: MuJoCo's tool displacement from the target
    is f / K_t and its rotation m / K_r, within 2 % per axis."""
    K = np.array([1000.0, 800.0, 1200.0, 60.0, 50.0, 40.0])
    law = CartesianImpedanceLaw(panda.ours, K, nullspace_posture=Q0, nullspace_stiffness=10.0)
    target = CartesianTarget(*law.pose(Q0))
    F = np.array([6.0, -5.0, 7.0, 0.6, -0.5, 0.4])
    _, q, qd = panda.run(lambda q, qd: law.effort(q, qd, target), 3.0, wrench=lambda t: F)
    p, R = panda.tool(panda.start(q[-1]))
    R_d = kinematics.matrix_from_quaternion(target.quaternion)
    displacement = np.concatenate([p - target.position, rotation_vector(R @ R_d.T)])
    np.testing.assert_allclose(displacement, F / K, rtol=0.02)
