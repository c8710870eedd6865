"""What launch/sim.launch.py needs besides our own nodes, without importing `launch`: the
robot_description URDF of a parameter file, and which of the optional visualisation
packages (robot_state_publisher, rviz2) to start, asked of the ament index, so the launch
file still works, with an info line, when they are not installed."""

import os
import warnings

from robot_dynamics.model import RobotModel
from robot_dynamics.model.urdf import read_urdf_file, urdf_from_parameter_file

ROBOT_STATE_PUBLISHER = 'robot_state_publisher'
RVIZ = 'rviz2'
OPTIONAL_PACKAGES = (ROBOT_STATE_PUBLISHER, RVIZ)


def package_installed(name):
    """True if the ament index (AMENT_PREFIX_PATH) has package `name`."""
    try:
        from ament_index_python.packages import get_package_prefix, PackageNotFoundError
    except ImportError:
        return False
    try:
        get_package_prefix(name)
    except (PackageNotFoundError, ValueError, LookupError):
        return False
    return True


def robot_description(params_file):
    """The URDF for robot_state_publisher of the robot in a parameter file: the URDF itself
    for ``robot.source: urdf`` (meshes and all), otherwise the one generated from the DH
    model (`robot_dynamics.urdf.model_to_urdf`), joints named by the file's `joints`.
    Raises ValueError (or OSError) when the file gives no usable robot. Model warnings are
    left to the nodes, which log them."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = RobotModel.from_yaml(params_file)
        if model.source == 'urdf':
            params = model.to_params()
            return params.get('urdf') or read_urdf_file(params['urdf_file'])
        return urdf_from_parameter_file(params_file)


def visual_plan(rviz, installed=package_installed):
    """(packages to start, info lines for those skipped): robot_state_publisher always,
    rviz2 when `rviz` is true; each only if `installed(package)`."""
    wanted = [ROBOT_STATE_PUBLISHER] + ([RVIZ] if rviz else [])
    start = [package for package in wanted if installed(package)]
    distro = os.environ.get('ROS_DISTRO') or '<distro>'    # the shell does not expand it
    skipped = [f'{package} is not installed: not started (apt install '
               f'ros-{distro}-{package.replace("_", "-")})'
               for package in wanted if package not in start]
    return start, skipped


def launch_flag(text):
    """A launch argument's 'true'/'false' (any case, also 1/0, yes/no) as a bool."""
    value = str(text).strip().lower()
    if value in ('true', '1', 'yes', 'on'):
        return True
    if value in ('false', '0', 'no', 'off', ''):
        return False
    raise ValueError(f'expected true or false, got {text!r}')


def lifecycle_plan(autostart, activate):
    """The transitions controller_managed.launch.py requests of the managed controller
    from its launch arguments' text: configure (at start-up) with `autostart`, then
    activate once configured with `activate` as well; none without `autostart`, whatever
    `activate` says (the operator brings it up: `ros2 lifecycle set ... configure`, then
    `activate`)."""
    if not launch_flag(autostart):
        return ()
    return ('configure', 'activate') if launch_flag(activate) else ('configure',)


def params_file_list(text):
    """The parameter files of a launch argument: paths separated by ';' or ',' (spaces
    around them ignored), empty ones left out, in order (a later file overrides an
    earlier one)."""
    return [part.strip() for part in str(text).replace(',', ';').split(';') if part.strip()]


REALTIME_ARGUMENTS = ('realtime_priority', 'realtime_cpu_affinity', 'realtime_lock_memory')


def declare_realtime_arguments(declare, whose=''):
    """The three realtime_* launch arguments, empty by default (the files decide),
    declared with `declare` (launch's DeclareLaunchArgument: launch is not a dependency of
    this module); `whose`: the nodes they set, for the descriptions."""
    of = f' of {whose}' if whose else ''
    return [
        declare('realtime_priority', default_value='',
                description=f'realtime.priority{of} (SCHED_FIFO 1..99, 0 = off); empty: as '
                'in the parameter files'),
        declare('realtime_cpu_affinity', default_value='',
                description=f'realtime.cpu_affinity{of}, e.g. 1 or 0,1; empty: as in the '
                'parameter files'),
        declare('realtime_lock_memory', default_value='',
                description=f'realtime.lock_memory{of} (true | false); empty: as in the '
                'parameter files'),
    ]


def realtime_launch_parameters(argument, configuration):
    """`realtime_parameters` of the realtime_* launch arguments: `argument(
    configuration(name))` is a launch argument's value as text."""
    return realtime_parameters(*(argument(configuration(name)) for name in REALTIME_ARGUMENTS))


def realtime_parameters(priority='', cpu_affinity='', lock_memory=''):
    """{parameter: value} of the `realtime.*` parameters (doc/realtime.md) given as launch
    arguments: `priority` 0..99, `cpu_affinity` CPU numbers as '1', '0,1' or '[0, 1]',
    `lock_memory` true or false. An empty argument sets nothing (the parameter files'
    value stays); ValueError names the argument for a bad one."""
    parameters = {}
    if str(priority).strip():
        try:
            value = int(str(priority).strip())
        except ValueError:
            value = -1
        if not 0 <= value <= 99:
            raise ValueError(f'realtime_priority: expected 0..99 (SCHED_FIFO priority, 0 = '
                             f'off), got {priority!r}')
        parameters['realtime.priority'] = value
    text = str(cpu_affinity).strip().strip('[]').strip()
    if text:
        try:
            cpus = [int(part) for part in text.replace(' ', ',').split(',') if part]
        except ValueError:
            cpus = [-1]
        if not cpus or min(cpus) < 0 or len(set(cpus)) != len(cpus):
            raise ValueError(f'realtime_cpu_affinity: expected distinct CPU numbers >= 0 '
                             f'such as 1 or 0,1, got {cpu_affinity!r}')
        parameters['realtime.cpu_affinity'] = cpus
    if str(lock_memory).strip():
        try:
            parameters['realtime.lock_memory'] = launch_flag(lock_memory)
        except ValueError:
            raise ValueError(f'realtime_lock_memory: expected true or false, got '
                             f'{lock_memory!r}') from None
    return parameters


def node_parameters(files, name, namespace='', default_name=None, overrides=None):
    """The `parameters` of a launch file's node `name` in `namespace`: one file of the
    parameter `files` layered for it (`layering.write_layered_file`: later files win
    whatever section each value is under; sections for `default_name` apply to a renamed
    node) with `overrides` (the launch arguments' values) last. A file rcl would refuse
    is passed on as it is (with the overrides after it), so that the node names the
    problem in its one line; a missing file raises ParamsFileError (launch_ros would
    skip it with a warning and start the node without it)."""
    from robot_dynamics.parameters.layering import node_fqn, write_layered_file
    from robot_dynamics.parameters.params_file import check_params_file, ParamsFileError
    for path in files:
        if not os.path.isfile(path):
            check_params_file(path)          # raises: no such file, or a directory
    fqn = node_fqn(name, namespace)
    default = node_fqn(default_name or name, namespace)
    try:
        merged = write_layered_file(
            files, fqn, aliases=[default] if default != fqn else [], overrides=overrides,
            header=f'parameters of {fqn} from {"; ".join(files)} (later files win) and the '
            'launch arguments', overrides_origin='the launch arguments')
    except ParamsFileError:
        return list(files) + ([dict(overrides)] if overrides else [])
    return [merged] if merged else []


MOCK_HARDWARE = 'mock_components/GenericSystem'


def ros2_control_description(urdf, joints, position_min=None, position_max=None,
                             plugin=MOCK_HARDWARE, name='robot_dynamics_arm'):
    """`urdf` with a <ros2_control> system block for launch/ros2_control_effort.launch.py:
    each of `joints` with an effort command interface and position and velocity state
    interfaces (what joint_state_broadcaster publishes and the controller reads), on the
    hardware `plugin` (default: ros2_control's mock hardware, which holds the positions;
    put your arm's hardware plugin there). A joint starts at 0, or at the middle of its
    limits where 0 is outside them."""
    from xml.sax.saxutils import quoteattr
    lines = [f'  <ros2_control name={quoteattr(name)} type="system">',
             f'    <hardware><plugin>{plugin}</plugin></hardware>']
    for i, joint in enumerate(joints):
        low = -float('inf') if position_min is None else float(position_min[i])
        high = float('inf') if position_max is None else float(position_max[i])
        start = 0.0 if low <= 0.0 <= high else 0.5 * (low + high)
        lines += [f'    <joint name={quoteattr(joint)}>',
                  '      <command_interface name="effort"/>',
                  '      <state_interface name="position">',
                  f'        <param name="initial_value">{start!r}</param>',
                  '      </state_interface>',
                  '      <state_interface name="velocity"/>',
                  '    </joint>']
    lines.append('  </ros2_control>')
    head, tail = urdf.rsplit('</robot>', 1)
    return head + '\n'.join(lines) + '\n</robot>' + tail
