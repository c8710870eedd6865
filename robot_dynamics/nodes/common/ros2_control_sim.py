"""What launch/ros2_control_sim.launch.py builds, without importing `launch`: the simulated
arm as ros2_control hardware through topic_based_ros2_control.

    plant_simulator --(sensor_msgs/JointState: position, velocity, effort)--> STATES_TOPIC
        --> TopicBasedSystem (read) --> joint_state_broadcaster --> /joint_states
        --> computed_torque_controller --> /effort_controller/commands (Float64MultiArray)
        --> effort_controller (JointGroupEffortController) --> effort command interfaces
        --> TopicBasedSystem (write) --> COMMANDS_TOPIC (sensor_msgs/JointState: name, effort)
        --> plant_simulator (command_message: joint_state)

`description` puts a <ros2_control> system block with topic_based_ros2_control/
TopicBasedSystem into the robot's URDF: per joint an effort command interface and
position, velocity and effort state interfaces; `trigger_joint_command_threshold` -1 (the
plugin otherwise publishes only when its position commands differ from the states, which
never happens with effort commands alone); the effort state starts at NaN, which the plugin
also takes as its initial effort command, so that it sends "no command" (every effort NaN)
until the effort controller writes one and the plant stays on its brakes meanwhile. With
the plant's `stamp_joint` (config/ros2_control_sim.yaml sets one) the block and the URDF
have one more joint, whose position is the time each state was measured: the broadcaster
restamps every state with the manager's cycle, and this carries the plant's own stamp
through to the controller (its `stamp_joint`).
`controllers_file` writes controller_manager's parameters (update rate,
joint_state_broadcaster, effort_controller over the robot's joints). With the plant and
the controller at a SCHED_FIFO priority, `manager_prefix` runs controller_manager with
every thread MANAGER_BELOW under it (its executor takes the effort commands)."""

import hashlib
import os
import shlex
import tempfile
from xml.sax.saxutils import escape, quoteattr

HARDWARE = 'topic_based_ros2_control/TopicBasedSystem'
COMMANDS_TOPIC = '/plant_simulator/joint_commands'   # TopicBasedSystem -> plant
STATES_TOPIC = '/plant_simulator/joint_states'       # plant -> TopicBasedSystem
BROADCASTER = 'joint_state_broadcaster/JointStateBroadcaster'
EFFORT_CONTROLLER = 'effort_controllers/JointGroupEffortController'
CONTROLLERS = ('joint_state_broadcaster', 'effort_controller')
SYSTEM_NAME = 'robot_dynamics_sim'
MANAGER_BELOW = 10      # controller_manager's SCHED_FIFO priority under the nodes' (the
#                         benchmark's setting: its every thread then waits only for them)


def description(urdf, joints, initial_positions=None, commands_topic=COMMANDS_TOPIC,
                states_topic=STATES_TOPIC, name=SYSTEM_NAME, stamp_joint=''):
    """`urdf` with the <ros2_control> block of the simulated arm (see the module); each
    joint's position state starts at `initial_positions` (default 0), what
    joint_state_broadcaster publishes until the plant's first state is read. With
    `stamp_joint`, also that joint (see `stamp_joint_urdf`)."""
    initial = list(initial_positions) if initial_positions is not None else [0.0] * len(joints)
    if len(initial) != len(joints):
        raise ValueError(f'initial_positions: {len(initial)} values for {len(joints)} joints')
    if stamp_joint:
        urdf = stamp_joint_urdf(urdf, stamp_joint)
    lines = [f'  <ros2_control name={quoteattr(name)} type="system">',
             '    <hardware>',
             f'      <plugin>{HARDWARE}</plugin>',
             f'      <param name="joint_commands_topic">{escape(commands_topic)}</param>',
             f'      <param name="joint_states_topic">{escape(states_topic)}</param>',
             '      <param name="trigger_joint_command_threshold">-1</param>',
             '    </hardware>']
    for joint, start in zip(joints, initial):
        lines += [f'    <joint name={quoteattr(joint)}>',
                  '      <command_interface name="effort"/>',
                  '      <state_interface name="position">',
                  f'        <param name="initial_value">{float(start)!r}</param>',
                  '      </state_interface>',
                  '      <state_interface name="velocity">',
                  '        <param name="initial_value">0.0</param>',
                  '      </state_interface>',
                  '      <state_interface name="effort">',
                  '        <param name="initial_value">nan</param>',
                  '      </state_interface>',
                  '    </joint>']
    if stamp_joint:
        lines += [f'    <joint name={quoteattr(stamp_joint)}>',
                  '      <command_interface name="effort"/>']
        for state, start in (('position', '0.0'), ('velocity', '0.0'), ('effort', 'nan')):
            lines += [f'      <state_interface name="{state}">',
                      f'        <param name="initial_value">{start}</param>',
                      '      </state_interface>']
        lines.append('    </joint>')
    lines.append('  </ros2_control>')
    head, tail = urdf.rsplit('</robot>', 1)
    return head + '\n'.join(lines) + '\n</robot>' + tail


def root_link(urdf):
    """The name of the URDF's root link (the one link no joint has as its child)."""
    import xml.etree.ElementTree as ElementTree
    robot = ElementTree.fromstring(urdf)
    children = {child.get('link') for child in robot.iter('child')}
    roots = [link.get('name') for link in robot.findall('link')
             if link.get('name') not in children]
    if len(roots) != 1:
        raise ValueError(f'the URDF has {len(roots)} root links ({roots}); one expected')
    return roots[0]


def stamp_joint_urdf(urdf, stamp_joint):
    """`urdf` with a massless link hung on the root by a continuous joint `stamp_joint`:
    the plant's stamp_joint, whose position is the time each state was measured. ros2_control
    takes only joints the URDF has, and not fixed ones; the plugin sends a command for every
    joint of its block, so it has an effort command interface too (the plant ignores it; its
    effort state starts at NaN like the arm's, so that "no command" stays every effort NaN);
    its position starts at 0, which the controller takes as "not measured yet"."""
    root = root_link(urdf)
    link = f'{stamp_joint}_link'
    lines = [f'  <link name={quoteattr(link)}/>',
             f'  <joint name={quoteattr(stamp_joint)} type="continuous">',
             f'    <parent link={quoteattr(root)}/>',
             f'    <child link={quoteattr(link)}/>',
             '  </joint>']
    head, tail = urdf.rsplit('</robot>', 1)
    return head + '\n'.join(lines) + '\n</robot>' + tail


def controllers_yaml(joints, update_rate=1000):
    """controller_manager's parameter file (text): `update_rate` [Hz],
    joint_state_broadcaster and effort_controller over `joints` in this order."""
    import yaml
    document = {
        'controller_manager': {'ros__parameters': {
            'update_rate': int(update_rate),
            'joint_state_broadcaster': {'type': BROADCASTER},
            'effort_controller': {'type': EFFORT_CONTROLLER}}},
        'effort_controller': {'ros__parameters': {'joints': list(joints)}},
    }
    return ('# controller_manager of launch/ros2_control_sim.launch.py (written by it)\n'
            + yaml.safe_dump(document, sort_keys=False))


def controllers_file(joints, update_rate=1000):
    """`controllers_yaml` written to the temporary folder, named by its content; its path."""
    text = controllers_yaml(joints, update_rate)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f'robot_dynamics_controllers_{digest}.yaml')
    if not os.path.exists(path):
        handle, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix='.part')
        with os.fdopen(handle, 'w', encoding='utf-8') as stream:
            stream.write(text)
        os.replace(partial, path)
    return path


def manager_priority(priorities):
    """controller_manager's SCHED_FIFO priority for the plant's and the controller's
    `priorities` (0 or None: off): MANAGER_BELOW under the lowest of those set, at least 1;
    0 when neither is."""
    given = [int(p) for p in priorities if p]
    return max(1, min(given) - MANAGER_BELOW) if given else 0


def manager_prefix(priority):
    """A launch `prefix` that runs controller_manager's process with every thread at
    SCHED_FIFO `priority` (`chrt -f`), or None for 0. Its update loop then sets its own
    `thread_priority` (50 by default). Where the system refuses SCHED_FIFO (no
    CAP_SYS_NICE, no rtprio limit) the manager starts without it, after one line saying so,
    as the nodes run on with a warning."""
    if not priority:
        return None
    fifo = f'chrt -f {int(priority)}'
    script = (f'if {fifo} true 2>/dev/null; then exec {fifo} "$0" "$@"; fi; '
              f'echo "controller_manager: SCHED_FIFO priority {int(priority)} refused '
              f'(chrt); running without it" >&2; exec "$0" "$@"')
    return 'sh -c ' + shlex.quote(script)
