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

from robot_dynamics.dynamics import kinematics
from robot_dynamics.simulation import integration
from robot_dynamics.simulation.engine_frames import (FrameError, link_frames, resolve_frame,
                                                     TOOL, wrench_vector)

ENGINES = ('own', 'mujoco')


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

    def advance(self, model, q, qd, tau, steps, stretch=0.0):
        """`steps` steps from (q, q̇) under `tau` (held): (q, q̇, stop effort at the end
        (n,), largest |stop effort| over the steps (n,) or None without stops).
        stretch [s]: added to the first step's length (|stretch| < dt), for a free-running
        plant whose tick grid moved: its simulated time stays on the wall clock."""
        if not stretch:
            return self._advance(model, q, qd, tau, steps, self.dt)
        q, qd, stop, peak = self._advance(model, q, qd, tau, 1, self.dt + stretch)
        if steps <= 1:
            return q, qd, stop, peak
        q, qd, stop, later = self._advance(model, q, qd, tau, steps - 1, self.dt)
        if peak is None or later is None:
            return q, qd, stop, later if peak is None else peak
        return q, qd, stop, np.maximum(peak, later)

    def _advance(self, model, q, qd, tau, steps, dt):
        extra = self._extra
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
        from robot_dynamics.simulation import mujoco_engine
        if model_file:
            return mujoco_engine.MujocoEngine.from_file(model_file, joints, dt, method,
                                                        robot_model=model, log=log)
        return mujoco_engine.MujocoEngine.from_robot_model(model, joints, dt, method,
                                                           limits=limits, log=log)
    raise ValueError(f'engine: {name!r} unknown, expected one of {ENGINES}')


__all__ = ['ENGINES', 'TOOL', 'FrameError', 'OwnEngine', 'link_frames', 'make_engine',
           'resolve_frame', 'wrench_vector']
