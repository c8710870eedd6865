"""JointState recordings in rosbag2 folders (robot_dynamics.joint_state_bag): what is
written is what ROS reads (CDR of sensor_msgs/msg/JointState, bag metadata), what is read is
what was written (by joint name, extra joints ignored, sqlite3 and mcap), and every bad
recording is refused with one line that says why."""

import math
import sqlite3

import numpy as np
import pytest
import yaml

rosbags = pytest.importorskip('rosbags')

from robot_dynamics.identification.recordings import (BagError, JOINT_STATE_TYPE,
                                                      JointStateBagWriter, read_joint_states,
                                                      write_joint_states)
from robot_dynamics.nodes.identify import held_out  # noqa: E402

JOINTS = ('joint_1', 'joint_2', 'joint_3')
RATE = 500.0


def motion(count=400, start=1000.0):
    """Smooth synthetic states and efforts of three joints, a sample every 2 ms."""
    t = start + np.arange(count) / RATE
    phase = np.arange(1, 4) * 0.7
    q = np.sin(2.0 * t[:, None] + phase)
    qd = 2.0 * np.cos(2.0 * t[:, None] + phase)
    tau = 10.0 * q + 0.5 * qd
    return t, q, qd, tau


def with_gripper(values, extra):
    """(N, 3) -> (N, 4): a joint the model does not have, put first."""
    return np.hstack([np.full((len(values), 1), extra), values])


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_round_trip_maps_by_name_and_ignores_joints_not_in_the_model(tmp_path, storage):
    t, q, qd, tau = motion()
    names = ('gripper', *JOINTS)
    folder = tmp_path / 'bag'
    write_joint_states(folder, names, t, with_gripper(q, 0.01), with_gripper(qd, 0.0),
                       with_gripper(tau, 3.0), storage=storage)
    wanted = ('joint_3', 'joint_1', 'joint_2')          # another order than the bag's
    recording = read_joint_states(folder, wanted)
    order = [JOINTS.index(j) for j in wanted]
    assert recording.joints == wanted and recording.topic == '/joint_states'
    np.testing.assert_allclose(recording.t, t, rtol=0, atol=1e-9)
    for got, sent in ((recording.q, q), (recording.qd, qd), (recording.tau, tau)):
        np.testing.assert_array_equal(got, sent[:, order])
    assert recording.time_source == 'header stamps' and recording.notes == []
    assert recording.sample_period == pytest.approx(1.0 / RATE)
    assert len(recording.segments()) == 1


def test_the_bag_is_what_ros_reads(tmp_path):
    """The stored bytes are the CDR that rclpy deserialises into sensor_msgs/JointState,
    and metadata.yaml has what `ros2 bag info` needs (version, storage, standard type)."""
    serialization = pytest.importorskip('rclpy.serialization')
    from sensor_msgs.msg import JointState
    t, q, qd, tau = motion(count=5)
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    with open(tmp_path / 'bag' / 'metadata.yaml', encoding='utf-8') as stream:
        info = yaml.safe_load(stream)['rosbag2_bagfile_information']
    assert info['version'] >= 8 and info['storage_identifier'] == 'sqlite3'
    assert info['message_count'] == 5
    topic = info['topics_with_message_count'][0]
    assert topic['topic_metadata']['name'] == '/joint_states'
    assert topic['topic_metadata']['type'] == 'sensor_msgs/msg/JointState'
    assert topic['topic_metadata']['serialization_format'] == 'cdr'
    [database] = info['relative_file_paths']
    with sqlite3.connect(tmp_path / 'bag' / database) as connection:
        rows = connection.execute('SELECT timestamp, data FROM messages ORDER BY timestamp')\
            .fetchall()
    assert len(rows) == 5
    for k, (stamp, data) in enumerate(rows):
        msg = serialization.deserialize_message(data, JointState)
        assert list(msg.name) == list(JOINTS)
        np.testing.assert_array_equal(msg.position, q[k])
        np.testing.assert_array_equal(msg.effort, tau[k])
        assert msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9 == pytest.approx(
            t[k], abs=1e-9)
        assert stamp == round(t[k] * 1e9)


def test_messages_serialised_by_rclpy_are_read_back(tmp_path):
    """What the recorder of `identify excite` stores: rclpy's own CDR bytes."""
    serialization = pytest.importorskip('rclpy.serialization')
    from sensor_msgs.msg import JointState
    t, q, qd, tau = motion(count=20)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            msg = JointState(name=list(JOINTS), position=q[k].tolist(),
                             velocity=qd[k].tolist(), effort=tau[k].tolist())
            msg.header.stamp.sec = int(t[k])
            msg.header.stamp.nanosec = int(round((t[k] - int(t[k])) * 1e9))
            writer.write_serialized(t[k] + 0.001, serialization.serialize_message(msg))
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    np.testing.assert_array_equal(recording.qd, qd)
    np.testing.assert_allclose(recording.t, t, atol=1e-9)


def test_messages_without_effort_are_refused_in_one_line_naming_the_field(tmp_path):
    t, q, qd, _ = motion(count=10)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            writer.write(t[k], JOINTS, q[k], qd[k])        # no effort, as many drivers
    with pytest.raises(BagError) as refused:
        read_joint_states(tmp_path / 'bag', JOINTS)
    message = str(refused.value)
    assert '\n' not in message and 'no effort' in message and str(tmp_path / 'bag') in message


def test_a_recording_without_velocities_is_used_with_nan_velocities(tmp_path):
    """A driver that publishes positions and efforts only: every sample is kept, the
    velocities are NaN (the estimator takes them from the positions) and a note says so."""
    t, q, _, tau = motion(count=40)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            writer.write(t[k], JOINTS, q[k], (), tau[k])
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert len(recording) == 40 and not recording.velocities
    assert np.all(np.isnan(recording.qd))
    np.testing.assert_array_equal(recording.q, q)
    np.testing.assert_array_equal(recording.tau, tau)
    assert any('no velocities' in note and 'joint_1' in note for note in recording.notes)


def test_a_few_messages_without_velocity_among_complete_ones_are_skipped(tmp_path):
    t, q, qd, tau = motion(count=40)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            writer.write(t[k], JOINTS, q[k], () if k in (5, 6) else qd[k], tau[k])
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert len(recording) == 38 and recording.velocities
    assert np.all(np.isfinite(recording.qd))
    assert any('2 of 40 messages skipped' in n and 'no velocities' in n
               for n in recording.notes)


def test_a_publisher_without_velocities_leaves_every_velocity_to_the_estimator(tmp_path):
    """The wrist on its own publisher without velocities, the arm with them: merged by
    name as usual; all velocities NaN (the estimator needs all or none), said in a note
    naming the wrist's joints."""
    t, q, qd, tau = motion(count=60)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            writer.write(t[k], JOINTS[:2], q[k, :2], qd[k, :2], tau[k, :2])
            writer.write(t[k] + 1e-5, JOINTS[2:], q[k, 2:], (), tau[k, 2:])
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert not recording.velocities and len(recording) >= 58
    note = next(n for n in recording.notes if 'no velocities' in n)
    assert "['joint_3']" in note
    index = np.searchsorted(t, recording.t - 1e-7)             # the arm's messages
    np.testing.assert_allclose(recording.t, t[index], atol=1e-8)
    np.testing.assert_allclose(recording.q, q[index], atol=1e-4)   # wrist interpolated


def test_a_few_incomplete_or_foreign_messages_are_skipped_and_counted(tmp_path):
    """A gripper's messages on the same topic (other joints), a message without effort
    and one naming only some joints among complete ones: skipped, each said once."""
    t, q, qd, tau = motion(count=50)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            if k == 10:
                writer.write(t[k], JOINTS, q[k], qd[k])
            elif k == 20:
                writer.write(t[k], JOINTS[:2], q[k, :2], qd[k, :2], tau[k, :2])
            else:
                writer.write(t[k], JOINTS, q[k], qd[k], tau[k])
            writer.write(t[k] + 1e-4, ['finger'], [0.01], [0.0], [1.0])
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert len(recording) == 48
    assert any('1 of 100 messages skipped' in n and 'no efforts' in n for n in recording.notes)
    assert any('1 of 100' in n and 'only some' in n for n in recording.notes)


def test_non_finite_samples_are_dropped_and_counted(tmp_path):
    t, q, qd, tau = motion(count=30)
    q[3, 1] = math.nan
    tau[7, 2] = math.inf
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert len(recording) == 28 and np.all(np.isfinite(recording.q))
    assert recording.notes == ['2 samples dropped: non-finite values']
    assert not np.isin(t[[3, 7]], recording.t).any()


def test_without_header_stamps_the_receive_time_is_used(tmp_path):
    t, q, qd, tau = motion(count=30)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            writer.write(0.0, JOINTS, q[k], qd[k], tau[k], received=t[k])
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert recording.time_source.startswith('receive times')
    np.testing.assert_allclose(recording.t, t, atol=1e-9)


def test_a_gap_splits_the_samples_into_segments(tmp_path):
    t, q, qd, tau = motion(count=100)
    t[60:] += 1.0                                            # a paused recording
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert recording.segments() == [slice(0, 60), slice(60, 100)]


def test_the_last_fifth_of_all_samples_is_held_out(tmp_path):
    first, second = motion(count=300), motion(count=100, start=2000.0)
    write_joint_states(tmp_path / 'a', JOINTS, *first)
    write_joint_states(tmp_path / 'b', JOINTS, *second)
    recordings = [read_joint_states(tmp_path / name, JOINTS) for name in 'ab']
    estimation, validation = held_out(recordings)
    assert [len(r) for r in estimation] == [300, 20] and [len(r) for r in validation] == [80]
    assert validation[0].t[0] > estimation[1].t[-1]


@pytest.mark.parametrize('make, message', [
    ('missing', 'no such folder'),
    ('empty_folder', 'no metadata.yaml: not a rosbag2 recording'),
    ('no_joint_state', f'no {JOINT_STATE_TYPE} topic (topics: /chatter (std_msgs/msg/String))'),
    ('joints_missing', "joints missing on /joint_states: ['joint_3']"),
    ('no_messages', 'no messages on /joint_states'),
    ('two_topics', 'several JointState topics'),
])
def test_bad_recordings_are_refused_in_one_line(tmp_path, make, message):
    folder = tmp_path / 'bag'
    t, q, qd, tau = motion(count=5)
    if make == 'empty_folder':
        folder.mkdir()
    elif make == 'no_joint_state':
        from rosbags.rosbag2 import Writer
        from rosbags.typesys import get_typestore, Stores
        store = get_typestore(Stores.ROS2_JAZZY)
        with Writer(folder, version=8) as writer:
            connection = writer.add_connection('/chatter', 'std_msgs/msg/String',
                                               typestore=store)
            data = store.serialize_cdr(store.types['std_msgs/msg/String'](data='hi'),
                                       'std_msgs/msg/String')
            writer.write(connection, 1, data)
    elif make == 'joints_missing':
        write_joint_states(folder, JOINTS[:2], t, q[:, :2], qd[:, :2], tau[:, :2])
    elif make == 'no_messages':
        JointStateBagWriter(folder).close()
    elif make == 'two_topics':
        from rosbags.rosbag2 import Writer
        from rosbags.typesys import get_typestore, Stores
        store = get_typestore(Stores.ROS2_JAZZY)
        with Writer(folder, version=8) as writer:
            for topic in ('/left/joint_states', '/right/joint_states'):
                writer.add_connection(topic, JOINT_STATE_TYPE, typestore=store)
    with pytest.raises(BagError) as refused:
        read_joint_states(folder, JOINTS)
    assert message in str(refused.value) and '\n' not in str(refused.value)
    assert str(refused.value).startswith(f'bag {folder}: ')


def test_a_chosen_topic_is_read_among_several(tmp_path):
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import get_typestore, Stores
    store = get_typestore(Stores.ROS2_JAZZY)
    t, q, qd, tau = motion(count=5)
    bag = JointStateBagWriter.__new__(JointStateBagWriter)      # for its message builder
    bag.typestore, bag._types = store, store.types
    with Writer(tmp_path / 'bag', version=8) as writer:
        for sign, topic in ((1.0, '/left/joint_states'), (-1.0, '/right/joint_states')):
            connection = writer.add_connection(topic, JOINT_STATE_TYPE, typestore=store)
            for k in range(len(t)):
                msg = bag.message(t[k], JOINTS, sign * q[k], qd[k], tau[k])
                writer.write(connection, int(t[k] * 1e9),
                             store.serialize_cdr(msg, JOINT_STATE_TYPE))
    recording = read_joint_states(tmp_path / 'bag', JOINTS, topic='/right/joint_states')
    np.testing.assert_array_equal(recording.q, -q)
    with pytest.raises(BagError, match="no sensor_msgs/msg/JointState on /nowhere"):
        read_joint_states(tmp_path / 'bag', JOINTS, topic='/nowhere')


def test_an_existing_folder_is_not_overwritten(tmp_path):
    (tmp_path / 'bag').mkdir()
    with pytest.raises(BagError, match='exists already'):
        JointStateBagWriter(tmp_path / 'bag')


def test_simulated_time_from_zero_keeps_the_header_stamps(tmp_path):
    """A first stamp of 0 (simulated time starts there) is a stamp, not a missing one."""
    t, q, qd, tau = motion(count=30, start=0.0)
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert recording.time_source == 'header stamps' and recording.t[0] == 0.0
