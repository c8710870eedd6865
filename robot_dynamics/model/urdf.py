"""Robot models from URDF, and URDF from robot models (standard library XML only).

Reading (`model_from_urdf`, `model_from_params`): the serial chain from `base_link` to
`tip_link` of a URDF becomes the same internal ``Chain`` a DH table builds, so every
dynamics function takes either model. URDF semantics (ROS REP-103/URDF spec):

    child link frame = parent link frame · origin(xyz, rpy) · motion(q about/along axis)
    rpy: R = Rz(yaw) Ry(pitch) Rx(roll); the axis is in the joint (= child link) frame;
    <inertial>: mass, centre of mass at origin xyz, inertia about the COM in the frame
    rotated by origin rpy.

The ``Chain`` wants every joint about/along its body's local z axis, so body frame i is
the child link frame of movable joint i turned by a constant rotation ``A_i`` with
``A_i e_z = axis_i`` (``A_i = I`` when the axis is +z): the motion about ``axis_i`` is
``A_i Rz(q) A_iᵀ``, hence placement_i = (fixed transforms since body i-1) · origin_i · A_i
and link frame i = body frame i · A_iᵀ. Inertials are moved into body frames.

Decisions (doc/urdf.md):
* fixed joints merge their child into the body before them: on the chain, and fixed
  subtrees hanging off a body (sensors, grippers without joints). A fixed joint after the
  last movable joint belongs to the tip body; the tip frame is `tip_link`'s frame.
* Links before the first movable joint belong to the (fixed) base: their mass is ignored,
  and so is everything that hangs off them.
* A movable joint hanging off the chain (e.g. gripper fingers) is refused, or, with
  ``lock_side_joints``, frozen at q = 0 and merged like a fixed joint (warning).
* mimic joints on the chain and floating/planar joints are refused (not a serial chain of
  one-DOF joints).
* A movable joint's child link without <inertial> is massless (ModelWarning).
* ``robot.inertials`` {mass, com, inertia} (optional) replaces every body's inertial data
  (`inertial_override`): an identified arm is loaded without editing the URDF.
* ``continuous`` joints are `RobotModel.continuous` (they turn without end: a controller
  wraps their position error), unless ``robot.position_min``/``max`` give them limits.
* <limit>: lower/upper -> position_min/max (revolute, prismatic; continuous: none),
  velocity -> velocity_max, effort -> effort_max; a value <= 0 or lower == upper means
  "no limit" (warning). <dynamics damping friction> -> viscous/coulomb friction only with
  ``use_urdf_friction`` (off by default: URDF values are often placeholders).

Writing (`model_to_urdf`): link frames are our body frames (joint axis = z), so any model
(DH or URDF) exports exactly; the tip frame is a fixed child link ``tool0``.
"""

import math
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace

import numpy as np

from robot_dynamics.model import (
    Chain, DEFAULT_GRAVITY, ModelWarning, PER_JOINT_OPTIONAL, register_model_source, RobotModel,
    URDF_KEYS, combine_bodies, inertia_from_urdf6, transform)

__all__ = ['parse_urdf', 'model_from_urdf', 'model_from_params', 'model_to_urdf',
           'urdf_from_parameter_file', 'read_urdf_file', 'UrdfRobot', 'inertial_override']

MOVABLE = ('revolute', 'continuous', 'prismatic')
UNSUPPORTED = ('floating', 'planar')
# written to a URDF when the model has no limit (URDF needs numbers for revolute joints)
UNLIMITED_EFFORT = 1.0e6          # N·m or N
UNLIMITED_VELOCITY = 1.0e6        # rad/s or m/s
UNLIMITED_TRAVEL = 1.0e3          # m or rad, one-sided or prismatic position limits


# ---------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class UrdfInertial:
    mass: float
    T: np.ndarray          # 4×4 inertial frame in the link frame
    inertia: np.ndarray    # 3×3 about the COM, inertial-frame axes


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    type: str
    parent: str
    child: str
    T: np.ndarray          # 4×4 origin: joint frame in the parent link frame
    axis: np.ndarray       # unit vector in the joint frame
    lower: float
    upper: float
    velocity: float
    effort: float
    damping: float
    friction: float
    mimic: str


@dataclass(frozen=True)
class UrdfRobot:
    name: str
    links: dict            # name -> UrdfInertial or None
    joints: dict           # name -> UrdfJoint
    parent_joint: dict     # child link name -> UrdfJoint


def rpy_matrix(roll, pitch, yaw):
    """URDF fixed-axis roll, pitch, yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_rpy(R):
    """Roll, pitch, yaw of a rotation (inverse of `rpy_matrix`), accurate also near
    pitch = ±π/2: yaw first, then roll and pitch from Rz(-yaw) R = Ry(pitch) Rx(roll)."""
    yaw = math.atan2(R[1, 0], R[0, 0])
    c, s = math.cos(yaw), math.sin(yaw)
    M = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]]) @ R
    return math.atan2(-M[1, 2], M[1, 1]), math.atan2(-M[2, 0], M[0, 0]), yaw


def _floats(text, count, where):
    try:
        values = [float(v) for v in (text or '').split()]
    except ValueError:
        values = []
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise ValueError(f'{where}: expected {count} finite numbers, got {text!r}')
    return values


def _attribute(element, name, where, default=None):
    text = element.get(name) if element is not None else None
    if text is None:
        if default is None:
            raise ValueError(f'{where}: missing attribute {name!r}')
        return default
    return _floats(text, 1, f'{where} {name}')[0]


def _origin(element, where):
    """4×4 transform of an <origin xyz rpy> child (identity when absent)."""
    origin = element.find('origin')
    if origin is None:
        return np.eye(4)
    xyz = _floats(origin.get('xyz', '0 0 0'), 3, f'{where} <origin xyz>')
    rpy = _floats(origin.get('rpy', '0 0 0'), 3, f'{where} <origin rpy>')
    return transform(rpy_matrix(*rpy), xyz)


def _parse_inertial(link):
    element = link.find('inertial')
    if element is None:
        return None
    where = f'URDF link {link.get("name")!r} <inertial>'
    if element.find('mass') is None:
        raise ValueError(f'{where}: missing <mass value="...">')
    mass = _attribute(element.find('mass'), 'value', f'{where} <mass>')
    if mass < 0.0:
        raise ValueError(f'{where}: negative mass {mass} kg')
    tensor = element.find('inertia')
    keys = ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')
    values = [_attribute(tensor, key, f'{where} <inertia>', 0.0) for key in keys]
    return UrdfInertial(mass, _origin(element, where), inertia_from_urdf6(values))


def _parse_joint(element):
    name = element.get('name')
    where = f'URDF joint {name!r}'
    kind = element.get('type')
    if kind not in MOVABLE + UNSUPPORTED + ('fixed',):
        raise ValueError(f'{where}: unknown joint type {kind!r}')
    links = []
    for tag in ('parent', 'child'):
        child = element.find(tag)
        if child is None or not child.get('link'):
            raise ValueError(f'{where}: missing <{tag} link="...">')
        links.append(child.get('link'))
    axis = np.array(_floats(element.find('axis').get('xyz', '1 0 0'), 3, f'{where} <axis>')
                    if element.find('axis') is not None else [1.0, 0.0, 0.0])
    norm = float(np.linalg.norm(axis))
    if kind in MOVABLE and norm < 1e-12:
        raise ValueError(f'{where} <axis>: zero axis')
    limit, dynamics = element.find('limit'), element.find('dynamics')
    mimic = element.find('mimic')
    return UrdfJoint(
        name=name, type=kind, parent=links[0], child=links[1], T=_origin(element, where),
        axis=axis / norm if norm > 0.0 else axis,
        lower=_attribute(limit, 'lower', f'{where} <limit>', 0.0),
        upper=_attribute(limit, 'upper', f'{where} <limit>', 0.0),
        velocity=_attribute(limit, 'velocity', f'{where} <limit>', 0.0),
        effort=_attribute(limit, 'effort', f'{where} <limit>', 0.0),
        damping=_attribute(dynamics, 'damping', f'{where} <dynamics>', 0.0),
        friction=_attribute(dynamics, 'friction', f'{where} <dynamics>', 0.0),
        mimic=(mimic.get('joint') or '?') if mimic is not None else None)


def parse_urdf(text):
    """Links, joints and the tree of a URDF XML string."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise ValueError(f'URDF: not well-formed XML ({error})') from None
    if root.tag != 'robot':
        raise ValueError(f'URDF: root element is <{root.tag}>, expected <robot>')
    links = {}
    for link in root.findall('link'):
        name = link.get('name')
        if not name:
            raise ValueError('URDF: a <link> has no name')
        if name in links:
            raise ValueError(f'URDF: link {name!r} is defined twice')
        links[name] = _parse_inertial(link)
    joints, parent_joint = {}, {}
    for element in root.findall('joint'):
        joint = _parse_joint(element)
        if joint.name in joints:
            raise ValueError(f'URDF: joint {joint.name!r} is defined twice')
        for link in (joint.parent, joint.child):
            if link not in links:
                raise ValueError(f'URDF joint {joint.name!r}: link {link!r} is not defined')
        if joint.child in parent_joint:
            raise ValueError(f'URDF: link {joint.child!r} has two parent joints '
                             f'({parent_joint[joint.child].name!r}, {joint.name!r})')
        joints[joint.name] = joint
        parent_joint[joint.child] = joint
    _check_tree(links, parent_joint)
    return UrdfRobot(root.get('name', ''), links, joints, parent_joint)


def _check_tree(links, parent_joint):
    """Every link reaches a root by following parent joints (no kinematic loops)."""
    rooted = {name for name in links if name not in parent_joint}
    for name in links:
        seen = []
        while name not in rooted:
            if name in seen:
                raise ValueError(f'URDF: the joints form a loop through links {seen}')
            seen.append(name)
            name = parent_joint[name].parent
        rooted.update(seen)


def read_urdf_file(path):
    """The text of a URDF file; ``file://`` and ``package://`` (needs ament_index_python)
    URIs are accepted."""
    path = str(path)
    if path.startswith('file://'):
        path = path[len('file://'):]
    elif path.startswith('package://'):
        package, _, rest = path[len('package://'):].partition('/')
        try:
            from ament_index_python.packages import get_package_share_directory
            path = os.path.join(get_package_share_directory(package), rest)
        except Exception as error:  # noqa: BLE001 - any failure means "cannot resolve"
            raise ValueError(f'robot.urdf_file: cannot resolve {path!r} ({error})') from None
    try:
        with open(path, encoding='utf-8') as stream:
            return stream.read()
    except OSError as error:
        raise ValueError(f'robot.urdf_file: cannot read {path!r} ({error.strerror})') from None


# ---------------------------------------------------------------------- chain selection


def _children(robot):
    children = {name: [] for name in robot.links}
    for joint in robot.joints.values():
        children[joint.parent].append(joint)
    return children


def _default_base(robot):
    roots = [name for name in robot.links if name not in robot.parent_joint]
    if len(roots) != 1:
        raise ValueError(f'robot.base_link: the URDF has {len(roots)} root links {roots}; '
                         'set robot.base_link')
    return roots[0]


def _default_tip(robot, base, children):
    leaves, stack = [], [base]
    while stack:
        link = stack.pop()
        below = [joint.child for joint in children[link]]
        if not below:
            leaves.append(link)
        stack.extend(below)
    if len(leaves) != 1:
        raise ValueError(f'robot.tip_link: the URDF has several leaf links below '
                         f'{base!r} ({sorted(leaves)}); set robot.tip_link')
    return leaves[0]


def chain_path(robot, base, tip):
    """The joints from `base` to `tip`, base first."""
    for role, link in (('base_link', base), ('tip_link', tip)):
        if link not in robot.links:
            raise ValueError(f'robot.{role}: no link {link!r} in the URDF '
                             f'(links: {sorted(robot.links)})')
    path, link = [], tip
    while link != base:
        joint = robot.parent_joint.get(link)
        if joint is None or len(path) > len(robot.joints):
            raise ValueError(f'robot.tip_link: link {tip!r} is not below base link {base!r} '
                             'in the URDF tree')
        path.append(joint)
        link = joint.parent
    return path[::-1]


# ---------------------------------------------------------------------- chain building


def axis_rotation(axis):
    """A rotation A with A e_z = axis (unit): identity for +z, Rx(π) for -z, otherwise the
    smallest rotation taking z onto the axis (Rodrigues)."""
    z = np.array([0.0, 0.0, 1.0])
    c = float(axis @ z)
    if c > 1.0 - 1e-15:
        return np.eye(3)
    if c < -1.0 + 1e-15:
        return np.diag([1.0, -1.0, -1.0])
    k = np.cross(z, axis)
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + K + K @ K / (1.0 + c)


class _ChainBuilder:
    """Walks the path base -> tip, one body per movable joint, merging fixed links."""

    def __init__(self, robot, children, lock_side_joints):
        self.robot, self.children, self.lock = robot, children, lock_side_joints
        self.bodies = []         # per movable joint: [mass, com, inertia] in body frame
        self.joints, self.R0, self.p0, self.R_link, self.p_link = [], [], [], [], []
        self.locked = []

    def add_link(self, link, T):
        """Merge link `link`, whose frame is T in the current body, into that body."""
        inertial = self.robot.links[link]
        if not self.bodies or inertial is None:
            return
        Tc = T @ inertial.T
        R = Tc[:3, :3]
        body = self.bodies[-1]
        body[:] = combine_bodies(body[0], body[1], body[2], inertial.mass, Tc[:3, 3],
                                 R @ inertial.inertia @ R.T)

    def add_side_branches(self, link, T, path_child):
        """Merge the subtrees hanging off `link` (frame T in the current body)."""
        for joint in self.children[link]:
            if joint.child == path_child:
                continue
            if not self.bodies:
                continue                       # hangs off the fixed base: no effect
            if joint.type != 'fixed':
                if not self.lock:
                    raise ValueError(
                        f'URDF joint {joint.name!r} ({joint.type}) branches off the chain at '
                        f'link {link!r}: not a serial chain. Choose robot.tip_link beyond it, '
                        'or set robot.lock_side_joints: true to treat side joints as rigid '
                        'at q = 0')
                self.locked.append(joint.name)
            Tj = T @ joint.T
            self.add_link(joint.child, Tj)
            self.add_side_branches(joint.child, Tj, None)

    def add_movable(self, joint, T):
        A = axis_rotation(joint.axis)
        placement = T @ joint.T
        self.R0.append(placement[:3, :3] @ A)
        self.p0.append(placement[:3, 3].copy())
        self.joints.append(joint)
        self.bodies.append([0.0, np.zeros(3), np.zeros((3, 3))])
        self.R_link.append(A.T)
        self.p_link.append(np.zeros(3))
        if self.robot.links[joint.child] is None:
            warnings.warn(f'URDF link {joint.child!r} (moved by joint {joint.name!r}) has no '
                          '<inertial>: treated as massless', ModelWarning, stacklevel=4)
        return transform(A.T, np.zeros(3))


def build_chain(robot, base, tip, lock_side_joints=False):
    """The ``Chain`` of the path base -> tip, and its movable URDF joints."""
    path = chain_path(robot, base, tip)
    children = _children(robot)
    builder = _ChainBuilder(robot, children, lock_side_joints)
    T = np.eye(4)                              # current link frame in the current body
    for k, joint in enumerate(path):
        builder.add_side_branches(joint.parent, T, joint.child)
        where = f'URDF joint {joint.name!r}'
        if joint.type in UNSUPPORTED:
            raise ValueError(f'{where}: {joint.type} joints are not supported (only revolute, '
                             'continuous, prismatic and fixed)')
        if joint.type == 'fixed':
            T = T @ joint.T
        else:
            if joint.mimic is not None:
                raise ValueError(f'{where}: mimic joints are not supported (it mimics '
                                 f'{joint.mimic!r}, so it is not an independent joint)')
            T = builder.add_movable(joint, T)
        builder.add_link(joint.child, T)
    builder.add_side_branches(tip, T, None)
    if not builder.joints:
        raise ValueError(f'URDF: no movable joint between {base!r} and {tip!r}')
    if builder.locked:
        warnings.warn(f'URDF: side joints {builder.locked} locked at q = 0 and merged into '
                      'the chain', ModelWarning, stacklevel=3)
    n = len(builder.joints)
    R_link, p_link = np.array(builder.R_link), np.array(builder.p_link)
    R_link[-1], p_link[-1] = T[:3, :3], T[:3, 3]
    chain = Chain(R0=np.array(builder.R0), p0=np.array(builder.p0), theta0=np.zeros(n),
                  d0=np.zeros(n),
                  prismatic=np.array([j.type == 'prismatic' for j in builder.joints]),
                  mass=np.array([b[0] for b in builder.bodies]),
                  com=np.array([b[1] for b in builder.bodies]),
                  inertia=np.array([b[2] for b in builder.bodies]),
                  R_tip=T[:3, :3].copy(), p_tip=T[:3, 3].copy(), R_link=R_link, p_link=p_link)
    return chain, builder.joints


def joint_limits(joints):
    """position_min/max, velocity_max, effort_max lists from URDF <limit> elements."""
    limits = {key: [] for key in ('position_min', 'position_max', 'velocity_max',
                                  'effort_max')}
    for joint in joints:
        lower, upper = -math.inf, math.inf
        if joint.type != 'continuous':
            if joint.lower > joint.upper:
                raise ValueError(f'URDF joint {joint.name!r} <limit>: lower {joint.lower} > '
                                 f'upper {joint.upper}')
            if joint.lower < joint.upper:
                lower, upper = joint.lower, joint.upper
            else:
                warnings.warn(f'URDF joint {joint.name!r}: no position range (lower == upper '
                              f'== {joint.lower}); no position limits used', ModelWarning,
                              stacklevel=3)
        limits['position_min'].append(lower)
        limits['position_max'].append(upper)
        limits['velocity_max'].append(joint.velocity if joint.velocity > 0.0 else math.inf)
        limits['effort_max'].append(joint.effort if joint.effort > 0.0 else math.inf)
    return limits


def model_from_urdf(urdf, base_link=None, tip_link=None, gravity=DEFAULT_GRAVITY,
                    use_urdf_friction=False, lock_side_joints=False, payload=None,
                    accept_nonphysical_inertia=False, inertials=None, **overrides):
    """A `RobotModel` of the chain base_link -> tip_link of a URDF XML string.

    Defaults: base_link = the root link, tip_link = the only leaf below it. `gravity` is
    in the base_link frame. `overrides` (armature, viscous_friction, coulomb_friction,
    position_min, position_max, velocity_max, effort_max: one value per movable joint)
    replace what the URDF says. `payload` as in `RobotModel.with_payload`, in the tip frame.
    `accept_nonphysical_inertia`: non-physical inertias are known (no ModelWarning).
    `inertials`: {mass, com, inertia} replacing the bodies' inertial data (see
    `inertial_override`).
    """
    return _urdf_model(urdf, {'urdf': urdf}, base_link, tip_link, gravity, use_urdf_friction,
                       lock_side_joints, payload, overrides, accept_nonphysical_inertia,
                       inertials)


def inertial_override(chain, inertials):
    """`chain` with its bodies' inertial data replaced by ``robot.inertials``.

    ``inertials`` = {mass: n values [kg], com: 3n [m], inertia: 6n [kg m²] (ixx ixy ixz iyy
    iyz izz about the centre of mass)}, per movable joint i in link frame i: the child link
    frame of joint i, and for the last joint the tip link frame — the frames of
    `RobotModel.com` and `RobotModel.inertia`. Each value describes the whole body that
    joint i moves (its child link with every fixed link and locked side branch merged into
    it), so what the URDF says about those links is replaced, not added to. All three
    lists are required; a payload is still added on top. This is how an identified arm
    (`robot_dynamics.arm_identification`) is loaded on a URDF robot without editing its
    URDF. Raises ValueError naming the field."""
    if not isinstance(inertials, dict):
        raise ValueError(f'robot.inertials: expected a mapping with mass, com and inertia, '
                         f'got {inertials!r}')
    unknown = sorted(set(inertials) - {'mass', 'com', 'inertia'})
    if unknown:
        raise ValueError(f'robot.inertials.{unknown[0]}: unknown key (known: com, inertia, '
                         'mass)')
    n = len(chain.prismatic)
    values = {}
    for key, width in (('mass', 1), ('com', 3), ('inertia', 6)):
        if key not in inertials:
            raise ValueError(f'robot.inertials.{key}: missing (mass, com and inertia are '
                             'given together)')
        raw = inertials[key]
        if isinstance(raw, (str, bytes)) or not hasattr(raw, '__len__'):
            raise ValueError(f'robot.inertials.{key}: expected a list of {width * n} '
                             f'numbers, got {raw!r}')
        raw = list(raw)
        if len(raw) != width * n:
            raise ValueError(f'robot.inertials.{key}: expected {width * n} values ({width} '
                             f'per movable joint), got {len(raw)}')
        out = np.empty(len(raw))
        for k, v in enumerate(raw):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(v)):
                raise ValueError(f'robot.inertials.{key}[{k}]: expected a finite number, got '
                                 f'{v!r}')
            out[k] = float(v)
        values[key] = out
    mass = values['mass']
    bad = np.flatnonzero(mass < 0.0)
    if bad.size:
        raise ValueError(f'robot.inertials.mass[{bad[0]}]: negative mass {mass[bad[0]]} kg')
    com_link = values['com'].reshape(n, 3)
    inertia_link = np.array([inertia_from_urdf6(row) for row in values['inertia'].reshape(n, 6)])
    com = chain.p_link + np.einsum('nij,nj->ni', chain.R_link, com_link)
    inertia = np.einsum('nij,njk,nlk->nil', chain.R_link, inertia_link, chain.R_link)
    return replace(chain, mass=mass, com=com, inertia=inertia)


def _urdf_model(text, origin, base_link, tip_link, gravity, use_urdf_friction,
                lock_side_joints, payload, overrides, accept_nonphysical_inertia=False,
                inertials=None):
    unknown = sorted(set(overrides) - set(PER_JOINT_OPTIONAL))
    if unknown:
        raise ValueError(f'robot.{unknown[0]}: unknown key')
    try:
        gravity = [float(g) for g in gravity]
    except (TypeError, ValueError):
        raise ValueError(f'robot.gravity: expected 3 numbers, got {gravity!r}') from None
    robot = parse_urdf(text)
    base = base_link or _default_base(robot)
    tip = tip_link or _default_tip(robot, base, _children(robot))
    chain, joints = build_chain(robot, base, tip, bool(lock_side_joints))
    if inertials is not None:
        chain = inertial_override(chain, inertials)
    options = joint_limits(joints)
    if use_urdf_friction:
        options['viscous_friction'] = [j.damping for j in joints]
        options['coulomb_friction'] = [j.friction for j in joints]
    overrides = {key: value for key, value in overrides.items() if value is not None}
    options.update(overrides)
    params = {'source': 'urdf', **origin, 'base_link': base, 'tip_link': tip,
              'gravity': gravity, 'use_urdf_friction': bool(use_urdf_friction),
              'lock_side_joints': bool(lock_side_joints),
              **{key: list(value) for key, value in overrides.items()}}
    if inertials is not None:
        params['inertials'] = {key: list(inertials[key]) for key in ('mass', 'com', 'inertia')}
    # continuous joints turn without end, unless position limits were given for them
    continuous = [j.type == 'continuous' and not (
        math.isfinite(low) or math.isfinite(high))
        for j, low, high in zip(joints, *(_as_list(options[key], len(joints))
                                          for key in ('position_min', 'position_max')))]
    return RobotModel.from_chain(chain, joint_names=[j.name for j in joints], gravity=gravity,
                                 payload=payload, params=params,
                                 accept_nonphysical_inertia=accept_nonphysical_inertia,
                                 continuous=continuous, **options)


def _as_list(values, n):
    """Per-joint limits as n floats (a bad override is left for RobotModel to name)."""
    try:
        out = [float(v) for v in values]
    except (TypeError, ValueError):
        return [math.inf] * n
    return out if len(out) == n else [math.inf] * n


def model_from_params(block):
    """A model from a `robot` parameter block with ``source: urdf`` (nested dict).

    Keys: urdf (XML string, e.g. the robot_description) or urdf_file (path, file:// or
    package:// URI), base_link, tip_link, gravity, use_urdf_friction, lock_side_joints,
    payload, inertials (`inertial_override`: the bodies' mass, com and inertia replacing
    the URDF's) and the optional per-joint lists. DH keys are ignored (the file may hold both
    descriptions; `source` selects one).
    """
    dh_keys = {'dh_convention', 'joint_types', 'a', 'alpha', 'd', 'theta', 'mass', 'com',
               'inertia', 'continuous'}     # continuous: the URDF's joint types decide
    known = {'source', 'name', 'description', 'gravity', 'payload', 'inertials',
             'accept_nonphysical_inertia', *URDF_KEYS, *PER_JOINT_OPTIONAL}
    unknown = sorted(set(block) - known - dh_keys)
    if unknown:
        raise ValueError(f'robot.{unknown[0]}: unknown key for source urdf '
                         f'(known keys: {sorted(known)})')
    for key in ('urdf', 'urdf_file', 'base_link', 'tip_link'):
        if block.get(key) is not None and not isinstance(block[key], str):
            raise ValueError(f'robot.{key}: expected a string, got {block[key]!r}')
    for key in ('use_urdf_friction', 'lock_side_joints'):
        if not isinstance(block.get(key, False), bool):
            raise ValueError(f'robot.{key}: expected true or false, got {block[key]!r}')
    text, path = block.get('urdf') or '', block.get('urdf_file') or ''
    if text and path:
        raise ValueError('robot.urdf and robot.urdf_file: both given; give one')
    if not text and not path:
        raise ValueError('robot.urdf_file: no URDF given (set robot.urdf_file, or pass the '
                         'robot_description XML as robot.urdf)')
    origin = {'urdf': text} if text else {'urdf_file': path}
    return _urdf_model(
        text or read_urdf_file(path), origin, block.get('base_link') or None,
        block.get('tip_link') or None, block.get('gravity', DEFAULT_GRAVITY),
        block.get('use_urdf_friction', False), block.get('lock_side_joints', False),
        block.get('payload'), {key: block[key] for key in PER_JOINT_OPTIONAL if key in block},
        block.get('accept_nonphysical_inertia', False), block.get('inertials'))


register_model_source('urdf', model_from_params)     # RobotModel.from_params: source urdf


# ---------------------------------------------------------------------- export


def _num(value):
    """Shortest exact text of a float; rounding noise below 1e-14 (and -0.0) as 0.0."""
    value = float(value)
    return repr(value if abs(value) >= 1e-14 else 0.0)


def _fmt(values):
    return ' '.join(_num(v) for v in values)


def _origin_element(parent, R, p):
    ET.SubElement(parent, 'origin', xyz=_fmt(p), rpy=_fmt(matrix_rpy(R)))


COLOURS = {'base': '0.5 0.5 0.5 1', 'joint': '0.2 0.4 0.8 1', 'link': '0.9 0.5 0.1 1'}


def _cylinder_between(link, start, end, radius, colour):
    """A visual cylinder from `start` to `end` (link frame); nothing if they coincide."""
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    length = float(np.linalg.norm(end - start))
    if length < 1e-9:
        return
    visual = ET.SubElement(link, 'visual')
    _origin_element(visual, axis_rotation((end - start) / length), (start + end) / 2.0)
    ET.SubElement(ET.SubElement(visual, 'geometry'), 'cylinder', radius=repr(radius),
                  length=repr(length))
    ET.SubElement(ET.SubElement(visual, 'material', name=f'robot_dynamics_{colour}'), 'color',
                  rgba=COLOURS[colour])


def _joint_visual(link, radius):
    _cylinder_between(link, (0.0, 0.0, -2.0 * radius), (0.0, 0.0, 2.0 * radius),
                      1.5 * radius, 'joint')


def _limit_element(joint_el, model, i, kind):
    effort, velocity = model.effort_max[i], model.velocity_max[i]
    limit = {'effort': repr(float(effort)) if math.isfinite(effort) else repr(UNLIMITED_EFFORT),
             'velocity': (repr(float(velocity)) if math.isfinite(velocity)
                          else repr(UNLIMITED_VELOCITY))}
    if kind != 'continuous':
        lo, hi = model.position_min[i], model.position_max[i]
        limit['lower'] = repr(float(lo)) if math.isfinite(lo) else repr(-UNLIMITED_TRAVEL)
        limit['upper'] = repr(float(hi)) if math.isfinite(hi) else repr(UNLIMITED_TRAVEL)
    ET.SubElement(joint_el, 'limit', **limit)


def _inertial_element(link, mass, com, inertia):
    inertial = ET.SubElement(link, 'inertial')
    ET.SubElement(inertial, 'origin', xyz=_fmt(com), rpy='0.0 0.0 0.0')
    ET.SubElement(inertial, 'mass', value=_num(mass))
    keys = ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')
    values = (inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2],
              inertia[2, 2])
    ET.SubElement(inertial, 'inertia', **{k: _num(v) for k, v in zip(keys, values)})


def _next_joint_point(chain, i):
    """Where body i's visual ends: the origin of joint i+1 (or the tip) in body i."""
    n = len(chain.prismatic)
    if i == n - 1:
        return chain.p_tip
    d = 0.0 if chain.prismatic[i + 1] else chain.d0[i + 1]
    return chain.p0[i + 1] + chain.R0[i + 1][:, 2] * d


def model_to_urdf(model, joint_names=None, robot_name='robot', radius=0.03):
    """A URDF (XML string) of `model`: links ``base_link``, ``link_1``..``link_n`` (our body
    frames: joint i about/along z of link_i), and the tip frame ``tool0`` on a fixed joint.

    Inertials (payload included in the last link), limits (`UNLIMITED_*` where the model
    has none; revolute joints without position limits become ``continuous``), friction as
    <dynamics damping friction>, and cylinders along the links for RViz. Armature and
    gravity have no place in URDF and are not written. Joint i's zero is the model's zero.
    """
    n, chain = model.n, model.chain
    names = list(joint_names or model.joint_names or [f'joint_{i + 1}' for i in range(n)])
    if len(names) != n or len(set(names)) != n or 'tool0_joint' in names:
        raise ValueError(f'joint_names: expected {n} distinct names other than tool0_joint, '
                         f'got {names}')
    robot = ET.Element('robot', name=robot_name)
    base = ET.SubElement(robot, 'link', name='base_link')
    _cylinder_between(base, (0.0, 0.0, 0.0), chain.p0[0] + chain.R0[0][:, 2] * (
        0.0 if chain.prismatic[0] else chain.d0[0]), radius, 'base')
    parent = 'base_link'
    for i in range(n):
        kind = 'prismatic' if chain.prismatic[i] else (
            'revolute' if math.isfinite(model.position_min[i])
            or math.isfinite(model.position_max[i]) else 'continuous')
        joint_el = ET.SubElement(robot, 'joint', name=names[i], type=kind)
        ET.SubElement(joint_el, 'parent', link=parent)
        ET.SubElement(joint_el, 'child', link=f'link_{i + 1}')
        # body i = parent · placement · Rz(θ0) Tz(d0) · joint motion about/along z
        T = transform(chain.R0[i], chain.p0[i]) @ _rz_tz(chain.theta0[i], chain.d0[i])
        _origin_element(joint_el, T[:3, :3], T[:3, 3])
        ET.SubElement(joint_el, 'axis', xyz='0.0 0.0 1.0')
        _limit_element(joint_el, model, i, kind)
        if model.viscous_friction[i] or model.coulomb_friction[i]:
            ET.SubElement(joint_el, 'dynamics', damping=repr(float(model.viscous_friction[i])),
                          friction=repr(float(model.coulomb_friction[i])))
        link = ET.SubElement(robot, 'link', name=f'link_{i + 1}')
        _inertial_element(link, chain.mass[i], chain.com[i], chain.inertia[i])
        _joint_visual(link, radius)
        _cylinder_between(link, (0.0, 0.0, 0.0), _next_joint_point(chain, i), radius,
                          'link')
        parent = f'link_{i + 1}'
    tip = ET.SubElement(robot, 'joint', name='tool0_joint', type='fixed')
    ET.SubElement(tip, 'parent', link=parent)
    ET.SubElement(tip, 'child', link='tool0')
    _origin_element(tip, chain.R_tip, chain.p_tip)
    ET.SubElement(robot, 'link', name='tool0')
    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding='unicode') + '\n'


def _rz_tz(theta, d):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s, 0.0, 0.0], [s, c, 0.0, 0.0], [0.0, 0.0, 1.0, d],
                     [0.0, 0.0, 0.0, 1.0]])


def urdf_from_parameter_file(path, node_name=None, robot_name=None):
    """The URDF of the model in a ROS 2 parameter file, joints named by its `joints` list
    (e.g. for a launch file that starts robot_state_publisher with it)."""
    from robot_dynamics.parameters.layering import joints_of_file
    joints = joints_of_file(path, node_name)
    model = RobotModel.from_yaml(path, node_name)
    name = robot_name or os.path.splitext(os.path.basename(str(path)))[0]
    return model_to_urdf(model, joints, robot_name=name)


def main(argv=None):
    """``python -m robot_dynamics.urdf PARAMETER_FILE [ROBOT_NAME]``: print the URDF."""
    import sys
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2 or args[0].startswith('-'):
        print(main.__doc__, file=sys.stderr)
        return 2
    try:
        print(urdf_from_parameter_file(args[0], robot_name=args[1] if len(args) > 1 else None),
              end='')
    except (OSError, ValueError) as error:
        print(f'error: {error}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
