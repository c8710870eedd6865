"""MuJoCo as the plant's engine, and MJCF written from a robot model (no ROS).

MuJoCo (E. Todorov, T. Erez, Y. Tassa, "MuJoCo: a physics engine for model-based
control", IROS 2012; ``pip install mujoco``) is optional: it is imported where used.

* `model_to_mjcf(model, joints)`: an MJCF document of a `RobotModel` (DH or URDF): one body
  per link in the model's body frames (joint i about / along z of body i), each with its
  inertial (mass, centre of mass and full inertia tensor, payload included in the last),
  the joint's rotor inertia as ``armature``, viscous friction as ``damping`` and the
  Coulomb level as ``frictionloss``, finite position limits as ``limited`` ranges; a site
  per named frame (`engine_frames.link_frames`: ``link_1``.. ``link_n`` and ``tool`` of a DH
  model, the URDF links of a URDF model); gravity the model's; no collision geometry.
* `urdf_model(urdf, joints, ...)`: a URDF compiled by MuJoCo itself, with drive terms.
* `MujocoEngine`: ``mj_step`` under the efforts (``qfrc_applied`` on the controller's
  joints, mapped by name) and an external wrench (``xfrc_applied`` on the body, the moment
  moved from the frame's origin to the body's centre of mass), on a user's MJCF file or
  on the MJCF generated from the model.

A user's MJCF file, e.g. a MuJoCo Menagerie arm (https://github.com/google-deepmind/
mujoco_menagerie): clone the repository once (``git clone --depth 1
https://github.com/google-deepmind/mujoco_menagerie``) and give the path of the arm's file
(``mujoco_menagerie/franka_emika_panda/panda.xml``; its meshes are found beside it).
"""

import math
import xml.etree.ElementTree as ET

import numpy as np

from robot_dynamics.simulation import engine_frames

INTEGRATORS = {'rk4': 'RK4', 'euler': 'Euler'}   # the plant's integration_method
PLACEHOLDER_MASS = 1.0e-6  # kg (and kg m²) written for a body without mass or inertia
BIG_RANGE = 1.0e6       # rad | m: the open side of a joint limited on one side only


def _mujoco():
    try:
        import mujoco
    except ImportError:
        raise ImportError('the MuJoCo engine needs mujoco: pip install mujoco') from None
    return mujoco


def available():
    """True when mujoco can be imported."""
    try:
        _mujoco()
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------- MJCF from a model


def _num(value):
    value = float(value)
    return repr(value if abs(value) >= 1e-15 else 0.0)


def _text(values):
    return ' '.join(_num(v) for v in values)


def quaternion(R):
    """Unit quaternion (w, x, y, z) of rotation matrix R (MuJoCo's order), w >= 0."""
    R = np.asarray(R, dtype=float)
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    if trace > 0.0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s,
                      (R[1, 0] - R[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 1e-300))
        q = np.empty(4)
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q /= np.linalg.norm(q)
    return -q if q[0] < 0.0 else q


def _pose(element, R, p):
    element.set('pos', _text(p))
    element.set('quat', _text(quaternion(R)))


def _placement(chain, i):
    """Body i in body i-1: placement · Rz(θ0) Tz(d0), as (R, p)."""
    c, s = math.cos(chain.theta0[i]), math.sin(chain.theta0[i])
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return chain.R0[i] @ Rz, chain.p0[i] + chain.R0[i][:, 2] * chain.d0[i]


def _body_names(model, frames):
    """Body i's name: the frame of link i that is the body's own (URDF: the child link of
    joint i; DH: link_i)."""
    names = [f'link_{i + 1}' for i in range(model.n)]
    if model.source == 'urdf':
        first = {}
        for name, (k, _) in frames.items():
            first.setdefault(k, name)
        names = [first.get(i, names[i]) for i in range(model.n)]
    return names


def model_to_mjcf(model, joint_names=None, limits=True, timestep=0.001, integrator='rk4',
                  name='robot_dynamics'):
    """An MJCF document (XML string) of `model`, joints named `joint_names` (default the
    model's, or joint_1..joint_n). `limits`: finite robot.position_min/max become MuJoCo
    joint limits (``limited``; a one-sided limit gets ±BIG_RANGE on its open side);
    false: no limits. `integrator`: 'rk4' or 'euler' (the plant's integration_method)."""
    n, chain = model.n, model.chain
    names = list(joint_names or model.joint_names or [f'joint_{i + 1}' for i in range(n)])
    if len(names) != n or len(set(names)) != n:
        raise ValueError(f'joint_names: expected {n} distinct names, got {names}')
    frames, _, _ = engine_frames.link_frames(model)
    bodies = _body_names(model, frames)
    root = ET.Element('mujoco', model=name)
    compiler = ET.SubElement(root, 'compiler', angle='radian', autolimits='false',
                             inertiafromgeom='false')
    if not _physical(chain):
        # MuJoCo's compiler refuses inertias that break the triangle inequality (textbook
        # data: accept_nonphysical_inertia); `compile_model` puts the exact ones back
        compiler.set('balanceinertia', 'true')
    ET.SubElement(root, 'option', timestep=_num(timestep), gravity=_text(model.gravity),
                  integrator=INTEGRATORS.get(integrator, integrator))
    parent = ET.SubElement(root, 'worldbody')
    for i in range(n):
        body = ET.SubElement(parent, 'body', name=bodies[i])
        _pose(body, *_placement(chain, i))
        inertia, mass = chain.inertia[i], float(chain.mass[i])
        if not _solid(mass, inertia):
            # MuJoCo's compiler wants mass and inertia > 0 in a moving body: a placeholder
            # here, the model's values in the compiled model (`compile_model`)
            mass, inertia = PLACEHOLDER_MASS, PLACEHOLDER_MASS * np.eye(3)
        ET.SubElement(body, 'inertial', pos=_text(chain.com[i]), mass=_num(mass),
                      fullinertia=_text((inertia[0, 0], inertia[1, 1], inertia[2, 2],
                                         inertia[0, 1], inertia[0, 2], inertia[1, 2])))
        joint = ET.SubElement(body, 'joint', name=names[i],
                              type='slide' if chain.prismatic[i] else 'hinge',
                              pos='0 0 0', axis='0 0 1',
                              armature=_num(model.armature[i]),
                              damping=_num(model.viscous_friction[i]),
                              frictionloss=_num(model.coulomb_friction[i]))
        low, high = model.position_min[i], model.position_max[i]
        if limits and (math.isfinite(low) or math.isfinite(high)):
            joint.set('limited', 'true')
            joint.set('range', _text((low if math.isfinite(low) else -BIG_RANGE,
                                      high if math.isfinite(high) else BIG_RANGE)))
        else:
            joint.set('limited', 'false')
        for frame, (k, T) in frames.items():
            if k == i:
                site = ET.SubElement(body, 'site', name=frame)
                _pose(site, T[:3, :3], T[:3, 3])
        parent = body
    ET.indent(root)
    return ET.tostring(root, encoding='unicode') + '\n'


def _solid(mass, inertia):
    """True when MuJoCo's compiler takes the body's inertial as it is: mass > 0 and
    principal moments > 0 satisfying A + B >= C."""
    if mass <= 0.0:
        return False
    moments = np.sort(np.linalg.eigvalsh(inertia))
    return bool(moments[0] > 0.0 and moments[0] + moments[1] >= moments[2] * (1.0 - 1e-12))


def _physical(chain):
    return all(_solid(m, inertia) for m, inertia in zip(chain.mass, chain.inertia))


def _principal(inertia):
    """(principal moments (3,), quaternion (w, x, y, z) of the principal axes)."""
    moments, axes = np.linalg.eigh(inertia)
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    return moments, quaternion(axes)


def compile_model(model, joint_names=None, limits=True, timestep=0.001, integrator='rk4'):
    """The MjModel of `model_to_mjcf(model, ...)`, with the bodies' inertias exactly the
    model's (those MuJoCo's compiler balanced: written into the compiled model)."""
    mj = compile_mjcf(model_to_mjcf(model, joint_names, limits=limits, timestep=timestep,
                                    integrator=integrator))
    chain = model.chain
    if not _physical(chain):
        mujoco = _mujoco()
        for i in range(model.n):
            moments, axes = _principal(chain.inertia[i])
            mj.body_mass[i + 1], mj.body_ipos[i + 1] = chain.mass[i], chain.com[i]
            mj.body_inertia[i + 1], mj.body_iquat[i + 1] = moments, axes
        mujoco.mj_setConst(mj, mujoco.MjData(mj))
    return mj


def compile_mjcf(text):
    """MuJoCo's MjModel of an MJCF string; ValueError with MuJoCo's message."""
    mujoco = _mujoco()
    try:
        return mujoco.MjModel.from_xml_string(text)
    except ValueError as error:
        raise ValueError(f'MuJoCo refused the MJCF: {error}') from None


def load_mjcf_file(path):
    """MuJoCo's MjModel of the MJCF (or URDF) file `path`; ValueError naming
    mujoco.model_file and MuJoCo's reason."""
    mujoco = _mujoco()
    try:
        return mujoco.MjModel.from_xml_path(str(path))
    except ValueError as error:
        raise ValueError(f'mujoco.model_file: MuJoCo cannot load {str(path)!r}: '
                         f'{str(error).strip().splitlines()[0] if str(error) else error}') \
            from None


def urdf_model(urdf, joints, armature, damping, frictionloss, timestep=2.5e-4,
               integrator='RK4'):
    """The MjModel MuJoCo's compiler makes of `urdf` (static bodies not fused, visuals
    discarded), with `armature`, `damping` and `frictionloss` per joint of `joints`,
    contacts and joint-limit constraints off, and the friction-loss constraints solved
    tightly. Returns (model, qpos addresses, dof addresses) in the order of `joints`."""
    mujoco = _mujoco()
    spec = mujoco.MjSpec.from_string(urdf)
    spec.compiler.fusestatic = False
    spec.compiler.discardvisual = True
    for j, name in enumerate(joints):
        joint = spec.joint(name)
        joint.armature = float(armature[j])
        joint.damping = [float(damping[j])] + [0.0] * (len(joint.damping) - 1)
        joint.frictionloss = float(frictionloss[j])
    model = spec.compile()
    flags = mujoco.mjtDisableBit
    model.opt.disableflags |= int(flags.mjDSBL_CONTACT) | int(flags.mjDSBL_LIMIT)
    model.opt.timestep = timestep
    model.opt.integrator = getattr(mujoco.mjtIntegrator, f'mjINT_{integrator}')
    model.opt.tolerance = 1e-12
    model.opt.iterations = 200
    ids = [model.joint(name).id for name in joints]
    return model, np.array(model.jnt_qposadr[ids]), np.array(model.jnt_dofadr[ids])


def joint_addresses(mj, joints):
    """(qpos addresses, dof addresses) of the named hinge or slide joints of MjModel `mj`,
    in the order of `joints`; ValueError naming the first joint it lacks (or of another
    type), and its joints."""
    mujoco = _mujoco()
    names = [mj.joint(j).name for j in range(mj.njnt)]
    qadr, dadr = [], []
    for name in joints:
        if name not in names:
            raise ValueError(f'joint {name!r} of the controller is not in the MuJoCo model '
                             f'(its joints: {", ".join(n for n in names if n) or "none"}): '
                             'every controller joint needs an MJCF joint of the same name')
        j = names.index(name)
        if int(mj.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                       int(mujoco.mjtJoint.mjJNT_SLIDE)):
            raise ValueError(f'joint {name!r}: the MJCF joint is not a hinge or slide joint')
        qadr.append(int(mj.jnt_qposadr[j]))
        dadr.append(int(mj.jnt_dofadr[j]))
    return np.array(qadr), np.array(dadr)


# ---------------------------------------------------------------------- the engine


class MujocoEngine:
    """``mj_step`` on MjModel `mj` as the plant's engine: `joints` (the controller's, by
    name) take the efforts as generalised forces (``qfrc_applied``); the model's other
    joints move passively. Timestep `dt` (the plant's integration step) and integrator
    ('rk4' → RK4, 'euler' → MuJoCo's semi-implicit Euler) replace the file's.
    `robot_model`: the plant's model (the frames of a generated model; None for a user file,
    whose frames are its bodies and sites). `log(line)`: one-line notes."""

    name = 'mujoco'

    def __init__(self, mj, joints, dt, method='rk4', robot_model=None, generated=False,
                 limits=True, log=None):
        mujoco = self._mj = _mujoco()
        self.joints = tuple(joints)
        self.qadr, self.dadr = joint_addresses(mj, self.joints)
        self.dt, self.method = float(dt), method
        self.generated, self.limits = generated, limits
        self.robot_model = robot_model
        self.file = None
        self._configure(mj)
        driven = set(self.joints)
        others = [mj.joint(j).name or f'#{j}' for j in range(mj.njnt)
                  if mj.joint(j).name not in driven]
        if others and log is not None:
            log(f'MuJoCo model joints {others} are not driven by the controller: they move '
                'passively (no effort)')
        self.data = mujoco.MjData(mj)
        mujoco.mj_forward(mj, self.data)
        self._bad_qacc = int(mujoco.mjtWarning.mjWARN_BADQACC)
        self._q = self._qd = None           # the arrays the last advance returned
        self._wrench = None                 # (body id, site id | -1, w (6,)) or None

    def _configure(self, mj):
        mujoco = self._mj
        mj.opt.timestep = self.dt
        mj.opt.integrator = getattr(mujoco.mjtIntegrator,
                                    f'mjINT_{INTEGRATORS.get(self.method, self.method)}')
        self.mj = mj

    @classmethod
    def from_robot_model(cls, model, joints, dt, method='rk4', limits=True, log=None):
        """On the MJCF generated from `model` (`model_to_mjcf`)."""
        mj = compile_model(model, joints, limits=limits, timestep=dt, integrator=method)
        return cls(mj, joints, dt, method, robot_model=model, generated=True, limits=limits,
                   log=log)

    @classmethod
    def from_file(cls, path, joints, dt, method='rk4', robot_model=None, log=None):
        """On the user's MJCF file `path` (its gravity, limits and contacts; its actuators
        off: the efforts are the drives)."""
        mj = load_mjcf_file(path)
        # the controller's efforts are the drives: the file's actuators (e.g. a Menagerie
        # arm's position servos) are switched off
        mj.opt.disableflags |= int(_mujoco().mjtDisableBit.mjDSBL_ACTUATION)
        engine = cls(mj, joints, dt, method, robot_model=None, log=log)
        engine.file = str(path)
        return engine

    # ------------------------------------------------------------------ model changes

    def set_gravity(self, gravity):
        self.mj.opt.gravity[:] = gravity

    def prepare_model(self, model):
        """The MjModel for a new robot model (a payload) without touching the running one;
        ValueError on a user's file (its bodies are the file's)."""
        if not self.generated:
            raise ValueError('robot.payload: the MuJoCo engine runs the MJCF file '
                             f'{self.file!r}; put the payload in that file')
        return compile_model(model, self.joints, limits=self.limits, timestep=self.dt,
                             integrator=self.method)

    def use_model(self, model, mj):
        """Switch to `mj` (`prepare_model`), keeping the state."""
        mujoco = self._mj
        old = self.data
        self._configure(mj)
        self.robot_model = model
        self.data = mujoco.MjData(mj)
        self.data.qpos[:], self.data.qvel[:] = old.qpos, old.qvel
        self.data.time = old.time
        mujoco.mj_forward(mj, self.data)
        self._q = self._qd = None

    # ------------------------------------------------------------------ the wrench

    def frames(self):
        """(frames, base, tip): generated: `engine_frames.link_frames` of the model; a user's
        file: its bodies (moved by a joint) and sites, by name; the tip: the body of the
        last controller joint."""
        if self.generated:
            return engine_frames.link_frames(self.robot_model)
        mj = self.mj
        names = {}
        for b in range(1, mj.nbody):
            if mj.body_weldid[b] != 0 and mj.body(b).name:
                names[mj.body(b).name] = ('body', b)
        for s in range(mj.nsite):
            if mj.body_weldid[mj.site_bodyid[s]] != 0 and mj.site(s).name:
                names[mj.site(s).name] = ('site', s)
        tip = mj.body(int(mj.jnt_bodyid[mj.joint(self.joints[-1]).id])).name
        return names, mj.body(0).name, tip

    def set_wrench(self, frame, force, moment):
        """The wrench [force; moment] (world = base frame, moment about the frame's origin)
        on `frame` from now on; all zero clears it."""
        w = engine_frames.wrench_vector(force, moment)
        frames, base, tip = self.frames()
        engine_frames.resolve_frame(frames, base, tip, frame)
        name = frame or tip
        mj = self.mj
        if self.generated or frames[name][0] == 'site':
            site = mj.site(name).id
            body = int(mj.site_bodyid[site])
        else:
            site, body = -1, mj.body(name).id
        self.data.xfrc_applied[:] = 0.0
        self._wrench = None if w is None else (body, site, w)

    @property
    def wrench(self):
        return None if self._wrench is None else self._wrench[2]

    def _apply_wrench(self):
        """xfrc_applied of the body: the force, and the moment moved from the frame's origin
        to the body's centre of mass (at the current state: mj_kinematics first)."""
        body, site, w = self._wrench
        mujoco, d = self._mj, self.data
        mujoco.mj_kinematics(self.mj, d)
        origin = d.site_xpos[site] if site >= 0 else d.xpos[body]
        force = w[:3]
        d.xfrc_applied[body, :3] = force
        d.xfrc_applied[body, 3:] = w[3:] + np.cross(origin - d.xipos[body], force)

    # ------------------------------------------------------------------ stepping

    def prepare(self, model, q):
        pass

    def advance(self, model, q, qd, tau, steps, stretch=0.0):
        """`steps` mj_steps from (q, q̇) of the controller's joints (the other joints keep
        their MuJoCo state) under `tau` (held): (q, q̇, None, None) — MuJoCo's limits and
        contacts are constraints inside its step, not reported as stop efforts.
        stretch [s]: added to the first step's length (|stretch| < the timestep)."""
        mujoco, d = self._mj, self.data
        if q is not self._q:
            d.qpos[self.qadr] = q
        if qd is not self._qd:
            d.qvel[self.dadr] = qd
        d.qfrc_applied[self.dadr] = tau
        unstable = d.warning[self._bad_qacc].number
        if stretch:
            options = self.mj.opt
            timestep = options.timestep
            options.timestep = timestep + stretch
            try:
                if self._wrench is not None:
                    self._apply_wrench()
                mujoco.mj_step(self.mj, d)
            finally:
                options.timestep = timestep
            steps -= 1
        if self._wrench is None:
            if steps > 0:
                mujoco.mj_step(self.mj, d, steps)
        else:
            for _ in range(steps):
                self._apply_wrench()
                mujoco.mj_step(self.mj, d)
        if d.warning[self._bad_qacc].number != unstable:
            # MuJoCo met a non-finite or huge acceleration and reset the state to the model's
            # reference pose: the plant sees the divergence, not a jump to that pose
            nan = np.full(len(self.qadr), np.nan)
            return nan, nan.copy(), None, None
        self._q, self._qd = d.qpos[self.qadr], d.qvel[self.dadr]
        return self._q, self._qd, None, None

    def state(self):
        """(q, q̇) of the controller's joints now."""
        return self.data.qpos[self.qadr].copy(), self.data.qvel[self.dadr].copy()


__all__ = ['INTEGRATORS', 'MujocoEngine', 'available', 'compile_mjcf', 'joint_addresses',
           'compile_model', 'load_mjcf_file', 'model_to_mjcf', 'quaternion', 'urdf_model']
