"""The control_msgs interfaces built by tools/interfaces.py (PyPI has no control_msgs wheel).

The definitions must be the upstream ones field for field: from Kilted on, two nodes talk only
when their type hashes (REP 2011, RIHS01) agree, so MoveIt's FollowJointTrajectory client would
not talk to a server built from definitions that differ in any field. The Kilted hashes were
read off upstream control_msgs 6.8.0 (its Kilted release) built with the Kilted wheels. Jazzy's
release, 5.8.0, has no `index` fields in the action's feedback; its action hash was read off a
Jazzy build of definitions whose field lines (comments and blanks aside) equal upstream 5.8.0's,
and its two messages hash as in Kilted (the nested types are the same). The service
QueryTrajectoryState (identical in 5.8.0 and 6.8.0) was read off upstream builds of each
release tag, 6.8.0 with the Kilted wheels and 5.8.0 with the Jazzy wheels (the package as
fetched from ros-controls/control_msgs, built out of tree, its type description generator
run): one hash for both, which these two builds' action hashes above confirm as a method.
SpeedScalingFactor (one float64 field, the same in 5.8.0 and 6.8.0, no nested types, so one
hash for both) was computed from upstream 6.8.0's .msg text twice: by hand after REP 2011
(the JSON of its type description without default values, SHA-256; the same hand method
gives JointTolerance's hash above) and with rosidl_generator_type_description's
calculate_type_hash on the description rosidl's own parser makes of that text.
"""

import importlib.metadata
import json
import os
import sys

import pytest

from ros_testing import REPO, RosHarness   # noqa: I100 - sets ROS_DOMAIN_ID first

sys.path.insert(0, os.path.join(REPO, 'tools'))
import interfaces  # noqa: E402,I100 - tools/interfaces.py

EXPECTED = {
    'kilted': {
        'action/FollowJointTrajectory':
            'RIHS01_ff29901b2693f5deb847e96084a1c2cdb26e70b7c847be21859b70a55fb29cf0',
        'msg/JointTrajectoryControllerState':
            'RIHS01_51d8dd89cc624cbe9daaeeb4d80d6de9b86168ffdc3be41fefc0953e3c26e480',
        'msg/JointTolerance':
            'RIHS01_c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648',
        'srv/QueryTrajectoryState':         # upstream 6.8.0, Kilted wheels
            'RIHS01_4a0935dffef18bc5b9e101c9d03d84e681ecd4cebd724b8f11fde008751a325a',
        'msg/SpeedScalingFactor':           # upstream 6.8.0's text, REP 2011 by hand
            'RIHS01_0c240f349f2b74e33e8741f83e0f196ddeb6585923663876ed3c1f51f0566037',
    },
    'jazzy': {
        'action/FollowJointTrajectory':
            'RIHS01_738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6',
        'msg/JointTrajectoryControllerState':
            'RIHS01_51d8dd89cc624cbe9daaeeb4d80d6de9b86168ffdc3be41fefc0953e3c26e480',
        'msg/JointTolerance':
            'RIHS01_c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648',
        'srv/QueryTrajectoryState':         # upstream 5.8.0, Jazzy wheels
            'RIHS01_4a0935dffef18bc5b9e101c9d03d84e681ecd4cebd724b8f11fde008751a325a',
        'msg/SpeedScalingFactor':           # the same text in 5.8.0
            'RIHS01_0c240f349f2b74e33e8741f83e0f196ddeb6585923663876ed3c1f51f0566037',
    },
}


def ros_distro():
    """The ROS distribution of the installed rclpy wheels (ros-<distro>-rclpy)."""
    for distro in EXPECTED:
        try:
            importlib.metadata.version(f'ros-{distro}-rclpy')
            return distro
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def built_here():
    """The share directory of the control_msgs that tools/interfaces.py built into this
    venv, or a skip (a ROS install's own control_msgs is not this test's subject)."""
    pytest.importorskip('control_msgs.action', reason='control_msgs is not built in this '
                        'environment (tools/dev.py test builds it; cmake and a C++ compiler '
                        'are needed)')
    if not os.path.exists(os.path.join(sys.prefix, interfaces.MARKER)):
        pytest.skip('control_msgs here is not the one tools/interfaces.py builds')
    return os.path.join(sys.prefix, 'share', 'control_msgs')


def test_built_type_hashes_are_upstream_control_msgs():
    share = built_here()
    distro = ros_distro()
    assert distro in EXPECTED, f'unknown ROS distribution of rclpy: {distro}'
    for name, expected in EXPECTED[distro].items():
        with open(os.path.join(share, f'{name}.json'), encoding='utf-8') as stream:
            hashes = {entry['type_name']: entry['hash_string']
                      for entry in json.load(stream)['type_hashes']}
        assert hashes[f'control_msgs/{name}'] == expected, name


def test_controller_state_topic_carries_the_upstream_type_hash():
    built_here()
    from control_msgs.msg import JointTrajectoryControllerState
    from rclpy.node import Node
    ros = RosHarness()
    try:
        node = ros.add(Node('hash_probe', context=ros.context))
        node.create_publisher(JointTrajectoryControllerState, 'probe_state', 1)
        infos = node.get_publishers_info_by_topic('probe_state')
        assert len(infos) == 1
        wire = str(infos[0].topic_type_hash)
        assert wire == EXPECTED[ros_distro()]['msg/JointTrajectoryControllerState']
    finally:
        ros.close()


def test_jazzy_definitions_drop_only_the_feedback_index_fields():
    kilted = interfaces.definitions('kilted')
    jazzy = interfaces.definitions('jazzy')
    assert set(kilted) == set(jazzy)
    action = 'action/FollowJointTrajectory.action'
    removed = [line.strip() for line in kilted[action].splitlines()
               if line not in jazzy[action].splitlines()]
    assert removed == ['int32 index', 'int32 multi_dof_index']
    assert all(kilted[name] == jazzy[name] for name in kilted if name != action)
    assert interfaces.digest(kilted) != interfaces.digest(jazzy)


def test_without_build_tools_the_setup_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(interfaces, 'importable', lambda python: False)
    monkeypatch.setenv('PATH', '')
    if sys.prefix == sys.base_prefix:
        pytest.skip('needs a virtual environment (tools/dev.py runs the tests in one)')
    assert interfaces.ensure_control_msgs(sys.executable, 'kilted') is False
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert 'control_msgs not built' in lines[0] and 'cmake' in lines[0]
    assert 'FollowJointTrajectory action' in lines[0]
