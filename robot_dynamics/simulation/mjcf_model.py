"""The robot model of an MJCF arm: a parameter file that gives the controller the arm MuJoCo
runs (a MuJoCo Menagerie arm, or a user's), so that the plant's `engine: mujoco` with
`mujoco.model_file` and the controller agree on the dynamics.

    ros2 run robot_dynamics model_from_mjcf panda.xml --output menagerie_panda.yaml
    ros2 run robot_dynamics model_from_mjcf arm.xml --joints shoulder elbow wrist

(the executable: robot_dynamics.nodes.model_from_mjcf).

MuJoCo compiles the file (its defaults, classes, ``fullinertia`` and ``quat`` resolved), and
the arm is read from the compiled model at joint positions 0:

* the joints: `joints` by name, else every hinge joint of the file, which must form one
  chain from a fixed base (a gripper's slide joints are then side branches); each a hinge
  or slide joint alone in its body;
* the links: link frame k is joint k's body frame moved to the joint's anchor; the joint
  origins, axes and position ranges go into a URDF (``robot.urdf``, base link ``world``:
  MuJoCo's world frame, gravity as the file says);
* the inertials: every body that joint k moves and no later joint moves (the joint's body,
  the fixed bodies after it, and side branches whose joints the controller does not drive,
  such as fingers, locked where they are at ``qpos0``) merged into link k;
* the drive terms: ``armature`` → ``robot.armature``, ``damping`` →
  ``robot.viscous_friction``, ``frictionloss`` → ``robot.coulomb_friction``; an actuator's
  force range on a joint (times its gear) → the URDF's effort limit.

What the controller's model cannot hold is said in one warning each (joint springs,
``gravcomp``, tendons or equality constraints on a driven joint): the plant runs them and
the controller does not know them. MuJoCo (``pip install mujoco``) is needed to read the file.
"""

import warnings
import xml.etree.ElementTree as ET

import numpy as np

from robot_dynamics.model.urdf import matrix_rpy
from robot_dynamics.simulation.mujoco_engine import _mujoco, _num, _text

BASE_LINK = 'world'


class MjcfModelWarning(UserWarning):
    """What the controller's model will not hold of the MJCF arm."""


def _names(mj, kind, count):
    return [getattr(mj, kind)(i).name for i in range(count)]


def _ancestors(mj, body):
    """The bodies from `body` up to (not including) the world, nearest first."""
    out = []
    while body > 0:
        out.append(body)
        body = int(mj.body_parentid[body])
    return out


def chain_joints(mj, joints=None):
    """The joint ids of the driven chain, base first: `joints` by name, else every hinge
    joint. ValueError naming what does not fit (an unknown joint, a ball or free joint, two
    joints in one body, joints not in one chain, a moving base)."""
    mujoco = _mujoco()
    names = _names(mj, 'joint', mj.njnt)
    one_dof = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    if joints is None:
        ids = [j for j in range(mj.njnt) if int(mj.jnt_type[j]) == one_dof[0]]
        if not ids:
            raise ValueError('the MJCF has no hinge joints; name the arm\'s joints (--joints)')
    else:
        ids = []
        for name in joints:
            if name not in names:
                raise ValueError(f'joint {name!r} is not in the MJCF (its joints: '
                                 f'{", ".join(n or "(unnamed)" for n in names) or "none"})')
            ids.append(names.index(name))
        if len(set(ids)) != len(ids):
            raise ValueError(f'joints: a joint is named twice in {list(joints)}')
    for j in ids:
        label = names[j] or f'#{j}'
        if int(mj.jnt_type[j]) not in one_dof:
            raise ValueError(f'joint {label!r}: not a hinge or slide joint')
        if int(mj.body_jntnum[mj.jnt_bodyid[j]]) != 1:
            raise ValueError(f'joint {label!r}: its body {mj.body(mj.jnt_bodyid[j]).name!r} '
                             'has more than one joint; the controller drives one joint per '
                             'link')
    # base first: order by depth, then each body must lie below the previous one with no
    # other joint in between, and the base must be fixed
    ids.sort(key=lambda j: len(_ancestors(mj, int(mj.jnt_bodyid[j]))))
    previous = 0
    for j in ids:
        body = int(mj.jnt_bodyid[j])
        path = _ancestors(mj, int(mj.body_parentid[body]))
        if previous and previous not in path:
            raise ValueError(f'joint {names[j]!r} is not below joint '
                             f'{names[_joint_of(mj, previous)]!r}: the joints '
                             f'{[names[k] for k in ids]} are not one chain; name the arm\'s '
                             'joints (--joints)')
        between = path[:path.index(previous)] if previous else path
        moving = [mj.body(b).name for b in between if int(mj.body_jntnum[b])]
        if moving:
            where = (f'between the driven joints {names[_joint_of(mj, previous)]!r} and '
                     f'{names[j]!r}' if previous else
                     f'between the world and the first driven joint {names[j]!r}')
            raise ValueError(f'body {moving[0]!r} {where} has a joint the controller does '
                             'not drive (a moving base, or a joint missing from --joints)')
        previous = body
    return ids


def _joint_of(mj, body):
    return int(mj.body_jntadr[body])


def _group(mj, bodies):
    """{body: index of the driven body that moves it last}, for every body below the first
    driven one."""
    driven = {b: k for k, b in enumerate(bodies)}
    group = {}
    for body in range(1, mj.nbody):
        for b in _ancestors(mj, body):
            if b in driven:
                group[body] = driven[b]
                break
    return group


def _locked(mj, group, bodies):
    """Bodies with joints the controller does not drive, below the driven chain."""
    driven = set(bodies)
    return [mj.body(b).name for b in sorted(group)
            if b not in driven and int(mj.body_jntnum[b])]


def arm_of_mjcf(mj, joints=None, name='mjcf_arm'):
    """The arm of compiled MjModel `mj`: a dict with joint names, URDF text, gravity and the
    drive terms (see the module's description); warnings (MjcfModelWarning) for what the
    controller's model will not hold."""
    mujoco = _mujoco()
    ids = chain_joints(mj, joints)
    names = [mj.joint(j).name for j in ids]
    unnamed = [k for k, name in enumerate(names) if not name]
    if unnamed:
        raise ValueError(f'the chain\'s joint {unnamed[0] + 1} has no name; the controller '
                         'finds MuJoCo\'s joints by name: name it in the MJCF')
    bodies = [int(mj.jnt_bodyid[j]) for j in ids]
    data = mujoco.MjData(mj)
    data.qpos[:] = mj.qpos0
    for j in ids:
        data.qpos[mj.jnt_qposadr[j]] = 0.0
    mujoco.mj_kinematics(mj, data)

    # link frame k: body k's orientation, at joint k's anchor
    R = [data.xmat[b].reshape(3, 3).copy() for b in bodies]
    o = [data.xanchor[j].copy() for j in ids]
    group = _group(mj, bodies)
    locked = _locked(mj, group, bodies)
    if locked:
        warnings.warn(f'bodies {locked} have joints the controller does not drive: merged '
                      'into the link that carries them, as they are at the MJCF\'s qpos0 (in '
                      'MuJoCo they move)', MjcfModelWarning, stacklevel=2)
    links = []
    for k in range(len(ids)):
        members = [b for b, g in group.items() if g == k]
        mass = sum(float(mj.body_mass[b]) for b in members)
        inertia = np.zeros((3, 3))
        com = np.zeros(3)
        if mass > 0.0:
            com = sum(float(mj.body_mass[b]) * data.xipos[b] for b in members) / mass
            for b in members:
                Rb = data.ximat[b].reshape(3, 3)
                r = data.xipos[b] - com
                inertia += (Rb @ np.diag(mj.body_inertia[b]) @ Rb.T
                            + float(mj.body_mass[b]) * (r @ r * np.eye(3) - np.outer(r, r)))
        links.append((mass, R[k].T @ (com - o[k]), R[k].T @ inertia @ R[k]))

    limits = _effort_limits(mj, ids)
    robot = ET.Element('robot', name=name)
    ET.SubElement(robot, 'link', name=BASE_LINK)
    parent_R, parent_o, parent = np.eye(3), np.zeros(3), BASE_LINK
    link_names = []
    for k, j in enumerate(ids):
        link = mj.body(bodies[k]).name or f'body_{bodies[k]}'
        link_names.append(link)
        slide = int(mj.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_SLIDE)
        limited = bool(mj.jnt_limited[j])
        kind = 'prismatic' if slide else ('revolute' if limited else 'continuous')
        joint = ET.SubElement(robot, 'joint', name=names[k], type=kind)
        ET.SubElement(joint, 'parent', link=parent)
        ET.SubElement(joint, 'child', link=link)
        rel_R = parent_R.T @ R[k]
        rel_p = parent_R.T @ (o[k] - parent_o)
        ET.SubElement(joint, 'origin', xyz=_text(rel_p), rpy=_text(matrix_rpy(rel_R)))
        axis = np.asarray(mj.jnt_axis[j], dtype=float)
        ET.SubElement(joint, 'axis', xyz=_text(axis / np.linalg.norm(axis)))
        if kind != 'continuous':
            low, high = ((float(mj.jnt_range[j][0]), float(mj.jnt_range[j][1])) if limited
                         else (-1.0e6, 1.0e6))
            ET.SubElement(joint, 'limit', lower=_num(low), upper=_num(high),
                          effort=_num(limits[k]), velocity='0.0')
        body = ET.SubElement(robot, 'link', name=link)
        mass, com, inertia = links[k]
        inertial = ET.SubElement(body, 'inertial')
        ET.SubElement(inertial, 'origin', xyz=_text(com), rpy='0.0 0.0 0.0')
        ET.SubElement(inertial, 'mass', value=_num(mass))
        ET.SubElement(inertial, 'inertia', **{
            key: _num(inertia[a, b]) for key, (a, b) in zip(
                ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz'),
                ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)))})
        parent_R, parent_o, parent = R[k], o[k], link
    ET.indent(robot)
    _warn_unmodelled(mj, ids, names, bodies, group)
    dofs = [int(mj.jnt_dofadr[j]) for j in ids]
    return {
        'joints': names,
        'links': link_names,
        'urdf': '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding='unicode') + '\n',
        'gravity': [float(g) for g in mj.opt.gravity],
        'armature': [float(mj.dof_armature[d]) for d in dofs],
        'viscous_friction': [float(mj.dof_damping[d]) for d in dofs],
        'coulomb_friction': [float(mj.dof_frictionloss[d]) for d in dofs],
    }


def _effort_limits(mj, ids):
    """Per joint: the largest force the file lets its actuators (on that joint alone) or the
    joint itself (``actuatorfrcrange``) apply; 0 (no limit) when none is said."""
    mujoco = _mujoco()
    out = []
    for j in ids:
        limit = 0.0
        if int(mj.jnt_actfrclimited[j]):
            limit = float(np.max(np.abs(mj.jnt_actfrcrange[j])))
        for a in range(mj.nu):
            if (int(mj.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                    and int(mj.actuator_trnid[a][0]) == j and int(mj.actuator_forcelimited[a])):
                force = float(np.max(np.abs(mj.actuator_forcerange[a])))
                force *= abs(float(mj.actuator_gear[a][0]))
                limit = force if limit == 0.0 else min(limit, force)
        out.append(limit)
    return out


def _warn_unmodelled(mj, ids, names, bodies, group):
    springs = [names[k] for k, j in enumerate(ids) if float(mj.jnt_stiffness[j]) != 0.0]
    if springs:
        warnings.warn(f'joints {springs} have a spring (stiffness) in the MJCF; the '
                      'controller\'s model has none', MjcfModelWarning, stacklevel=3)
    floating = sorted({mj.body(b).name for b in group if float(mj.body_gravcomp[b]) != 0.0})
    if floating:
        warnings.warn(f'bodies {floating} have gravcomp in the MJCF: MuJoCo cancels (part '
                      'of) their weight, the controller\'s model does not', MjcfModelWarning,
                      stacklevel=3)
    coupled = set()
    for t in range(mj.ntendon):
        start, count = int(mj.tendon_adr[t]), int(mj.tendon_num[t])
        coupled |= {int(mj.wrap_objid[w]) for w in range(start, start + count)
                    if int(mj.wrap_type[w]) == int(_mujoco().mjtWrap.mjWRAP_JOINT)}
    for e in range(mj.neq):
        if int(mj.eq_type[e]) == int(_mujoco().mjtEq.mjEQ_JOINT):
            coupled |= {int(mj.eq_obj1id[e]), int(mj.eq_obj2id[e])}
    coupled = [names[k] for k, j in enumerate(ids) if j in coupled]
    if coupled:
        warnings.warn(f'joints {coupled} are coupled by a tendon or an equality constraint '
                      'in the MJCF; the controller\'s model drives them independently',
                      MjcfModelWarning, stacklevel=3)


def parameter_file_text(arm, source, section='/**', urdf_file=None):
    """The ROS 2 parameter file of `arm` (`arm_of_mjcf`): joints and the robot block with
    source urdf, the URDF inline (``robot.urdf``) or, with `urdf_file`, that file's path.
    Layered after a robot file, its model and joints replace the file's: the URDF keys a
    URDF robot file may hold (the other of urdf / urdf_file, base_link, tip_link,
    use_urdf_friction, lock_side_joints) are set too, so none of them applies to this URDF."""
    from robot_dynamics.parameters import layering
    parameters = {'joints': arm['joints'], 'robot.source': 'urdf',
                  'robot.urdf': '' if urdf_file else arm['urdf'],
                  'robot.urdf_file': urdf_file or '',
                  'robot.base_link': BASE_LINK, 'robot.tip_link': arm['links'][-1],
                  'robot.use_urdf_friction': False, 'robot.lock_side_joints': False,
                  'robot.gravity': arm['gravity'], 'robot.armature': arm['armature'],
                  'robot.viscous_friction': arm['viscous_friction'],
                  'robot.coulomb_friction': arm['coulomb_friction']}
    header = (f'The arm of {source}, read by MuJoCo (model_from_mjcf): the links\' inertials '
              '(fixed bodies\nmerged), the joints\' origins, axes and ranges as a URDF, the '
              'drive terms (armature,\ndamping, frictionloss). Give it after the robot file: '
              'its model and joints replace\nthe file\'s; gains and limits stay.')
    return layering.parameter_file_text({section: parameters}, header)
