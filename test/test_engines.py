"""The plant's engines without ROS: MJCF generated from the robot model read by MuJoCo's
compiler gives MuJoCo's mass matrix and inverse dynamics equal to ours on every preset and
the URDFs of test/data; the MuJoCo engine moves as the own engine under the same efforts and
the same external wrench; a static wrench balanced by g(q) − J_kᵀ F holds the arm in both;
MuJoCo's joint limits and a user MJCF's floor stop the arm; joints mapped by name; a joint
the MJCF lacks refused in one line."""

import sys
import warnings

import numpy as np
import pytest

from conftest import preset_paths
from robot_dynamics import dynamics
from robot_dynamics.simulation import engines, integration
from robot_dynamics.model import ModelWarning, RobotModel
import robot_dynamics.model.urdf  # noqa: F401  (registers robot.source urdf)

mujoco = pytest.importorskip('mujoco')
from robot_dynamics.simulation import mujoco_engine as me  # noqa: E402

URDFS = {'ur5': ('test/data/ur5.urdf', 'base_link', 'tool0'),
         'skewed': ('test/data/skewed_arm.urdf', 'world', 'tool')}
PANDA_Q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])


def _quiet(build, *args):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return build(*args)


def _urdf_model(name):
    path, base, tip = URDFS[name]
    return _quiet(RobotModel.from_params, {'source': 'urdf', 'urdf_file': path,
                                           'base_link': base, 'tip_link': tip})


def _with_drive(model, rng):
    """The model with rotor inertia and viscous friction on every joint."""
    params = dict(model.to_params(), armature=rng.uniform(0.05, 0.3, model.n).tolist(),
                  viscous_friction=rng.uniform(0.1, 1.0, model.n).tolist())
    params.pop('coulomb_friction', None)
    params.pop('friction_model', None)
    return _quiet(RobotModel.from_params, params)


def _full_mass_matrix(mj, data, M):
    """mj_fullM across MuJoCo versions (3.x: (m, dst, d.qM); 4.x: (m, d, dst))."""
    if hasattr(data, 'qM'):
        mujoco.mj_fullM(mj, M, data.qM)
    else:
        mujoco.mj_fullM(mj, data, M)


ARMS = [pytest.param(p, id=p.split('/')[-1][:-5]) for p in preset_paths()] + \
    [pytest.param(name, id=name) for name in URDFS]


def _arm(which):
    return _urdf_model(which) if which in URDFS else _quiet(RobotModel.from_yaml, which)


def _panda():
    return _quiet(RobotModel.from_yaml, [p for p in preset_paths() if 'panda' in p][0])


@pytest.mark.parametrize('which', ARMS)
def test_generated_mjcf_has_our_mass_matrix_and_inverse_dynamics(which):
    """mj_fullM and mj_inverse (limits off: random states leave the ranges) of the
    generated MJCF equal ours, rotor inertia and viscous friction included, to 1e-9
    relative on 30 random states."""
    rng = np.random.default_rng(7)
    model = _with_drive(_arm(which), rng)
    mj = me.compile_model(model)
    assert mj.nv == model.n and mj.nu == 0 and mj.ngeom == 0
    mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_LIMIT)
    data = mujoco.MjData(mj)
    M = np.zeros((mj.nv, mj.nv))
    for _ in range(30):
        q, qd, qdd = rng.uniform(-2.0, 2.0, (3, model.n))
        data.qpos[:], data.qvel[:], data.qacc[:] = q, qd, qdd
        mujoco.mj_inverse(mj, data)
        _full_mass_matrix(mj, data, M)
        ours = dynamics.inverse_dynamics(model, q, qd, qdd)
        np.testing.assert_allclose(data.qfrc_inverse, ours,
                                   atol=1e-9 * float(np.max(np.abs(ours))))
        ours_M = dynamics.mass_matrix(model, q)
        np.testing.assert_allclose(M, ours_M, atol=1e-9 * float(np.max(np.abs(ours_M))))


def test_generated_mjcf_writes_drive_terms_and_limits():
    """The MJCF text carries armature, damping, frictionloss and limited ranges; without
    limits none is limited; the frames are sites."""
    model = _quiet(RobotModel.from_params, dict(
        _panda().to_params(), armature=[0.1] * 7, viscous_friction=[0.2] * 7,
        coulomb_friction=[0.3] * 7))
    mj = me.compile_model(model)
    np.testing.assert_allclose(mj.dof_armature, 0.1)
    np.testing.assert_allclose(mj.dof_damping, 0.2)
    np.testing.assert_allclose(mj.dof_frictionloss, 0.3)
    assert mj.jnt_limited.all()
    np.testing.assert_allclose(mj.jnt_range, np.column_stack([model.position_min,
                                                              model.position_max]))
    assert not me.compile_model(model, limits=False).jnt_limited.any()
    assert [mj.site(s).name for s in range(mj.nsite)] == [f'link_{i}' for i in range(1, 8)] \
        + ['tool']


def _open_loop(engine, model, q0, efforts, steps=10):
    q, qd = q0.copy(), np.zeros(model.n)
    path = []
    for tau in efforts:
        q, qd, _, _ = engine.advance(model, q, qd, tau, steps)
        path.append(q.copy())
    return np.array(path)


@pytest.mark.parametrize('which', ['panda', 'ur5'])
def test_mujoco_engine_moves_as_the_own_engine(which):
    """Open-loop efforts (gravity plus a sine per joint) for 0.3 s at 1 ms: MuJoCo's RK4
    and ours follow the same path. Both are classical RK4 of the same dynamics, so they
    differ by rounding, far below their own step error (the path at 0.5 ms differs by
    more): within 1e-4 × that step error + 1e-10 rad."""
    model = _with_drive(_panda() if which == 'panda' else _urdf_model('ur5'),
                        np.random.default_rng(1))
    joints = [f'j{i}' for i in range(model.n)]
    q0 = PANDA_Q if which == 'panda' else np.array([0.0, -1.3, 1.4, -1.6, -1.5, 0.0])
    t = np.arange(30) * 0.01
    efforts = [dynamics.gravity_torques(model, q0) + 2.0 * np.sin(5.0 * tk + np.arange(
        model.n)) for tk in t]
    own = _open_loop(engines.OwnEngine(model, 1e-3), model, q0, efforts)
    theirs = _open_loop(me.MujocoEngine.from_robot_model(model, joints, 1e-3, limits=False),
                        model, q0, efforts)
    fine = _open_loop(engines.OwnEngine(model, 5e-4), model, q0, efforts, steps=20)
    step_error = np.max(np.abs(own - fine))
    assert np.max(np.abs(own[-1] - q0)) > 0.01          # it moved
    assert np.max(np.abs(own - theirs)) <= 1e-4 * step_error + 1e-10, (
        np.max(np.abs(own - theirs)), step_error)


def test_mujoco_limits_stop_a_joint_at_its_range():
    """Joint 2 of the Panda driven into its lower limit by a constant effort: MuJoCo's limit
    holds it there (soft constraint: within 0.02 rad), at rest; without limits it passes."""
    model = _panda()
    joints = [f'j{i}' for i in range(7)]
    q0 = PANDA_Q.copy()
    tau = dynamics.gravity_torques(model, q0)
    tau[1] -= 20.0
    q_end = []
    for limits in (True, False):
        engine = me.MujocoEngine.from_robot_model(model, joints, 1e-3, limits=limits)
        q, qd = q0.copy(), np.zeros(7)
        for _ in range(100):
            q, qd, _, _ = engine.advance(model, q, qd, tau, 10)
        q_end.append((q.copy(), qd.copy()))
    (q, qd), (q_free, _) = q_end
    low = model.position_min[1]
    assert abs(q[1] - low) < 0.02 and abs(qd[1]) < 0.05, (q[1], low, qd[1])
    assert q_free[1] < low - 0.2


FLOOR_ARM = """<mujoco>
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="upper" pos="0 0 0.5">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_a_user_mjcf_with_a_floor_stops_the_arm_on_it(tmp_path):
    """A two-link arm 0.5 m above a floor falls without effort: its tip comes to rest on the
    floor (capsule radius 0.02 m), not below it."""
    path = tmp_path / 'floor_arm.xml'
    path.write_text(FLOOR_ARM)
    engine = me.MujocoEngine.from_file(path, ['shoulder', 'elbow'], 1e-3)
    q, qd = np.zeros(2), np.zeros(2)
    for _ in range(300):
        q, qd, _, _ = engine.advance(None, q, qd, np.zeros(2), 10)
    data = engine.data
    tip = data.xpos[engine.mj.body('lower').id] + data.xmat[
        engine.mj.body('lower').id].reshape(3, 3) @ np.array([0.3, 0.0, 0.0])
    assert -0.01 < tip[2] - 0.02 < 0.01, tip
    assert np.max(np.abs(qd)) < 0.05
    assert q[0] > 0.5                       # it fell (about y: positive pitches the tip down)


TWO_PENDULA = """<mujoco>
  <option gravity="0 0 0"/>
  <worldbody>
    <body name="b_body"><joint name="b" type="hinge" axis="0 0 1"/>
      <inertial pos="0 0 0" mass="1" diaginertia="1 1 {ib}"/></body>
    <body name="a_body"><joint name="a" type="hinge" axis="0 0 1"/>
      <inertial pos="0 0 0" mass="1" diaginertia="1 1 {ia}"/></body>
    <body name="free_body"><joint name="passive" type="slide" axis="1 0 0"/>
      <inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body>
  </worldbody>
  <actuator>
    <general joint="a" biastype="affine" gainprm="100" biasprm="0 -100 -10"/>
  </actuator>
</mujoco>
"""


def test_joints_are_mapped_by_name_and_undriven_ones_named(tmp_path):
    """MJCF joints declared b, a, passive; the controller drives [a, b]: each joint takes
    its own effort (q̈ = τ / I about its own axis: after t, q = τ t² / (2 I)), the file's
    position servo on a switched off (it would pull a back to 0); the passive joint is
    named in one line."""
    path = tmp_path / 'two.xml'
    path.write_text(TWO_PENDULA.format(ia=2.0, ib=0.5))
    lines = []
    engine = me.MujocoEngine.from_file(path, ['a', 'b'], 1e-3, log=lines.append)
    q, qd, _, _ = engine.advance(None, np.zeros(2), np.zeros(2), np.array([1.0, 3.0]), 100)
    np.testing.assert_allclose(q, [1.0 * 0.01 / (2 * 2.0), 3.0 * 0.01 / (2 * 0.5)],
                               rtol=1e-9)
    np.testing.assert_allclose(qd, [1.0 * 0.1 / 2.0, 3.0 * 0.1 / 0.5], rtol=1e-9)
    assert len(lines) == 1 and 'passive' in lines[0] and '\n' not in lines[0]


def test_a_controller_joint_missing_from_the_mjcf_is_refused_in_one_line(tmp_path):
    path = tmp_path / 'two.xml'
    path.write_text(TWO_PENDULA.format(ia=1.0, ib=1.0))
    with pytest.raises(ValueError) as error:
        me.MujocoEngine.from_file(path, ['a', 'c'], 1e-3)
    text = str(error.value)
    assert "'c'" in text and 'b' in text and '\n' not in text


def test_without_mujoco_the_engine_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, 'mujoco', None)
    with pytest.raises(ImportError, match='pip install mujoco'):
        engines.make_engine('mujoco', _panda(), [f'j{i}' for i in range(7)], 1e-3)


# ---------------------------------------------------------------------- external wrench


def _mujoco_jacobian(engine, site):
    """MuJoCo's own Jacobian (6, n) [translational; rotational] of a site's origin, at the
    engine's state, in the controller's joint order."""
    mj, data = engine.mj, engine.data
    mujoco.mj_forward(mj, data)
    jacp, jacr = np.zeros((3, mj.nv)), np.zeros((3, mj.nv))
    mujoco.mj_jacSite(mj, data, jacp, jacr, mj.site(site).id)
    return np.vstack([jacp, jacr])[:, engine.dadr]


@pytest.mark.parametrize('frame', ['link_4', 'tool', ''])
def test_own_and_mujoco_respond_alike_to_the_same_wrench(frame):
    """The Panda held by g(q) and pushed by a wrench (20 N, 3 N m, base frame) on a link
    for 0.2 s: both engines move it the same way. MuJoCo holds xfrc_applied over each of
    its steps while ours evaluates J(q)ᵀw at every RK4 stage, a first-order difference in
    the step: within 2 % of the motion; the motion is large (> 0.01 rad)."""
    model = _panda()
    joints = [f'j{i}' for i in range(7)]
    tau = dynamics.gravity_torques(model, PANDA_Q)
    force, moment = np.array([20.0, -10.0, 5.0]), np.array([0.0, 3.0, 1.0])
    paths = []
    for engine in (engines.OwnEngine(model, 1e-3),
                   me.MujocoEngine.from_robot_model(model, joints, 1e-3, limits=False)):
        engine.set_wrench(frame, force, moment)
        paths.append(_open_loop(engine, model, PANDA_Q, [tau] * 20))
    own, theirs = paths
    motion = np.max(np.abs(own - PANDA_Q))
    assert motion > 0.01
    assert np.max(np.abs(own - theirs)) < 0.02 * motion, (np.max(np.abs(own - theirs)),
                                                          motion)


@pytest.mark.parametrize('engine_name', ['own', 'mujoco'])
def test_a_static_wrench_balanced_by_the_drives_holds_the_arm(engine_name):
    """τ = g(q) − J_kᵀ [F; M] (J from MuJoCo's mj_jacSite at the frame, g ours) against
    the wrench on link 5: the arm stays at rest (|Δq| < 1e-7 rad over 0.5 s); with the
    drives' share left out it moves."""
    model = _panda()
    joints = [f'j{i}' for i in range(7)]
    reference = me.MujocoEngine.from_robot_model(model, joints, 1e-3, limits=False)
    reference.data.qpos[reference.qadr] = PANDA_Q
    w = np.array([15.0, -25.0, 10.0, 2.0, -1.0, 0.5])
    J = _mujoco_jacobian(reference, 'link_5')
    tau = dynamics.gravity_torques(model, PANDA_Q) - J.T @ w
    final = {}
    for balanced in (True, False):
        engine = (engines.OwnEngine(model, 1e-3, stops=integration.JointStops(
            model.position_min, model.position_max)) if engine_name == 'own'
            else me.MujocoEngine.from_robot_model(model, joints, 1e-3))
        engine.set_wrench('link_5', w[:3], w[3:])
        final[balanced] = _open_loop(engine, model, PANDA_Q,
                                     [tau if balanced else dynamics.gravity_torques(
                                         model, PANDA_Q)] * 50)[-1]
    assert np.max(np.abs(final[True] - PANDA_Q)) < 1e-7
    assert np.max(np.abs(final[False] - PANDA_Q)) > 1e-3


def test_a_cleared_wrench_stops_acting_and_bad_frames_are_named():
    model = _panda()
    engine = engines.OwnEngine(model, 1e-3)
    engine.set_wrench('tool', [0.0, 0.0, 10.0], [0.0, 0.0, 0.0])
    assert engine.wrench is not None
    engine.set_wrench('tool', [0.0] * 3, [0.0] * 3)
    assert engine.wrench is None
    np.testing.assert_array_equal(engine.external_effort(model, PANDA_Q), np.zeros(7))
    with pytest.raises(engines.FrameError, match="header.frame_id 'gripper'.*link_1"):
        engine.set_wrench('gripper', [1.0, 0.0, 0.0], [0.0] * 3)
    with pytest.raises(engines.FrameError, match='base'):
        engine.set_wrench('base_link', [1.0, 0.0, 0.0], [0.0] * 3)
    with pytest.raises(ValueError, match='force.y is not finite'):
        engine.set_wrench('tool', [0.0, float('nan'), 0.0], [0.0] * 3)
    assert engine.wrench is None


def test_urdf_frames_are_the_urdf_links():
    """The UR5's frames: the links its joints move (not base_link), tool0 the tip; the own
    engine's J_kᵀ w at tool0 equals MuJoCo's Jacobian at the generated site."""
    model = _urdf_model('ur5')
    frames, base, tip = engines.link_frames(model)
    assert base == 'base_link' and tip == 'tool0'
    assert set(frames) == {'shoulder_link', 'upper_arm_link', 'forearm_link',
                           'wrist_1_link', 'wrist_2_link', 'wrist_3_link', 'tool0'}
    q = np.array([0.3, -1.0, 1.2, -0.5, 0.4, 0.2])
    w = np.array([1.0, 2.0, -3.0, 0.4, 0.5, -0.6])
    own = engines.OwnEngine(model, 1e-3)
    theirs = me.MujocoEngine.from_robot_model(model, model.joint_names, 1e-3)
    theirs.data.qpos[theirs.qadr] = q
    for frame in ('forearm_link', 'tool0'):
        own.set_wrench(frame, w[:3], w[3:])
        np.testing.assert_allclose(own.external_effort(model, q),
                                   _mujoco_jacobian(theirs, frame).T @ w, atol=1e-12)


def test_a_diverging_mujoco_arm_is_reported_not_reset(tmp_path, monkeypatch):
    """An effort of 1e30 N m: MuJoCo resets a state it cannot integrate to its reference
    pose; the engine returns non-finite values instead (the plant stops on them)."""
    monkeypatch.chdir(tmp_path)              # MuJoCo writes its warning to MUJOCO_LOG.TXT
    model = _panda()
    engine = me.MujocoEngine.from_robot_model(model, [f'j{i}' for i in range(7)], 1e-3)
    q, qd, _, _ = engine.advance(model, PANDA_Q, np.zeros(7), np.full(7, 1e30), 10)
    assert not np.isfinite(q).all() and not np.isfinite(qd).all()


def test_a_payload_rebuilds_the_generated_model_keeping_the_state(tmp_path):
    """prepare_model/use_model with a 3 kg payload: the last body is 3 kg heavier, the state
    carries over; a user's MJCF refuses a payload in one line naming the file."""
    model = _panda()
    joints = [f'j{i}' for i in range(7)]
    engine = me.MujocoEngine.from_robot_model(model, joints, 1e-3)
    q, qd, _, _ = engine.advance(model, PANDA_Q, np.zeros(7),
                                 dynamics.gravity_torques(model, PANDA_Q) + 1.0, 20)
    heavier = model.with_payload(3.0, (0.0, 0.0, 0.05))
    engine.use_model(heavier, engine.prepare_model(heavier))
    assert engine.mj.body_mass[7] == pytest.approx(model.chain.mass[6] + 3.0)
    np.testing.assert_array_equal(engine.state()[0], q)
    np.testing.assert_array_equal(engine.state()[1], qd)
    path = tmp_path / 'two.xml'
    path.write_text(TWO_PENDULA.format(ia=1.0, ib=1.0))
    user = me.MujocoEngine.from_file(path, ['a', 'b'], 1e-3)
    with pytest.raises(ValueError, match='robot.payload.*two.xml'):
        user.prepare_model(model)


def test_the_own_stops_hold_against_a_wrench():
    """A wrench on the tool with the Panda on gravity compensation only, for 1 s: the arm
    moves into its stops (their effort acts) and stays within the hard end beyond them."""
    model = _panda()
    stops = integration.JointStops(model.position_min, model.position_max)
    engine = engines.OwnEngine(model, 1e-3, stops=stops)
    engine.set_wrench('tool', [0.0, 0.0, 60.0], [0.0, 0.0, 5.0])
    q, qd = PANDA_Q.copy(), np.zeros(7)
    peak = np.zeros(7)
    for _ in range(100):
        q, qd, _, p = engine.advance(model, q, qd, dynamics.gravity_torques(model, q), 10)
        if p is not None:
            peak = np.maximum(peak, p)
    assert peak.any()
    assert np.all(q >= model.position_min - stops.max_penetration - 1e-12)
    assert np.all(q <= model.position_max + stops.max_penetration + 1e-12)
