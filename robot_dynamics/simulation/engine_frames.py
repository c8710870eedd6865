"""The arm's named frames an external wrench acts on, for both plant engines (no ROS).

The frames (`link_frames`): for a URDF model the URDF links the movable joints carry (each
the child link of a joint of the chain, and the fixed links after it), for a DH model
``link_1`` .. ``link_n`` (the DH link frames, as `kinematics.link_poses` gives them) and
``tool`` (the tip frame); an empty name is the tip frame. A wrench is a force and a moment
in the base frame, the moment about the frame's origin (`wrench_vector`).
"""

import numpy as np

from robot_dynamics.model import urdf

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
