"""The compliant-control targets through the nodes with the plant on the MuJoCo engine: the
Panda (config/panda.yaml), plant_simulator with `engine: mujoco` (MuJoCo's RK4 at 1 ms on
the MJCF generated from the same arm) and computed_torque_controller in lock-step on the
plant's /clock, one control cycle per 1 ms state, the external force through the plant's
~/external_wrench on the `tool` frame, the law switched and tuned through the controller's
parameter service (what `ros2 param set` calls). The checks use MuJoCo's own kinematics on
the plant's model (site positions and orientations, ``mj_jacSite``); simulated time only."""

import numpy as np
import pytest

mujoco = pytest.importorskip('mujoco')

from rclpy.parameter import Parameter  # noqa: E402

from robot_dynamics.dynamics import kinematics  # noqa: E402
from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.plant import PlantSimulator  # noqa: E402
from ros_testing import doubles, PANDA, RosHarness, SIM_SETTINGS, WALL_LIMIT  # noqa: E402
from test_control_law_nodes import (Operator, pose_message, push,  # noqa: E402
                                    set_parameters, switch)

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
RATE = 1000.0       # Hz: the plant's states = the control cycles (1 ms, MuJoCo's step)
Q0 = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]      # rad: away from the Panda's singularities
TOOL = 'tool'       # the plant's frame of a DH model's tip (link 7's frame)


@pytest.fixture
def loop():
    harness = RosHarness(PANDA, SIM_SETTINGS)
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('engine', value='mujoco'), Parameter('real_time_factor', value=0.0),
        Parameter('integration_step', value=1.0 / RATE), Parameter('publish_rate', value=RATE),
        Parameter('initial_positions', value=Q0),
        # strict lock-step: the plant never advances without the controller's command, however
        # long a loaded machine keeps the answer (its default gives up after 1 s of wall time)
        Parameter('lockstep_timeout', value=WALL_LIMIT)]))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
    operator = harness.add(Operator(harness.context))
    harness.spin_until(lambda: operator.client.service_is_ready()
                       and operator.target.get_subscription_count() > 0
                       and operator.status == 'holding', 'the controller holding')
    run(harness, plant, 0.05)                   # settled at rest
    yield harness, plant, controller, operator
    harness.close()


def run(harness, plant, seconds):
    """Spin until `seconds` more of simulated time; (t, q, q̇) of every plant tick. The wall
    limit is only a net against hangs: a minute per simulated second on top of WALL_LIMIT
    (1 kHz lock-step over DDS runs some 10x slower than real time on a loaded machine)."""
    end = plant.sim_time + seconds - 0.5 / RATE
    samples, last = [], [None]

    def done():
        t = plant.sim_time
        if t != last[0]:
            last[0] = t
            samples.append((t, plant.q.copy(), plant.qd.copy()))
        return t >= end
    harness.spin_until(done, f'{seconds} s of simulated time',
                       wall_limit=WALL_LIMIT + 60.0 * seconds)
    t, q, qd = (np.array(column) for column in zip(*samples))
    return t, q, qd


def wrench_on(harness, plant, operator, force, moment=(0.0, 0.0, 0.0)):
    """The wrench on the tool from now on (all zero: cleared); waits until the plant applies
    it and returns the simulated time since which it acts."""
    applied = np.any(np.asarray(force) != 0.0) or np.any(np.asarray(moment) != 0.0)
    push(harness, operator, force, moment, frame=TOOL)
    harness.spin_until(lambda: (plant.engine.wrench is not None) == applied,
                       'the plant applying the wrench')
    return plant.sim_time


def switch_to(harness, operator, controller, law):
    """control_law set, and in effect (from the controller's next cycle on)."""
    switch(harness, operator, law)
    harness.spin_until(lambda: controller._law_name == law, f'{law} in effect')


def settings(harness, operator, *parameters):
    for result in set_parameters(harness, operator, *parameters):
        assert result.successful, result.reason


class MujocoArm:
    """MuJoCo's kinematics on the plant's own MjModel (a separate MjData: the plant's is
    left alone): the tool site's pose and Jacobian at q."""

    def __init__(self, plant):
        self.engine = plant.engine
        self.mj = plant.engine.mj
        self.site = self.mj.site(TOOL).id
        self.data = mujoco.MjData(self.mj)

    def _at(self, q):
        self.data.qpos[self.engine.qadr] = q
        mujoco.mj_kinematics(self.mj, self.data)
        mujoco.mj_comPos(self.mj, self.data)

    def pose(self, q):
        self._at(q)
        return (self.data.site_xpos[self.site].copy(),
                self.data.site_xmat[self.site].reshape(3, 3).copy())

    def jacobian(self, q):
        """[v; ω] of the tool site, base frame, the controller's joint order."""
        self._at(q)
        jacp, jacr = np.zeros((3, self.mj.nv)), np.zeros((3, self.mj.nv))
        mujoco.mj_jacSite(self.mj, self.data, jacp, jacr, self.site)
        return np.vstack([jacp, jacr])[:, self.engine.dadr]


def rotation_vector(R):
    angle = np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return w * (angle / (2.0 * np.sin(angle))) if angle > 1e-9 else 0.5 * w


# ------------------------------------------------------------------ gravity compensation

def test_gravity_compensated_panda_on_mujoco_drifts_less_than_a_milliradian_in_ten_seconds(
        loop):
    harness, plant, controller, operator = loop
    start = plant.q.copy()
    switch_to(harness, operator, controller, 'gravity_compensation')
    _, q, _ = run(harness, plant, 10.0)
    assert controller._law_name == 'gravity_compensation'
    drift = np.max(np.abs(q - start))
    print(f'gravity compensation, MuJoCo plant: drift {drift * 1e3:.3g} mrad in 10 s')
    assert drift < 1e-3


def test_a_pushed_gravity_compensated_panda_on_mujoco_comes_to_rest_and_stays(loop):
    """gravity_compensation.damping 5 N m s/rad, 10 N at the tool for 0.3 s: within 3 s of
    the release every joint is below 1 mrad/s, and within 1 mrad for the next 5 s."""
    harness, plant, controller, operator = loop
    settings(harness, operator, doubles('gravity_compensation.damping', [5.0] * 7))
    switch_to(harness, operator, controller, 'gravity_compensation')
    start = plant.q.copy()
    pushed = wrench_on(harness, plant, operator, [0.0, 10.0, 0.0])
    run(harness, plant, 0.3 - (plant.sim_time - pushed))
    released = wrench_on(harness, plant, operator, [0.0, 0.0, 0.0])
    t, q, qd = run(harness, plant, 8.0)
    settled = t >= released + 3.0
    peak = np.max(np.abs(qd))
    print(f'gravity compensation + damping, MuJoCo plant: pushed {released - pushed:.3f} s, '
          f'peak {peak:.3f} rad/s, 3 s after the release max |qd| '
          f'{np.max(np.abs(qd[settled])) * 1e3:.4f} mrad/s, then moved '
          f'{np.max(np.abs(q[settled] - q[settled][0])) * 1e3:.4f} mrad in 5 s')
    assert released - pushed == pytest.approx(0.3, abs=2.5 / RATE)
    assert np.max(np.abs(q[settled][0] - start)) > 0.05          # the push moved it
    assert np.max(np.abs(qd[settled])) < 1e-3
    assert t[settled][-1] - t[settled][0] >= 5.0 - 1.5 / RATE
    assert np.max(np.abs(q[settled] - q[settled][0])) < 1e-3


# ------------------------------------------------------------------ joint impedance

def test_joint_impedance_on_mujoco_deflects_by_the_static_balance(loop):
    """Under a constant wrench F at the tool the arm comes to rest where
    K (q − q_held) = J(q)ᵀ F within 1 %, J from MuJoCo at the deflected pose."""
    harness, plant, controller, operator = loop
    K = np.array([300.0, 200.0, 250.0, 150.0, 60.0, 40.0, 20.0])
    settings(harness, operator, doubles('joint_impedance.stiffness', K))
    held = plant.q.copy()
    switch_to(harness, operator, controller, 'joint_impedance')
    F = np.array([12.0, -8.0, 10.0, 0.5, -0.4, 0.6])
    wrench_on(harness, plant, operator, F[:3], F[3:])
    _, q, qd = run(harness, plant, 3.0)
    assert np.max(np.abs(qd[-1])) < 1e-4                            # at rest
    balance = MujocoArm(plant).jacobian(q[-1]).T @ F
    deflection = K * (q[-1] - held)
    print(f'joint impedance, MuJoCo plant: K dq - J^T F = {deflection - balance} N m '
          f'(max |J^T F| {np.max(np.abs(balance)):.3f} N m)')
    assert np.max(np.abs(q[-1] - held)) > 0.005                      # a deflection to measure
    np.testing.assert_allclose(deflection, balance, atol=0.01 * np.max(np.abs(balance)))


# ------------------------------------------------------------------ Cartesian impedance

CARTESIAN_K = np.array([1000.0, 800.0, 1200.0, 60.0, 50.0, 40.0])


def cartesian(harness, operator, controller):
    settings(harness, operator, doubles('cartesian.stiffness', CARTESIAN_K),
             doubles('cartesian.nullspace_posture', Q0),
             doubles('cartesian.nullspace_stiffness', [10.0] * 7))
    switch_to(harness, operator, controller, 'cartesian_impedance')


def test_cartesian_impedance_on_mujoco_displaces_by_force_over_stiffness(loop):
    """A constant force and moment on the tool: the tool (MuJoCo's site) comes to rest
    displaced from the held pose by f / K_t and rotated by m / K_r, within 2 % per axis."""
    harness, plant, controller, operator = loop
    arm = MujocoArm(plant)
    held_p, held_R = arm.pose(plant.q)
    cartesian(harness, operator, controller)
    F = np.array([6.0, -5.0, 7.0, 0.6, -0.5, 0.4])
    wrench_on(harness, plant, operator, F[:3], F[3:])
    _, q, qd = run(harness, plant, 3.0)
    assert np.max(np.abs(qd[-1])) < 1e-4
    p, R = arm.pose(q[-1])
    displacement = np.concatenate([p - held_p, rotation_vector(R @ held_R.T)])
    print(f'Cartesian impedance, MuJoCo plant: displacement / (F / K) = '
          f'{displacement / (F / CARTESIAN_K)}')
    np.testing.assert_allclose(displacement, F / CARTESIAN_K, rtol=0.02)


def test_a_cartesian_target_on_mujoco_moves_the_tool_5_cm_within_1_mm(loop):
    harness, plant, controller, operator = loop
    arm = MujocoArm(plant)
    cartesian(harness, operator, controller)
    start = kinematics.tool_pose(controller.model, plant.q)
    goal = start.copy()
    goal[:3, 3] += [0.0, 0.05, 0.0]
    operator.target.publish(pose_message(goal, frame='base_link'))
    t, q, _ = run(harness, plant, 3.0)
    p, R = arm.pose(q[-1])
    error = np.linalg.norm(p - goal[:3, 3])
    angle = np.linalg.norm(rotation_vector(R @ goal[:3, :3].T))
    away = [np.linalg.norm(arm.pose(qk)[0] - goal[:3, 3]) >= 1e-3 for qk in q]
    within = t[np.flatnonzero(away)[-1] + 1] - t[0] if not away[-1] else np.inf
    print(f'Cartesian target step 5 cm, MuJoCo plant: {error * 1e3:.4f} mm, '
          f'{angle * 1e3:.4f} mrad from the goal after 3 s; within 1 mm from '
          f'{within:.3f} s on')
    assert np.linalg.norm(p - start[:3, 3]) > 0.045                  # it moved
    assert error < 1e-3
    assert angle < 0.01
