"""JointState messages read in batches (robot_dynamics.joint_state_bag): messages of one
length that share a layout are read together, any other one on its own. Whatever the mix
(the same length hiding other names, another frame_id or other array lengths, big-endian
or corrupt messages, a chunk boundary inside a publisher's messages), the recording read is
exactly the one read message by message, and the values are the ones written."""

import numpy as np
import pytest

pytest.importorskip('rosbags')

from robot_dynamics.identification import recordings as joint_state_bag  # noqa: E402
from robot_dynamics.identification.recordings import (BagError, JOINT_STATE_TYPE,
                                                      JointStateBagWriter, read_joint_states)

JOINTS = ('joint_1', 'joint_2', 'joint_3')
OTHERS = ('other_1', 'other_2', 'other_3')       # names of the same byte length
PERIOD = 0.002


def states(k):
    """q, qd, tau (3,) of message k, distinct for every message and joint."""
    q = np.array([0.1, 0.2, 0.3]) * k + np.array([1.0, 2.0, 3.0])
    return q, -0.5 * q, 10.0 * q + 0.25


def serialized(writer, stamp, names, arrays, frame='', little_endian=True):
    """A JointState in CDR, with a frame_id and byte order of the test's choice."""
    types = writer.typestore.types
    sec = int(stamp)
    header = types['std_msgs/msg/Header'](
        stamp=types['builtin_interfaces/msg/Time'](sec=sec,
                                                   nanosec=int(round((stamp - sec) * 1e9))),
        frame_id=frame)
    message = types[JOINT_STATE_TYPE](header=header, name=list(names),
                                      **{f: np.ascontiguousarray(a, dtype=float)
                                         for f, a in zip(('position', 'velocity', 'effort'),
                                                         arrays)})
    return bytes(writer.typestore.serialize_cdr(message, JOINT_STATE_TYPE,
                                                little_endian=little_endian))


def outcome(folder, joints=JOINTS):
    """The recording's fields, or the one-line refusal."""
    try:
        r = read_joint_states(folder, joints)
    except BagError as error:
        return str(error)
    return (r.t, r.q, r.qd, r.tau, r.time_source, r.notes, r.custom_data)


def assert_same(mine, theirs):
    assert type(mine) is type(theirs)
    if isinstance(mine, str):
        assert mine == theirs
        return
    for a, b in zip(mine, theirs):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)             # exactly, not approximately
        else:
            assert a == b


def read_all_ways(folder, monkeypatch, joints=JOINTS):
    """The outcome read in batches, checked equal to the outcome read message by message
    and to the one read in chunks of 23 messages (boundaries inside every publisher)."""
    batched = outcome(folder, joints)
    with monkeypatch.context() as patch:
        patch.setattr(joint_state_bag, 'LAYOUTS', 0)
        assert_same(batched, outcome(folder, joints))
    with monkeypatch.context() as patch:
        patch.setattr(joint_state_bag, 'CHUNK', 23)
        assert_same(batched, outcome(folder, joints))
    return batched


def check_values(result, ks, order=JOINTS):
    """The samples are those of messages `ks` (in time order), joints in `order`."""
    assert not isinstance(result, str), result
    t, q, qd, tau = result[:4]
    np.testing.assert_allclose(t, 100.0 + PERIOD * np.asarray(ks), rtol=0, atol=1e-9)
    columns = [JOINTS.index(j) for j in order]
    for row, k in enumerate(ks):
        for got, sent in zip((q, qd, tau), states(k)):
            np.testing.assert_array_equal(got[row], sent[columns])


def test_a_plain_recording_is_read_without_decoding_messages_one_by_one(tmp_path,
                                                                         monkeypatch):
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(300):
            writer.write(100.0 + PERIOD * k, JOINTS, *states(k))

    def refused(*args):
        raise AssertionError('a message decoded on its own')
    monkeypatch.setattr(joint_state_bag, '_decode', refused)
    result = outcome(tmp_path / 'bag', ('joint_2', 'joint_3', 'joint_1'))
    check_values(result, range(300), ('joint_2', 'joint_3', 'joint_1'))


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_the_same_length_with_other_names_or_frame_is_not_read_with_the_wrong_layout(
        tmp_path, monkeypatch, storage):
    """Messages of one byte length: the arm's; the arm's joints in another order; a
    frame_id of 5 characters, which moves the names 4 bytes on while the arrays stay
    where they were (8-byte aligned); another publisher naming other joints but one."""
    kinds = {}
    with JointStateBagWriter(tmp_path / 'bag', storage=storage) as writer:
        for k in range(120):
            stamp = 100.0 + PERIOD * k
            q, qd, tau = states(k)
            if k % 3 == 1:
                raw = serialized(writer, stamp, JOINTS[::-1], (q[::-1], qd[::-1], tau[::-1]))
            elif k % 3 == 2:
                raw = serialized(writer, stamp, JOINTS, (q, qd, tau), frame='abcde')
            else:
                raw = serialized(writer, stamp, JOINTS, (q, qd, tau))
            writer.write_serialized(stamp + 1e-4, raw)
            kinds.setdefault(len(raw), set()).add(k % 3)
            if k % 4 == 0:
                other = serialized(writer, stamp + 1e-4, ('joint_1', *OTHERS[1:]),
                                   (q + 7.0, qd, tau))
                writer.write_serialized(stamp + 2e-4, other)
                kinds.setdefault(len(other), set()).add('other')
    assert list(kinds.values()) == [{0, 1, 2, 'other'}]      # one length for all
    result = read_all_ways(tmp_path / 'bag', monkeypatch)
    check_values(result, range(120))
    assert result[5] == ['30 of 150 messages skipped: they name only some of the model '
                         'joints']


def test_arrays_of_other_lengths_in_messages_of_one_length_are_counted(tmp_path,
                                                                      monkeypatch):
    """Velocity of 4 and effort of 2 values: as many bytes as 3 and 3, other layout."""
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(100):
            stamp = 100.0 + PERIOD * k
            q, qd, tau = states(k)
            if k % 10 == 5:
                arrays = (q, np.append(qd, 0.0), tau[:2])
            else:
                arrays = (q, qd, tau)
            writer.write_serialized(stamp, serialized(writer, stamp, JOINTS, arrays))
    result = read_all_ways(tmp_path / 'bag', monkeypatch)
    assert result[5] == ['10 of 100 messages skipped: they have no velocities']
    check_values(result, [k for k in range(100) if k % 10 != 5])


def test_an_empty_effort_now_and_then_is_skipped_and_counted(tmp_path, monkeypatch):
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(200):
            q, qd, tau = states(k)
            writer.write(100.0 + PERIOD * k, JOINTS, q, qd, () if k % 17 == 3 else tau)
    result = read_all_ways(tmp_path / 'bag', monkeypatch)
    assert result[5] == ['12 of 200 messages skipped: they have no efforts']
    check_values(result, [k for k in range(200) if k % 17 != 3])


def test_chunk_boundaries_inside_interleaved_publishers_change_nothing(tmp_path,
                                                                       monkeypatch):
    """Arm, wrist and gripper publishers interleaved, some messages late, some names
    shuffled: read in chunks of 23, 16 or 1 messages, as in one."""
    rng = np.random.default_rng(3)
    messages = []
    for k in range(150):
        stamp = 100.0 + PERIOD * k
        q, qd, tau = states(k)
        late = 3 * PERIOD if rng.random() < 0.05 else 0.0
        order = rng.permutation(2) if k % 5 == 0 else np.arange(2)
        names = [JOINTS[i] for i in order]
        messages.append((stamp + 1e-4 + late, stamp, names, q[order], qd[order], tau[order]))
        if k % 2 == 0:
            messages.append((stamp + 2e-4, stamp, ['joint_3'], q[2:], qd[2:], tau[2:]))
        if k % 9 == 0:
            messages.append((stamp + 3e-4, stamp, ['finger'], [0.01], [0.0], [1.0]))
    messages.sort(key=lambda m: m[0])
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for received, stamp, names, q, qd, tau in messages:
            writer.write(stamp, names, q, qd, tau, received=received)
    result = read_all_ways(tmp_path / 'bag', monkeypatch)
    for chunk in (16, 1):
        with monkeypatch.context() as patch:
            patch.setattr(joint_state_bag, 'CHUNK', chunk)
            assert_same(result, outcome(tmp_path / 'bag'))
    assert any('merged 2 publishers' in n for n in result[5])
    assert any('out of order' in n for n in result[5])


def test_big_endian_messages_of_the_same_length_are_read_by_rosbags(tmp_path, monkeypatch):
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(60):
            stamp = 100.0 + PERIOD * k
            writer.write_serialized(stamp, serialized(writer, stamp, JOINTS, states(k),
                                                      little_endian=k % 3 != 0))
    result = read_all_ways(tmp_path / 'bag', monkeypatch)
    check_values(result, range(60))


@pytest.mark.parametrize('where, corruption', [(0, 'garbage'), (40, 'garbage'),
                                               (40, 'big-endian mark')])
def test_a_corrupt_message_of_the_same_length_is_refused_as_before(tmp_path, monkeypatch,
                                                                   where, corruption):
    """A message of the others' length that no decoder reads (bytes of garbage, or a
    little-endian message marked big-endian), first or among them: the same one-line
    refusal naming its receive time, whichever way it is read."""
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(60):
            stamp = 100.0 + PERIOD * k
            raw = serialized(writer, stamp, JOINTS, states(k))
            if k == where and corruption == 'garbage':
                raw = b'\x00\x01\x00\x00' + b'\xff' * (len(raw) - 4)
            elif k == where:
                raw = b'\x00\x00' + raw[2:]
            writer.write_serialized(stamp, raw)
    result = read_all_ways(tmp_path / 'bag', monkeypatch)
    assert isinstance(result, str) and '\n' not in result
    assert f'received at {100.0 + PERIOD * where:.9f} s cannot be decoded' in result


@pytest.mark.parametrize('first', ['joint_long_1', 'joint_2'])
def test_the_publisher_seen_first_gives_the_times_whatever_its_message_length(
        tmp_path, monkeypatch, first):
    """Two publishers of one joint each, as many messages each: the one whose message is
    stored first gives the times (the other is interpolated), longer messages or not."""
    joints = ('joint_long_1', 'joint_2')
    later = joints[1 - joints.index(first)]
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(50):
            stamp = 100.0 + PERIOD * k
            for name, shift in ((first, 0.0), (later, PERIOD / 2)):
                writer.write(stamp + shift, [name], [k + shift], [1.0], [2.0])
    result = read_all_ways(tmp_path / 'bag', monkeypatch, joints)
    np.testing.assert_allclose(result[0], 100.0 + PERIOD * np.arange(1, 50), atol=1e-9)
    assert any(f"merged 2 publishers by joint name (['{first}'] + ['{later}'])" in note
               for note in result[5])
