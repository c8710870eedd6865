"""The plant's engines: what integrates the arm's motion under the applied efforts (no ROS).

Two engines step the same way, `advance(model, q, qd, tau, steps)` → (q, q̇, stop effort at
the end, largest |stop effort| over the steps), the effort held over the `steps` steps:

* `OwnEngine` (``own``, the default): this package's forward dynamics integrated by
  `integration.METHODS` (RK4 or semi-implicit Euler), the mechanical stops of
  `integration.JointStops` at the model's position limits;
* `mujoco_engine.MujocoEngine` (``mujoco``): MuJoCo's ``mj_step`` on an MJCF model, the
  user's or one generated from the robot model (`mujoco_engine.model_to_mjcf`); joint
  limits and contacts are MuJoCo's.

Both take an external wrench on a named frame of the arm (`set_wrench`): a force and a
moment in the base frame, the moment about the frame's origin, acting until replaced
(an all-zero wrench clears it). The frames (`link_frames`): for a URDF model the URDF
links the movable joints carry (each the child link of a joint of the chain, and the fixed
links after it), for a DH model ``link_1`` .. ``link_n`` (the DH link frames, as
`kinematics.link_poses` gives them) and ``tool`` (the tip frame); an empty name is the tip
frame. The own engine adds τ_ext = J_k(q)ᵀ [F; M] (J_k the geometric Jacobian of the
frame's origin on link k, `kinematics.jacobian`) to the effort at every stage of the
integrator.
"""

import numpy as np

from robot_dynamics import integration

ENGINES = ('own', 'mujoco')
TOOL = 'tool'


class FrameError(ValueError):
    """A wrench's frame the engine does not know (the message names header.frame_id)."""


def _transform(R, p):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def _urdf_link_frames(model):
    """{URDF link name: (k, 4×4 pose in body frame k+1)} along the model's chain (the links
    fixed to the base: none)."""
    from robot_dynamics import urdf
    params = model.to_params()
    text = params.get('urdf') or urdf.read_urdf_file(params['urdf_file'])
    robot = urdf.parse_urdf(text)
    base = params.get('base_link') or urdf._default_base(robot)
    tip = params.get('tip_link') or urdf._default_tip(robot, base, urdf._children(robot))
    frames, T, k = {}, np.eye(4), -1
    for joint in urdf.chain_path(robot, base, tip):
        if joint.type == 'fixed':
            T = T @ joint.T
        else:
            T = _transform(urdf.axis_rotation(joint.axis).T, np.zeros(3))
            k += 1
        if k >= 0:
            frames[joint.child] = (k, T.copy())
    return frames, base, tip


def link_frames(model):
    """(frames, base name, tip name): frames {name: (k, T)}, k the 0-based link (body k+1
    of `model.chain`) the frame is fixed to and T its pose (4×4) in that body frame.

    URDF models: the URDF links moved by the chain's joints (the base link and the links
    fixed to it move with nothing: not listed). DH models: ``link_1`` .. ``link_n``, the DH
    link frames, and ``tool``, the tip frame; the base is ``base_link``."""
    chain = model.chain
    if model.source == 'urdf':
        return _urdf_link_frames(model)
    n = model.n
    frames = {f'link_{k + 1}': (k, _transform(chain.R_link[k], chain.p_link[k]))
              for k in range(n)}
    frames[TOOL] = (n - 1, _transform(chain.R_tip, chain.p_tip))
    return frames, 'base_link', TOOL


def wrench_vector(force, moment):
    """The (6,) wrench [F; M] of two 3-vectors, or None when both are zero (clears it).
    Raises ValueError naming `force[i]` or `moment[i]` when not finite."""
    w = np.concatenate([np.asarray(force, dtype=float).reshape(3),
                        np.asarray(moment, dtype=float).reshape(3)])
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f'{"force" if i < 3 else "moment"}.{"xyz"[i % 3]} is not finite')
    return w if w.any() else None


def resolve_frame(frames, base, tip, frame):
    """(k, T) of `frame` ('' = the tip frame). FrameError names the frame and the known
    ones (the base: a wrench there moves nothing)."""
    name = frame or tip
    if name in frames:
        return frames[name]
    if name == base:
        raise FrameError(f'header.frame_id {frame!r} is the base, which no wrench moves; '
                         'name a link of the arm')
    raise FrameError(f'header.frame_id {frame!r} names no link of the arm (links: '
                     f'{", ".join(sorted(frames))}; empty: the tip {tip!r})')


class OwnEngine:
    """This package's integrator (`integration.METHODS[method]`) with the mechanical stops
    `stops` (an `integration.JointStops`, or None: none) and an optional external wrench.
    Stateless between calls: the state is what `advance` is given."""

    name = 'own'

    def __init__(self, model, dt, method='rk4', stops=None):
        self.model, self.dt, self.method = model, float(dt), method
        self._step = integration.METHODS[method]
        self.stops = stops
        self._frames = None
        self._wrench = None          # (k, point in link frame k+1, w (6,)) or None
        self._extra = None           # the wrench's effort function for the integrator

    def prepare(self, model, q):
        """Generates the kernels now (tens of ms), not in the first tick after the loop
        closed, and the stops' batch kernel, not at the first contact."""
        zero = np.zeros(model.n)
        self._step(model, np.asarray(q, dtype=float), zero, zero, self.dt)
        if self.stops is not None and self.stops.any:
            self.stops.gains(model, np.asarray(q, dtype=float), self.dt)

    def prepare_model(self, model):
        """A new model (payload): binds its kernels now (the new model shares the old
        one's compiled kernels: microseconds); `use_model` switches to it."""
        zero = np.zeros(model.n)
        self._step(model, zero, zero, zero, self.dt)

    def use_model(self, model, prepared=None):
        self.model = model

    def set_gravity(self, gravity):
        """The own engine takes gravity from the model (`RobotModel.with_gravity`)."""

    def frames(self):
        if self._frames is None:
            self._frames = link_frames(self.model)
        return self._frames

    def set_wrench(self, frame, force, moment):
        """The wrench [force; moment] (base frame, moment about the frame's origin) on
        `frame` from now on; all zero clears it. FrameError / ValueError on bad input."""
        w = wrench_vector(force, moment)
        frames, base, tip = self.frames()
        k, T = resolve_frame(frames, base, tip, frame)
        if w is None:
            self._wrench = self._extra = None
            return
        chain = self.model.chain
        # the frame's origin in link frame k+1 (what kinematics.jacobian's point means)
        R_l, p_l = ((chain.R_tip, chain.p_tip) if k == self.model.n - 1
                    else (chain.R_link[k], chain.p_link[k]))
        point = R_l.T @ (T[:3, 3] - p_l)
        self._wrench = (k, point, w)
        from robot_dynamics import kinematics

        def extra(model, q, qd):
            return kinematics.jacobian(model, q, link=k, point=point).T @ w
        self._extra = extra

    @property
    def wrench(self):
        return None if self._wrench is None else self._wrench[2]

    def external_effort(self, model, q):
        """τ_ext = J_kᵀ w at q (zeros without a wrench)."""
        if self._extra is None:
            return np.zeros(model.n)
        return self._extra(model, np.asarray(q, dtype=float), None)

    def advance(self, model, q, qd, tau, steps):
        """`steps` steps from (q, q̇) under `tau` (held): (q, q̇, stop effort at the end
        (n,), largest |stop effort| over the steps (n,) or None without stops)."""
        dt, extra = self.dt, self._extra
        if extra is not None:
            extra_of_model = lambda q_, qd_: extra(model, q_, qd_)   # noqa: E731
        else:
            extra_of_model = None
        if self.stops is None:
            if extra_of_model is None:
                for _ in range(steps):
                    q, qd = self._step(model, q, qd, tau, dt)
            else:
                for _ in range(steps):
                    q, qd = integration.step_with_effort(self._step, model, q, qd, tau, dt,
                                                         extra_of_model)
            return q, qd, None, None
        stop = peak = None
        step = self.stops.step
        for _ in range(steps):
            q, qd, stop = step(self._step, model, q, qd, tau, dt, extra_of_model)
            if stop.any():
                peak = np.abs(stop) if peak is None else np.maximum(peak, np.abs(stop))
        return q, qd, stop, peak


def make_engine(name, model, joints, dt, method='rk4', stops=None, model_file='',
                limits=True, log=None):
    """The engine `name` ('own' | 'mujoco') for `model` (its joints named `joints`).

    own: `OwnEngine` with `stops`. mujoco: `mujoco_engine.MujocoEngine` on `model_file`
    (an MJCF file; '' = generated from `model`, with MuJoCo joint limits when `limits`);
    ImportError naming ``pip install mujoco`` when MuJoCo is absent, ValueError naming a
    controller joint the MJCF lacks. `log(line)` receives the one-line notes (MJCF joints
    no controller joint drives)."""
    if name == 'own':
        return OwnEngine(model, dt, method, stops)
    if name == 'mujoco':
        from robot_dynamics import mujoco_engine
        if model_file:
            return mujoco_engine.MujocoEngine.from_file(model_file, joints, dt, method,
                                                        robot_model=model, log=log)
        return mujoco_engine.MujocoEngine.from_robot_model(model, joints, dt, method,
                                                           limits=limits, log=log)
    raise ValueError(f'engine: {name!r} unknown, expected one of {ENGINES}')


__all__ = ['ENGINES', 'TOOL', 'FrameError', 'OwnEngine', 'link_frames', 'make_engine',
           'resolve_frame', 'wrench_vector']
