"""`identify`'s prior model: the robot model and joint names of layered parameter files,
read as the nodes read them (robot_dynamics.parameters.layering)."""

import os
import warnings

from robot_dynamics.model import RobotModel
from robot_dynamics.parameters.layering import parameter_layers
from robot_dynamics.parameters.params_file import check_params_file, ParamsFileError
from robot_dynamics.nodes.identify.common import InputError


def layered_parameters(paths, node_name=None):
    """(robot block, other parameters) of parameter files layered as the nodes layer them:
    in each file the sections that apply to the node `node_name` (``/**``, its name,
    ``/**/name``, ...), in the file's order, then the next file, each overriding earlier
    values key by key (flat, dotted names). A relative robot.urdf_file is taken from its
    file's folder."""
    merged = {}
    for path, flat in _layers(paths, node_name):
        urdf_file = flat.get('robot.urdf_file')
        if isinstance(urdf_file, str) and urdf_file and not (
                os.path.isabs(urdf_file) or '://' in urdf_file):
            flat['robot.urdf_file'] = os.path.join(
                os.path.dirname(os.path.abspath(path)), urdf_file)
        merged.update(flat)
    robot = {key[len('robot.'):]: value for key, value in merged.items()
             if key.startswith('robot.')}
    others = {key: value for key, value in merged.items() if not key.startswith('robot.')}
    return robot, others


def _layers(paths, node_name):
    """[(path, {dotted name: value})]: the sections of the files that apply to the node,
    file after file, each file's in its order: the nodes' own layering
    (robot_dynamics.parameters.layering), values typed as rcl types them."""
    try:
        for path in paths:
            check_params_file(path)
        return [(path, parameters) for path, _section, parameters
                in parameter_layers(paths, node_name or None)]
    except ParamsFileError as error:
        raise InputError(str(error)) from None


def _flatten(mapping, prefix=''):
    flat = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


def prior_model(paths, node_name=None):
    """(RobotModel, joint names, [model warnings]) from layered parameter files;
    InputError with one line."""
    robot, others = layered_parameters(paths, node_name)
    if not robot:
        raise InputError(f'params files {" ".join(paths)}: no robot block (expected '
                         '"/**: ros__parameters: robot: ...", e.g. config/puma560.yaml)')
    description = others.get('robot_description')
    if robot.get('source') == 'urdf' and description and not (
            robot.get('urdf') or robot.get('urdf_file')):
        robot['urdf'] = description
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            model = RobotModel.from_params(robot)
        except ValueError as error:
            raise InputError(f'params files {" ".join(paths)}: {error}') from None
    joints = others.get('joints') or model.joint_names
    if not joints:
        raise InputError(f'params files {" ".join(paths)}: joints: missing (a list of joint '
                         'names, in the order of the robot block)')
    if isinstance(joints, str) or len(joints) != model.n or len(set(joints)) != model.n:
        raise InputError(f'params files {" ".join(paths)}: joints: expected {model.n} '
                         f'distinct names, got {joints!r}')
    return model, tuple(joints), [str(w.message) for w in caught]

