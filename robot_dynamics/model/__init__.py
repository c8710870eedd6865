"""The robot model: a serial chain described by Denavit–Hartenberg parameters or a URDF.

`RobotModel` is immutable and validated once. Everything that does not depend on the
joint state is precomputed here, in one internal representation that every algorithm
uses (see ``Chain`` below):

    body i frame = parent body frame · placement_i · joint_i(q_i)

where ``placement_i`` is a constant rigid transform (rotation ``R0[i]``, translation
``p0[i]``) and ``joint_i`` is a rotation about, or a translation along, the local z axis.
Both DH conventions map onto it (doc/conventions.md):

* modified (Craig): ``T_{i-1,i} = Rx(α_i) Tx(a_i) Rz(θ_i) Tz(d_i)``: placement = Rx(α_i) Tx(a_i),
  body frame i = link frame i;
* standard (distal): ``T_{i-1,i} = Rz(θ_i) Tz(d_i) Tx(a_i) Rx(α_i)``: body frame i is the
  frame on joint i (link frame i-1 turned by joint i); placement_i = Tx(a_{i-1}) Rx(α_{i-1})
  (identity for i = 1); link frame i = body frame i · Tx(a_i) Rx(α_i). The inertial
  parameters, given in link frame i, are moved into body frame i at construction.

``Tx(a) Rx(α) = Rx(α) Tx(a)``, so both conventions give placements of the same form.
A URDF builds the same ``Chain`` directly (`robot_dynamics.urdf`, `RobotModel.from_chain`);
such a model has no DH table (``a``, ``alpha``, ``d``, ``theta``, ``dh_convention`` are None).
"""

import math
import os
import warnings
from dataclasses import dataclass

import numpy as np

from robot_dynamics.parameters import ROBOT_KEYS

from robot_dynamics.model.kernel_cache import KernelCache

__all__ = ['RobotModel', 'Payload', 'ModelWarning']

REVOLUTE = 'revolute'
PRISMATIC = 'prismatic'
CONVENTIONS = ('standard', 'modified')
JOINT_TYPES = (REVOLUTE, PRISMATIC)
PER_JOINT_OPTIONAL = ('armature', 'viscous_friction', 'coulomb_friction',
                      'position_min', 'position_max', 'velocity_max', 'effort_max',
                      'friction_model', 'coulomb_friction_negative', 'stribeck_friction',
                      'stribeck_velocity', 'effort_offset')
# Per joint friction laws (`RobotModel.friction_model`; dynamics.friction_torques):
#   coulomb     b q̇ + f_c sign(q̇)                                       (the default)
#   asymmetric  b q̇ + f_c [q̇ > 0] − f_c⁻ [q̇ < 0]                 (coulomb_friction_negative)
#   tanh        b q̇ + f_c tanh(q̇ / v_s)                                (stribeck_velocity)
#   stribeck    b q̇ + (f_c + f_s exp(−(q̇ / v_s)²)) sign(q̇)   (stribeck_friction, v_s)
FRICTION_MODELS = ('coulomb', 'asymmetric', 'tanh', 'stribeck')
DEFAULT_STRIBECK_VELOCITY = 0.01
DEFAULT_GRAVITY = (0.0, 0.0, -9.81)
URDF_KEYS = ('urdf', 'urdf_file', 'base_link', 'tip_link', 'use_urdf_friction',
             'lock_side_joints')


# The robot descriptions other than a DH table, by `robot.source`: name -> function of the
# nested robot block that returns the model. `robot_dynamics.urdf` adds "urdf" (the package
# imports it), so that module depends on this one and not the other way round.
MODEL_SOURCES = {}


def register_model_source(name, build):
    """Let `RobotModel.from_params` build ``robot.source: <name>`` blocks with
    ``build(block)``."""
    MODEL_SOURCES[name] = build




class ModelWarning(UserWarning):
    """Physically doubtful but accepted model data (e.g. textbook inertias)."""


@dataclass(frozen=True)
class Payload:
    """A rigid body attached to the last link: mass [kg], centre of mass [m] and inertia
    about the centre of mass [kg m²] (3×3), both in the last DH link frame."""

    mass: float = 0.0
    com: tuple = (0.0, 0.0, 0.0)
    inertia: tuple = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))


def rot_x(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_z(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def transform(rotation, translation):
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = translation
    return out


def inertia_from_urdf6(values):
    """(ixx, ixy, ixz, iyy, iyz, izz) -> symmetric 3×3 matrix."""
    ixx, ixy, ixz, iyy, iyz, izz = values
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def combine_bodies(m1, c1, i1, m2, c2, i2):
    """Mass, centre of mass and centroidal inertia of two rigid bodies in one frame."""
    m = m1 + m2
    if m <= 0.0:
        return 0.0, np.zeros(3), i1 + i2
    c = (m1 * c1 + m2 * c2) / m
    inertia = np.zeros((3, 3))
    for mk, ck, ik in ((m1, c1, i1), (m2, c2, i2)):
        r = ck - c
        inertia += ik + mk * (np.dot(r, r) * np.eye(3) - np.outer(r, r))
    return m, c, inertia


@dataclass(frozen=True)
class Chain:
    """The internal, convention-free description of a serial chain (all numpy arrays,
    precomputed, read-only). Body i's joint acts about/along its local z axis.

    R0, p0:     (n, 3, 3), (n, 3) constant placement of joint i in body i-1 (body 0 = base)
    theta0, d0: (n,) constant rotation about / translation along z of joint i
    prismatic:  (n,) bool
    mass, com, inertia: (n,), (n, 3), (n, 3, 3) body i in body frame i (payload included)
    R_tip, p_tip: the last DH link frame in body frame n (where wrenches and the payload live)
    R_link, p_link: (n, 3, 3), (n, 3) DH link frame i in body frame i (for kinematics)
    """

    R0: np.ndarray
    p0: np.ndarray
    theta0: np.ndarray
    d0: np.ndarray
    prismatic: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    R_tip: np.ndarray
    p_tip: np.ndarray
    R_link: np.ndarray
    p_link: np.ndarray


def _read_only(array):
    array = np.array(array, dtype=float)
    array.setflags(write=False)
    return array


class RobotModel:
    """An immutable serial-arm model. Build with `from_params`, `from_yaml` or the
    constructor; all lengths in m, angles in rad, masses in kg, inertias in kg m²."""

    def __init__(self, dh_convention, joint_types, a, alpha, d, theta, mass, com, inertia,
                 gravity=DEFAULT_GRAVITY, armature=None, viscous_friction=None,
                 coulomb_friction=None, position_min=None, position_max=None,
                 velocity_max=None, effort_max=None, payload=None,
                 accept_nonphysical_inertia=False, continuous=None, friction_model=None,
                 coulomb_friction_negative=None, stribeck_friction=None,
                 stribeck_velocity=None, effort_offset=None):
        if dh_convention not in CONVENTIONS:
            raise ValueError(f'robot.dh_convention: unknown convention {dh_convention!r}, '
                             f'expected one of {CONVENTIONS}')
        joint_types = tuple(joint_types) if not isinstance(joint_types, str) else None
        if not joint_types:
            raise ValueError('robot.joint_types: expected a non-empty list of joint types')
        n = len(joint_types)
        _choices('joint_types', joint_types, JOINT_TYPES, 'joint type')
        self._convention = dh_convention
        self._joint_types = joint_types
        self._n = n
        self._a = _vector('a', a, n)
        self._alpha = _vector('alpha', alpha, n)
        self._d = _vector('d', d, n)
        self._theta = _vector('theta', theta, n)
        self._mass = _vector('mass', mass, n)
        for i, m in enumerate(self._mass):
            if m < 0.0:
                raise ValueError(f'robot.mass[{i}]: negative mass {m} kg (link {i + 1})')
        self._com = _vector('com', com, 3 * n).reshape(n, 3)
        inertia6 = _vector('inertia', inertia, 6 * n).reshape(n, 6)
        self._inertia = np.array([inertia_from_urdf6(row) for row in inertia6])
        self._set_nonphysical(accept_nonphysical_inertia, [
            issue for i in range(n) for issue in _inertia_issues(
                f'robot.inertia (link {i + 1}, index {6 * i}..{6 * i + 5})',
                self._inertia[i], self._mass[i])])
        self._set_joint_data(gravity, armature, viscous_friction, coulomb_friction,
                             position_min, position_max, velocity_max, effort_max, payload)
        self._continuous = self._continuous_flags(continuous)
        self._set_drive_data(friction_model, coulomb_friction_negative, stribeck_friction,
                             stribeck_velocity, effort_offset)
        for array in (self._a, self._alpha, self._d, self._theta, self._mass, self._com,
                      self._inertia):
            array.setflags(write=False)
        self._source, self._joint_names, self._rigid_chain, self._params = 'dh', None, None, None
        self._chain = self._build_chain()

    def _set_nonphysical(self, accepted, issues):
        """Keep what is non-physical about the bodies' inertias; one ModelWarning for all
        of it unless `accepted` (textbook data chosen on purpose)."""
        if not isinstance(accepted, bool):
            raise ValueError(f'robot.accept_nonphysical_inertia: expected true or false, '
                             f'got {accepted!r}')
        self._accept_nonphysical = accepted
        self._nonphysical = tuple(issues)
        if issues and not accepted:
            warnings.warn('non-physical inertial data, accepted as given: '
                          + '; '.join(issues) + ' (textbook data kept on purpose: set '
                          'robot.accept_nonphysical_inertia: true)', ModelWarning, stacklevel=4)

    nonphysical_inertia = property(
        lambda self: self._nonphysical,
        doc='What is non-physical about the bodies\' inertias (one line each; empty for '
            'physically valid data).')
    nonphysical_inertia_accepted = property(
        lambda self: self._accept_nonphysical and bool(self._nonphysical),
        doc='True if the model has non-physical inertias marked as chosen on purpose '
            '(robot.accept_nonphysical_inertia).')

    def _set_joint_data(self, gravity, armature, viscous_friction, coulomb_friction,
                        position_min, position_max, velocity_max, effort_max, payload):
        """Validate and store gravity, the optional per-joint data and the payload."""
        n = self._n
        self._gravity = _vector('gravity', gravity, 3)
        self._gravity.setflags(write=False)
        self._armature = _optional('armature', armature, n, 0.0, nonnegative=True,
                                   finite=True)
        self._viscous = _optional('viscous_friction', viscous_friction, n, 0.0, nonnegative=True,
                                  finite=True)
        self._coulomb = _optional('coulomb_friction', coulomb_friction, n, 0.0, nonnegative=True,
                                  finite=True)
        self._position_min = _optional('position_min', position_min, n, -math.inf)
        self._position_max = _optional('position_max', position_max, n, math.inf)
        for i in range(n):
            if self._position_min[i] >= self._position_max[i]:
                raise ValueError(f'robot.position_min[{i}] >= robot.position_max[{i}] '
                                 f'({self._position_min[i]} >= {self._position_max[i]})')
        self._velocity_max = _optional('velocity_max', velocity_max, n, math.inf, positive=True)
        self._effort_max = _optional('effort_max', effort_max, n, math.inf, positive=True)
        self._payload = _payload(payload)

    def _continuous_flags(self, continuous):
        """`robot.continuous`: one true/false per joint (default all false); a continuous
        joint turns without end (URDF ``continuous``): revolute, without position limits."""
        n = self._n
        if continuous is None:
            flags = np.zeros(n, dtype=bool)
        else:
            values = list(continuous) if isinstance(continuous, (list, tuple, np.ndarray)) \
                else None
            if values is None or len(values) != n:
                raise ValueError(f'robot.continuous: expected {n} values true/false (one per '
                                 f'joint), got {continuous!r}')
            for i, value in enumerate(values):
                if not isinstance(value, (bool, np.bool_)):
                    raise ValueError(f'robot.continuous[{i}]: expected true or false, got '
                                     f'{value!r}')
            flags = np.array(values, dtype=bool)
        for i in np.flatnonzero(flags):
            if self._joint_types[i] != REVOLUTE:
                raise ValueError(f'robot.continuous[{i}]: joint {i + 1} is '
                                 f'{self._joint_types[i]}; only a revolute joint can be '
                                 'continuous')
            if math.isfinite(self._position_min[i]) or math.isfinite(self._position_max[i]):
                raise ValueError(f'robot.continuous[{i}]: joint {i + 1} has position limits '
                                 f'[{self._position_min[i]}, {self._position_max[i]}]; a '
                                 'continuous joint has none')
        flags.setflags(write=False)
        return flags

    def _set_drive_data(self, friction_model, coulomb_friction_negative, stribeck_friction,
                        stribeck_velocity, effort_offset):
        """Validate and store the per-joint friction law (`FRICTION_MODELS`), its extra
        parameters and the effort sensor's offset."""
        n = self._n
        if friction_model is None:
            models = ('coulomb',) * n
        else:
            if isinstance(friction_model, str) or not hasattr(friction_model, '__len__') \
                    or len(friction_model) != n:
                raise ValueError(f'robot.friction_model: expected a list of {n} of '
                                 f'{FRICTION_MODELS}, got {friction_model!r}')
            models = tuple(friction_model)
            _choices('friction_model', models, FRICTION_MODELS, 'friction model')
        self._friction_model = models
        negative = _optional('coulomb_friction_negative', coulomb_friction_negative, n, 0.0,
                             nonnegative=True, finite=True)
        self._coulomb_negative_given = coulomb_friction_negative is not None
        self._coulomb_negative = _read_only(np.where(
            np.array([m == 'asymmetric' for m in models]), negative, self._coulomb))
        self._stribeck = _read_only(np.where(
            np.array([m == 'stribeck' for m in models]),
            _optional('stribeck_friction', stribeck_friction, n, 0.0, nonnegative=True,
                      finite=True), 0.0))
        self._stribeck_velocity = _optional('stribeck_velocity', stribeck_velocity, n,
                                            DEFAULT_STRIBECK_VELOCITY, positive=True,
                                            finite=True)
        for i, v in enumerate(self._stribeck_velocity):
            if not math.isfinite(1.0 / v):          # the generated code multiplies by 1/v_s
                raise ValueError(f'robot.stribeck_velocity[{i}]: {v} is too small (1/v '
                                 'overflows)')
        self._effort_offset = _optional('effort_offset', effort_offset, n, 0.0, finite=True)
        # asked by the dynamics at every call: decided once (the model is immutable)
        self._plain_friction = all(m == 'coulomb' for m in models)
        self._has_friction = bool(np.any(self._viscous) or np.any(self._coulomb)
                                  or np.any(self._coulomb_negative) or np.any(self._stribeck))

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_params(cls, robot):
        """Build from the `robot` parameter block as a dict: nested
        (``{'payload': {'mass': 1.0}}``) or flattened with dots (``{'payload.mass': 1.0}``),
        the way a node reads it with ``get_parameters_by_prefix('robot')``. A None value
        (``null``: how ``ros2 param dump`` writes an unset parameter) is left out."""
        if not isinstance(robot, dict):
            raise ValueError(f'robot: expected a mapping of parameters, got {type(robot).__name__}')
        block = _nest({key: value for key, value in _flatten(robot).items() if value is not None})
        # the DH keys: the robot block's table (robot_dynamics/parameters/robot.py)
        known = {key.partition('.')[0] for key in ROBOT_KEYS} - {'source', *URDF_KEYS}
        source = block.get('source', 'dh')
        if source != 'dh':
            if source not in MODEL_SOURCES:
                raise ValueError(f'robot.source: unknown model source {source!r}, expected '
                                 + ' or '.join(f'"{s}"' for s in ('dh', *MODEL_SOURCES)))
            return MODEL_SOURCES[source](block)
        ignored = {'source', 'name', 'description', *URDF_KEYS}  # read when source is urdf
        unknown = sorted(set(block) - known - ignored)
        if unknown:
            raise ValueError(f'robot.{unknown[0]}: unknown key (known keys: {sorted(known)})')
        required = ('dh_convention', 'joint_types', 'a', 'alpha', 'd', 'theta', 'mass',
                    'com', 'inertia')
        for key in required:
            if key not in block:
                raise ValueError(f'robot.{key}: missing required key')
        kwargs = {key: block[key] for key in required}
        for key in ('gravity', 'accept_nonphysical_inertia', 'continuous',
                    *PER_JOINT_OPTIONAL):
            if key in block:
                kwargs[key] = block[key]
        if 'payload' in block:
            kwargs['payload'] = block['payload']
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, path, node_name=None):
        """Read the `robot` block of a ROS 2 parameter file as rcl reads it: the ``/**``
        sections and, when `node_name` is given, those naming that node, later values
        winning (robot_dynamics.parameters.layering)."""
        from robot_dynamics.parameters.layering import robot_block_of_file
        block = robot_block_of_file(path, node_name)
        urdf_file = block.get('urdf_file')
        if isinstance(urdf_file, str) and urdf_file and not (
                os.path.isabs(urdf_file) or '://' in urdf_file):
            block['urdf_file'] = os.path.join(os.path.dirname(os.path.abspath(path)), urdf_file)
        return cls.from_params(block)

    @classmethod
    def from_chain(cls, chain, joint_names=None, gravity=DEFAULT_GRAVITY, armature=None,
                   viscous_friction=None, coulomb_friction=None, position_min=None,
                   position_max=None, velocity_max=None, effort_max=None, payload=None,
                   params=None, source='urdf', accept_nonphysical_inertia=False,
                   continuous=None, friction_model=None, coulomb_friction_negative=None,
                   stribeck_friction=None, stribeck_velocity=None, effort_offset=None):
        """A model from a ready `Chain` that is not a DH table (e.g. read from a URDF by
        `robot_dynamics.urdf`). The chain's inertias must exclude the payload; `params` is
        the `robot` block that rebuilds the model (returned by `to_params`); `continuous`:
        per joint, true for a joint that turns without end (URDF ``continuous``)."""
        n = len(chain.prismatic)
        if n == 0:
            raise ValueError('robot: a chain needs at least one movable joint')
        new = object.__new__(cls)
        new._n = n
        new._convention = new._a = new._alpha = new._d = new._theta = None
        new._joint_types = tuple(PRISMATIC if p else REVOLUTE for p in chain.prismatic)
        names = tuple(joint_names) if joint_names is not None else None
        if names is not None and len(names) != n:
            raise ValueError(f'joint_names: expected {n} names, got {len(names)}')
        new._set_nonphysical(accept_nonphysical_inertia, [
            issue for i in range(n) for issue in _inertia_issues(
                f'robot: body of joint {names[i] if names else i + 1}',
                chain.inertia[i], chain.mass[i])])
        if accept_nonphysical_inertia and params is not None:
            params = dict(params, accept_nonphysical_inertia=True)
        # link-frame view of the inertial data, like a DH model's (payload excluded)
        R_l, p_l = chain.R_link, chain.p_link
        new._mass = _read_only(chain.mass)
        new._com = _read_only(np.einsum('nji,nj->ni', R_l, chain.com - p_l))
        new._inertia = _read_only(np.einsum('nji,njk,nkl->nil', R_l, chain.inertia, R_l))
        new._set_joint_data(gravity, armature, viscous_friction, coulomb_friction,
                            position_min, position_max, velocity_max, effort_max, payload)
        new._continuous = new._continuous_flags(continuous)
        new._set_drive_data(friction_model, coulomb_friction_negative, stribeck_friction,
                            stribeck_velocity, effort_offset)
        fields = {key: _read_only(getattr(chain, key)) for key in Chain.__dataclass_fields__
                  if key != 'prismatic'}
        prismatic = np.array(chain.prismatic, dtype=bool)
        prismatic.setflags(write=False)
        new._rigid_chain = Chain(prismatic=prismatic, **fields)
        new._source, new._joint_names, new._params = source, names, params
        new._chain = new._build_chain()
        return new

    def with_payload(self, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None):
        """A copy of this model with another payload (mass [kg], com [m] and centroidal
        inertia [kg m²] in the last link frame; inertia 3×3 or URDF-order 6)."""
        new = object.__new__(RobotModel)
        new.__dict__.update(self.__dict__)
        new._payload = _payload({'mass': mass, 'com': com,
                                 'inertia': inertia if inertia is not None else [0.0] * 6})
        new._chain = new._build_chain()
        # the generated code takes the last body's parameters at run time: shared; the
        # per-model bound kernels are rebuilt on first use
        KernelCache.payload_copy(self, new)
        return new

    def with_gravity(self, gravity):
        """A copy of this model under another gravity vector [m/s², base frame], e.g.
        ``(0, 0, 0)`` for a robot whose drives already compensate gravity. The generated
        code holds gravity as constants, so the copy generates its own (payload copies of
        it share that)."""
        new = object.__new__(RobotModel)
        new.__dict__.update(self.__dict__)
        KernelCache.gravity_copy(new)
        new._gravity = _vector('gravity', gravity, 3)
        new._gravity.setflags(write=False)
        if new._params is not None:
            new._params = dict(new._params, gravity=new._gravity.tolist())
        return new

    def _build_chain(self):
        if self._rigid_chain is not None:
            ch = self._rigid_chain
            return self._chain_with_payload(ch.R0, ch.p0, ch.mass.copy(), ch.com.copy(),
                                            ch.inertia.copy(), ch.R_tip, ch.p_tip,
                                            ch.R_link, ch.p_link)
        n = self._n
        R0 = np.zeros((n, 3, 3))
        p0 = np.zeros((n, 3))
        R_link = np.zeros((n, 3, 3))
        p_link = np.zeros((n, 3))
        com = np.zeros((n, 3))
        inertia = np.zeros((n, 3, 3))
        mass = np.array(self._mass, dtype=float)
        for i in range(n):
            if self._convention == 'modified':
                R0[i] = rot_x(self._alpha[i])
                p0[i] = (self._a[i], 0.0, 0.0)
                R_link[i] = np.eye(3)
            else:
                if i == 0:
                    R0[i] = np.eye(3)
                else:
                    R0[i] = rot_x(self._alpha[i - 1])
                    p0[i] = (self._a[i - 1], 0.0, 0.0)
                R_link[i] = rot_x(self._alpha[i])
                p_link[i] = (self._a[i], 0.0, 0.0)
            com[i] = p_link[i] + R_link[i] @ self._com[i]
            inertia[i] = R_link[i] @ self._inertia[i] @ R_link[i].T
        R_tip, p_tip = R_link[n - 1].copy(), p_link[n - 1].copy()
        return self._chain_with_payload(R0, p0, mass, com, inertia, R_tip, p_tip, R_link, p_link)

    def _chain_with_payload(self, R0, p0, mass, com, inertia, R_tip, p_tip, R_link, p_link):
        n = self._n
        pl = self._payload
        if pl.mass > 0.0 or np.any(np.asarray(pl.inertia)):
            c_pl = p_tip + R_tip @ np.asarray(pl.com)
            i_pl = R_tip @ np.asarray(pl.inertia) @ R_tip.T
            mass[n - 1], com[n - 1], inertia[n - 1] = combine_bodies(
                mass[n - 1], com[n - 1], inertia[n - 1], pl.mass, c_pl, i_pl)
        prismatic = np.array([jt == PRISMATIC for jt in self._joint_types])
        if self._rigid_chain is not None:
            theta0, d0 = self._rigid_chain.theta0, self._rigid_chain.d0
        else:
            theta0, d0 = self._theta, self._d
        fields = dict(R0=R0, p0=p0, theta0=theta0, d0=d0, mass=mass, com=com,
                      inertia=inertia, R_tip=R_tip, p_tip=p_tip, R_link=R_link, p_link=p_link)
        fields = {key: _read_only(value) for key, value in fields.items()}
        prismatic.setflags(write=False)
        return Chain(prismatic=prismatic, **fields)

    # ------------------------------------------------------------------ accessors

    n = property(lambda self: self._n, doc='Degrees of freedom.')
    source = property(lambda self: self._source, doc="'dh' or 'urdf'.")
    joint_names = property(lambda self: self._joint_names,
                           doc='Joint names from the URDF; None for a DH model.')
    dh_convention = property(lambda self: self._convention, doc='None unless a DH model.')
    joint_types = property(lambda self: self._joint_types)
    a = property(lambda self: self._a)
    alpha = property(lambda self: self._alpha)
    d = property(lambda self: self._d)
    theta = property(lambda self: self._theta)
    mass = property(lambda self: self._mass, doc='Link masses as given (payload excluded; '
                    'for a URDF, each body with the fixed links merged into it).')
    com = property(lambda self: self._com, doc='(n, 3) centres of mass in link frames.')
    inertia = property(lambda self: self._inertia, doc='(n, 3, 3) centroidal inertias, link '
                       'frames (URDF: link frame i = child link of joint i, the last one = tip).')
    gravity = property(lambda self: self._gravity)
    armature = property(lambda self: self._armature)
    viscous_friction = property(lambda self: self._viscous)
    coulomb_friction = property(lambda self: self._coulomb, doc='Coulomb friction level '
                                'f_c (for q̇ > 0 with the asymmetric law) [N m | N].')
    friction_model = property(lambda self: self._friction_model,
                              doc='Per joint friction law, one of FRICTION_MODELS.')
    coulomb_friction_negative = property(
        lambda self: self._coulomb_negative,
        doc='Coulomb level for q̇ < 0: coulomb_friction_negative of asymmetric joints, '
            'coulomb_friction of the others.')
    stribeck_friction = property(lambda self: self._stribeck,
                                 doc='Extra friction f_s at rest of stribeck joints.')
    stribeck_velocity = property(lambda self: self._stribeck_velocity,
                                 doc='Shape velocity v_s of tanh and stribeck joints.')
    effort_offset = property(lambda self: self._effort_offset,
                             doc='The effort sensor\'s bias: measured effort = applied + '
                                 'offset. A measurement property: the dynamics and the '
                                 'controller\'s command do not use it.')

    plain_friction = property(lambda self: self._plain_friction, doc='True when every '
                              'joint\'s friction is viscous + symmetric Coulomb.')
    position_min = property(lambda self: self._position_min)
    position_max = property(lambda self: self._position_max)
    velocity_max = property(lambda self: self._velocity_max)
    effort_max = property(lambda self: self._effort_max)
    continuous = property(
        lambda self: self._continuous,
        doc='(n,) bool: the joints that turn without end (URDF continuous joints, or '
            'robot.continuous of a DH model); a controller wraps their position errors into '
            '(-pi, pi].')
    payload = property(lambda self: self._payload)
    chain = property(lambda self: self._chain, doc='The precomputed internal chain.')

    has_friction = property(lambda self: self._has_friction)

    @property
    def has_armature(self):
        return bool(np.any(self._armature))

    def to_params(self):
        """The `robot` parameter block (nested dict) that rebuilds this model."""
        if self._rigid_chain is not None:
            return self._chain_params()
        n = self._n
        block = {
            'dh_convention': self._convention,
            'joint_types': list(self._joint_types),
            'a': self._a.tolist(), 'alpha': self._alpha.tolist(),
            'd': self._d.tolist(), 'theta': self._theta.tolist(),
            'mass': self._mass.tolist(), 'com': self._com.reshape(-1).tolist(),
            'inertia': [float(v) for i in range(n) for v in _urdf6(self._inertia[i])],
            'gravity': self._gravity.tolist(),
        }
        if self._accept_nonphysical:
            block['accept_nonphysical_inertia'] = True
        if self._continuous.any():
            block['continuous'] = [bool(c) for c in self._continuous]
        defaults = {'armature': 0.0, 'viscous_friction': 0.0, 'coulomb_friction': 0.0,
                    'position_min': -math.inf, 'position_max': math.inf,
                    'velocity_max': math.inf, 'effort_max': math.inf}
        for key, default in defaults.items():
            values = getattr(self, '_' + {'viscous_friction': 'viscous',
                                          'coulomb_friction': 'coulomb'}.get(key, key))
            if np.any(values != default):
                block[key] = values.tolist()
        block.update(self.drive_params())
        if self._payload.mass > 0.0 or np.any(np.asarray(self._payload.inertia)):
            block['payload'] = {'mass': self._payload.mass, 'com': list(self._payload.com),
                                'inertia': _urdf6(np.asarray(self._payload.inertia))}
        return block

    def drive_params(self):
        """The friction-law and effort-offset keys of the `robot` block that differ from
        the defaults (`friction_model` whenever a joint's is not coulomb)."""
        block = {}
        if not self.plain_friction:
            block['friction_model'] = list(self._friction_model)
        asymmetric = np.array([m == 'asymmetric' for m in self._friction_model])
        if np.any(asymmetric):
            block['coulomb_friction_negative'] = self._coulomb_negative.tolist()
        if np.any(self._stribeck):
            block['stribeck_friction'] = self._stribeck.tolist()
        if np.any(self._stribeck_velocity != DEFAULT_STRIBECK_VELOCITY):
            block['stribeck_velocity'] = self._stribeck_velocity.tolist()
        if np.any(self._effort_offset):
            block['effort_offset'] = self._effort_offset.tolist()
        return block

    def _chain_params(self):
        if self._params is None:
            raise ValueError('to_params: this model was built from a Chain without a '
                             'parameter block')
        block = dict(self._params)
        block.pop('payload', None)
        if self._payload.mass > 0.0 or np.any(np.asarray(self._payload.inertia)):
            block['payload'] = {'mass': self._payload.mass, 'com': list(self._payload.com),
                                'inertia': _urdf6(np.asarray(self._payload.inertia))}
        return block

    def __getstate__(self):
        """Pickle the description, not the compiled kernels cached by the fast path."""
        return KernelCache.pickle_state(dict(self.__dict__))

    def __repr__(self):
        kinds = ''.join('R' if jt == REVOLUTE else 'P' for jt in self._joint_types)
        source = f'{self._convention} DH' if self._source == 'dh' else self._source
        return f'RobotModel(n={self._n}, {source}, joints {kinds})'


# ---------------------------------------------------------------------- helpers


def _flatten(mapping, prefix=''):
    flat = {}
    for key, value in mapping.items():
        name = f'{prefix}{key}'
        if isinstance(value, dict):
            flat.update(_flatten(value, name + '.'))
        else:
            flat[name] = value
    return flat


def _nest(mapping):
    nested = {}
    for key, value in _flatten(mapping).items():
        head, _, tail = key.partition('.')
        if tail:
            nested.setdefault(head, {})
            if not isinstance(nested[head], dict):
                raise ValueError(f'robot.{head}: given both as a value and as a group')
            nested[head][tail] = value
        else:
            if isinstance(nested.get(head), dict):   # group seen first: do not drop it
                raise ValueError(f'robot.{head}: given both as a value and as a group')
            nested[head] = value
    return nested


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f'{name}: expected a number, got {value!r}')
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f'{name}: non-finite value {value}')
    return value


def _choices(key, values, allowed, what):
    """ValueError naming robot.KEY[i] for the first of `values` not in `allowed`."""
    for i, value in enumerate(values):
        if value not in allowed:
            raise ValueError(f'robot.{key}[{i}]: unknown {what} {value!r}, expected one of '
                             f'{allowed}')


def _vector(key, values, length, allow_inf=False):
    if isinstance(values, (str, bytes)) or not hasattr(values, '__len__'):
        raise ValueError(f'robot.{key}: expected a list of {length} numbers, got {values!r}')
    values = list(np.asarray(values, dtype=object).reshape(-1)) if isinstance(
        values, np.ndarray) else list(values)
    if len(values) != length:
        raise ValueError(f'robot.{key}: expected {length} values, got {len(values)}')
    out = np.empty(length)
    for i, v in enumerate(values):
        if allow_inf and isinstance(v, (int, float)) and not isinstance(v, bool) \
                and math.isinf(v):
            out[i] = float(v)
        else:
            out[i] = _number(f'robot.{key}[{i}]', v)
    return out


def _optional(key, values, n, default, nonnegative=False, positive=False, finite=False):
    """Per-joint values of `key` (`default` when None); infinite ones allowed unless
    `finite` (limits may be infinite, friction levels and offsets not: an infinite level
    makes the efforts at rest NaN)."""
    if values is None:
        out = np.full(n, default)
    else:
        out = _vector(key, values, n, allow_inf=not finite)
        for i, v in enumerate(out):
            if nonnegative and v < 0.0:
                raise ValueError(f'robot.{key}[{i}]: must be >= 0, got {v}')
            if positive and v <= 0.0:
                raise ValueError(f'robot.{key}[{i}]: must be > 0, got {v}')
    out.setflags(write=False)
    return out


def _inertia_issues(name, inertia, mass):
    """What is non-physical about one body (a list of lines naming it); raises ValueError
    for an asymmetric tensor."""
    if not np.allclose(inertia, inertia.T, rtol=0.0, atol=1e-12):
        raise ValueError(f'{name}: inertia tensor is not symmetric')
    eig = np.linalg.eigvalsh(inertia)
    scale = max(float(np.max(np.abs(eig))), 1e-12)
    issues = []
    if eig[0] < -1e-12 * scale:
        issues.append(f'{name}: inertia tensor is not positive semi-definite (eigenvalues '
                      f'{eig})')
    elif eig[2] > eig[0] + eig[1] + 1e-9 * scale:
        issues.append(f'{name}: principal moments {eig} violate the triangle inequality')
    if mass == 0.0 and np.any(eig > 0.0):
        issues.append(f'{name}: zero mass with non-zero inertia')
    return issues


def _check_inertia(name, inertia, mass):
    for issue in _inertia_issues(name, inertia, mass):
        warnings.warn(f'{issue} (non-physical); accepted as given', ModelWarning,
                      stacklevel=4)


def _urdf6(inertia):
    return [float(inertia[0, 0]), float(inertia[0, 1]), float(inertia[0, 2]),
            float(inertia[1, 1]), float(inertia[1, 2]), float(inertia[2, 2])]


def _payload(value):
    if value is None:
        return Payload()
    if isinstance(value, Payload):
        return value
    if not isinstance(value, dict):
        raise ValueError(f'robot.payload: expected a mapping with mass, com, inertia, got {value!r}')
    unknown = sorted(set(value) - {'mass', 'com', 'inertia'})
    if unknown:
        raise ValueError(f'robot.payload.{unknown[0]}: unknown key')
    mass = _number('robot.payload.mass', value.get('mass', 0.0))
    if mass < 0.0:
        raise ValueError(f'robot.payload.mass: negative mass {mass} kg')
    com = _vector('payload.com', value.get('com', [0.0, 0.0, 0.0]), 3)
    raw = value.get('inertia', [0.0] * 6)
    raw = np.asarray(raw, dtype=object)
    if raw.shape == (3, 3):
        inertia = np.array(raw, dtype=float)
    else:
        inertia = inertia_from_urdf6(_vector('payload.inertia', raw, 6))
    _check_inertia('robot.payload.inertia', inertia, mass)
    return Payload(mass=mass, com=tuple(float(c) for c in com),
                   inertia=tuple(tuple(float(v) for v in row) for row in inertia))
