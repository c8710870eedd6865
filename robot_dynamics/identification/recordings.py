"""sensor_msgs/JointState recordings in rosbag2 folders, read and written without ROS.

`read_joint_states(folder, joints)` returns the positions, velocities and efforts of the
named joints from a rosbag2 folder (sqlite3 or mcap storage), e.g. one made on any robot
with ``ros2 bag record /joint_states``; `JointStateBagWriter` and `write_joint_states`
make one that ``ros2 bag`` reads (Jazzy and later: bag format version 8, the standard type
name ``sensor_msgs/msg/JointState``, CDR serialisation). Both use the `rosbags` library
(pure Python, ``pip install rosbags``), imported where used. The messages are read in
batches: those of one length that share one layout (CDR header, frame_id length, names
and array lengths; a publisher's messages as a rule) are taken from their raw CDR bytes
together with numpy, any other one is decoded on its own (directly, else by rosbags'
general decoder), with the same result either way.

Reading rules (each refusal is a `BagError` with one line that names the folder, what is
wrong and what to do):

* the topic: ``--topic`` if given, else ``/joint_states``, else the only JointState topic;
* joints are mapped by name, in any order; joints that are not in the model are ignored; a
  message that names none of the model's joints (e.g. a gripper's) is skipped;
* several publishers on one topic (an arm and a gripper, two halves of an arm), each
  naming some of the model's joints: the messages that name the same joints are one
  publisher. When one publisher names every model joint, its messages are used and the
  others skipped and counted; otherwise the publishers are merged by joint name: the one
  naming the most joints gives the times, each other one's values are interpolated
  linearly to those times between its two messages around them (at most 5 of its median
  steps apart), and a sample without such a pair is dropped and counted;
* a message must carry positions and efforts for its names: a recording whose messages
  lack one of them is refused, naming the field; a few such messages among complete ones
  are skipped and counted. Velocities likewise, except that a publisher none of whose
  messages has velocities (a driver that publishes positions and efforts only) is used:
  its joints' velocities are NaN, and then every joint's (`JointStateRecording.velocities`
  is False, a note says so): the estimator takes them from the positions;
* time is the header stamp. Stamps not set (all zero, or all equal) give way to the bag's
  receive time for the whole recording; a few zero stamps after set ones (a stamp of 0
  before any set one is simulated time starting at 0) are replaced by their receive time
  less the median delay between stamp and receipt; stamps that jump back by more than a
  gap (several clocks) give way to the receive times too (`time_source` says which);
* messages out of order (delivered late) are put in order of their time; a sample with
  the same time as the one before (a duplicated or republished state) is dropped, and
  so is one with a non-finite value (NaN, inf) in a model joint; each counted in `notes`;
* the bag's metadata ``custom_data`` (rosbag2 format 6 and later) is kept in
  `JointStateRecording.custom_data` (`identify excite` writes its effort timing there).

Any rosbag2 format version rosbags reads (5 to 9 tested, sqlite3 and mcap) and any rate
(100 Hz to 1 kHz tested) are read alike; jittered stamps and dropped messages are kept as
they are here and put on a uniform grid by the estimator
(robot_dynamics.identification.arm.uniform_grid, linear interpolation).

The samples keep their time gaps: `JointStateRecording.segments` splits them where the time
step is much larger than the typical one (dropped samples, a paused recording), so that no
filter differentiates across a gap.
"""

import itertools
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

__all__ = ['BagError', 'JointStateRecording', 'JointStateBagWriter', 'read_joint_states',
           'write_joint_states', 'JOINT_STATE_TYPE', 'DEFAULT_TOPIC']

JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
DEFAULT_TOPIC = '/joint_states'
BAG_VERSION = 8          # rosbag2 metadata version that Jazzy's and Kilted's ros2 bag read
GAP_FACTOR = 5.0         # a time step this many times the median one splits the samples
FIELDS = ('position', 'velocity', 'effort')
MOVED = 0.05        # rad | m: a joint moving this far with a velocity that never changes
CHUNK = 100_000          # messages read and decoded together (bounds the memory they take)
LAYOUTS = 4              # layouts tried per message length before decoding one by one
BATCH_MIN = 8            # fewer messages of one length than this are decoded one by one


class BagError(ValueError):
    """A recording that cannot be used; the message is one line naming the folder."""


def _rosbags():
    """The rosbags modules used here, or a one-line BagError saying how to install them."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import get_typestore, Stores
    except ImportError:
        raise BagError('reading and writing bags needs the rosbags library: '
                       'pip install rosbags') from None
    return AnyReader, Writer, StoragePlugin, get_typestore, Stores


def _typestore():
    _, _, _, get_typestore, Stores = _rosbags()
    return get_typestore(Stores.ROS2_JAZZY)


@dataclass
class JointStateRecording:
    """Samples of the model's joints from one recording: t [s] (N,), q, qd, tau (N, n), in
    the order of `joints`; `notes` says what was skipped or dropped, and why."""

    source: str
    topic: str
    joints: tuple
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    time_source: str = 'header stamps'
    notes: list = field(default_factory=list)
    custom_data: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.t)

    @property
    def velocities(self):
        """False when the recording has no velocities (qd all NaN)."""
        return not (self.qd.size and bool(np.all(np.isnan(self.qd))))

    @property
    def duration(self):
        return float(self.t[-1] - self.t[0]) if len(self.t) else 0.0

    @property
    def sample_period(self):
        """The median time step [s] (nan with fewer than two samples)."""
        return float(np.median(np.diff(self.t))) if len(self.t) > 1 else math.nan

    def segments(self, gap_factor=GAP_FACTOR):
        """Index slices of the runs of samples without a gap (a time step larger than
        `gap_factor` times the median one)."""
        if len(self.t) < 2:
            return [slice(0, len(self.t))]
        steps = np.diff(self.t)
        cuts = np.flatnonzero(steps > gap_factor * np.median(steps)) + 1
        bounds = [0, *cuts.tolist(), len(self.t)]
        return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def split(self, fraction):
        """(first, last): the recording cut at `fraction` of its samples (e.g. 0.8 for an
        estimation part and a held-out validation part)."""
        k = int(round(fraction * len(self.t)))
        return (self._part(slice(0, k), f'first {fraction:.0%}'),
                self._part(slice(k, None), f'last {1.0 - fraction:.0%}'))

    def _part(self, index, what):
        return JointStateRecording(f'{self.source} ({what})', self.topic, self.joints,
                                   self.t[index], self.q[index], self.qd[index],
                                   self.tau[index], self.time_source, list(self.notes),
                                   dict(self.custom_data))

    def summary(self):
        """One line: source, samples, duration, rate."""
        rate = 1.0 / self.sample_period if len(self.t) > 1 and self.sample_period > 0 else 0
        return (f'{self.source}: {len(self.t)} samples of {len(self.joints)} joints on '
                f'{self.topic}, {self.duration:.3g} s at {rate:.4g} Hz ({self.time_source})')


def _seconds(stamp):
    return stamp.sec + stamp.nanosec * 1e-9


def read_joint_states(folder, joints, topic=None):
    """The samples of `joints` in the rosbag2 `folder` (a JointStateRecording); BagError
    with one line for anything that makes it unusable (see the module docstring)."""
    folder = os.fspath(folder)
    joints = tuple(joints)
    where = f'bag {folder}'
    if not os.path.exists(folder):
        raise BagError(f'{where}: no such folder')
    if not os.path.isdir(folder):
        raise BagError(f'{where}: not a folder (a rosbag2 recording is a folder with '
                       'metadata.yaml)')
    if not os.path.exists(os.path.join(folder, 'metadata.yaml')):
        raise BagError(f'{where}: no metadata.yaml: not a rosbag2 recording (ros2 bag '
                       'reindex can rebuild it)')
    AnyReader, _, _, _, _ = _rosbags()
    try:
        reader = AnyReader([Path(folder)], default_typestore=_typestore())
        reader.open()
    except Exception as error:  # noqa: B902 - rosbags raises several kinds; one line
        raise BagError(f'{where}: cannot be opened: {_one_line(error)}') from None
    try:
        connections = _joint_state_connections(reader, where, topic)
        groups, counts = _messages(reader, connections, joints, where)
    finally:
        reader.close()
    chosen = connections[0].topic
    recording = _recording(folder, chosen, joints, groups, counts, where)
    recording.custom_data = _custom_data(folder)
    return recording


def _custom_data(folder):
    """The bag's metadata custom_data (rosbag2 format 6 and later; {} without or when the
    metadata cannot be read as YAML: rosbags has read it already)."""
    try:
        with open(os.path.join(folder, 'metadata.yaml'), encoding='utf-8') as stream:
            metadata = yaml.safe_load(stream)
        custom = metadata['rosbag2_bagfile_information'].get('custom_data')
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in custom.items()} if isinstance(custom, dict) else {}


def _one_line(error):
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _joint_state_connections(reader, where, topic):
    states = [c for c in reader.connections if c.msgtype == JOINT_STATE_TYPE]
    topics = sorted({c.topic for c in states})
    if topic is not None:
        chosen = [c for c in states if c.topic == topic]
        if not chosen:
            others = sorted({c.topic for c in reader.connections})
            raise BagError(f'{where}: no {JOINT_STATE_TYPE} on {topic} (JointState topics: '
                           f'{topics or "none"}; all topics: {others or "none"})')
        return chosen
    if not states:
        others = sorted(f'{c.topic} ({c.msgtype})' for c in reader.connections)
        raise BagError(f'{where}: no {JOINT_STATE_TYPE} topic (topics: '
                       f'{", ".join(others) or "none"}); record one with '
                       '"ros2 bag record /joint_states"')
    if DEFAULT_TOPIC in topics:
        return [c for c in states if c.topic == DEFAULT_TOPIC]
    if len(topics) > 1:
        raise BagError(f'{where}: several JointState topics {topics} and no '
                       f'{DEFAULT_TOPIC}; choose one with --topic')
    return states


def _blocks(reader, connections, where):
    """The connections' messages as blocks of messages with one list of names and one size
    of each array: (names, sequence numbers (storage order), receive times [s], stamps [s],
    position, velocity, effort (N, size each)), read and decoded CHUNK messages at a time;
    a BagError names the first message, in storage order, that cannot be read."""
    known, number = {}, 0
    for times, raws in _chunks(reader, connections, where):
        sequence = np.arange(number, number + len(raws))
        received = np.array(times, dtype=np.int64) * 1e-9
        number += len(raws)
        for names, index, *fields in _decoded(reader, times, raws, known, where):
            yield (names, sequence[index], received[index], *fields)


def _decoded(reader, times, raws, known, where):
    """Blocks (names, indices, stamps, position, velocity, effort) of the raw messages:
    those of one length that share the layout of one of them read together (`_batched`),
    the others one by one (`_one_by_one`)."""
    alone = []
    for same in _by_length(raws):
        if same.size < BATCH_MIN or len(raws[same[0]]) < 16:    # few, or too short
            alone.extend(same.tolist())
            continue
        rows = np.frombuffer(b''.join([raws[i] for i in same.tolist()]), np.uint8)
        blocks, rest = _batched(rows.reshape(same.size, -1), known)
        for names, index, *fields in blocks:
            yield (names, same[index], *fields)
        alone.extend(same[rest].tolist())
    yield from _one_by_one(reader, sorted(alone), times, raws, known, where)


def _chunks(reader, connections, where):
    """(receive times [ns], raw messages) of the connections in storage order, up to CHUNK
    messages at a time; a storage file that cannot be read is a BagError, raised after
    the messages before the unreadable one."""
    iterator = iter(reader.messages(connections=connections))
    while True:
        times, raws = [], []
        try:
            for _, timestamp, raw in itertools.islice(iterator, CHUNK):
                times.append(timestamp)
                raws.append(raw)
        except Exception as error:  # noqa: B902 - a corrupt storage file
            failure = BagError(f'{where}: cannot be read: {_one_line(error)}')
        else:
            failure = None
        if raws:
            yield times, raws
        if failure is not None:
            raise failure from None
        if len(raws) < CHUNK:
            return


def _by_length(raws):
    """Index arrays (ascending) of the raw messages of each length."""
    lengths = np.fromiter(map(len, raws), np.int64, len(raws))
    order = np.argsort(lengths, kind='stable')
    return np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1)


def _batched(rows, known):
    """Blocks (names, row indices, stamps, position, velocity, effort) of the messages of
    one length (rows (N, length) of bytes) that share the layout of one of them (a first
    pending row's, up to LAYOUTS of them): the same CDR header, frame_id length, name
    bytes and array lengths, so that `_layout` reads each alike; and the indices of the
    other rows."""
    pending, blocks, rest = np.arange(len(rows)), [], []
    for _ in range(LAYOUTS):
        if not pending.size:
            break
        first = rows[pending[0]]
        layout = _layout(first.tobytes(), known)
        if layout is None:
            rest.append(pending[:1])
            pending = pending[1:]
            continue
        _, names, fixed, arrays = layout
        match = np.ones(pending.size, dtype=bool)
        for begin, end in fixed:
            match &= np.all(rows[pending, begin:end] == first[begin:end], axis=1)
        index = pending[match]
        sec = _numbers(rows, index, 4, '<i4')[:, 0].astype(np.float64)
        nanosec = _numbers(rows, index, 8, '<u4')[:, 0].astype(np.float64)
        blocks.append((names, index, sec + nanosec * 1e-9,
                       *(_numbers(rows, index, at, '<f8', count) for at, count in arrays)))
        pending = pending[~match]
    return blocks, np.concatenate([*rest, pending])


def _numbers(rows, index, at, dtype, count=1):
    """(len(index), count) numbers of `dtype` from byte `at` on of the rows at `index`."""
    return rows[:, at:at + np.dtype(dtype).itemsize * count].view(dtype)[index]


def _one_by_one(reader, indices, times, raws, known, where):
    """Blocks (names, indices, stamps, position, velocity, effort) of the raw messages at
    `indices` (ascending), each decoded on its own: `_decode`, else rosbags' decoder; a
    message that neither reads is a BagError naming its receive time."""
    lists = {}
    for i in indices:
        fields = _decode(raws[i], known)
        if fields is None:
            fields = _deserialized(reader, raws[i], times[i], where)
        stamp, names, *arrays = fields
        lists.setdefault((names, *map(len, arrays)), []).append((i, stamp, *arrays))
    for (names, *sizes), items in lists.items():
        index, stamps, *arrays = zip(*items)
        yield (names, np.array(index), np.array(stamps, dtype=float),
               *(np.array(a, dtype=float).reshape(len(items), size)
                 for a, size in zip(arrays, sizes)))


def _deserialized(reader, raw, timestamp, where):
    """(stamp [s], names, position, velocity, effort) by rosbags' decoder; a BagError
    naming the receive time [ns] if it cannot."""
    try:
        msg = reader.deserialize(raw, JOINT_STATE_TYPE)
    except Exception as error:  # noqa: B902 - a corrupt or foreign message
        raise BagError(f'{where}: a message received at {timestamp * 1e-9:.9f} s '
                       f'cannot be decoded as {JOINT_STATE_TYPE}: '
                       f'{_one_line(error)}') from None
    return (_seconds(msg.header.stamp), tuple(msg.name),
            *(np.asarray(getattr(msg, f), dtype=float) for f in FIELDS))


_UINT32 = struct.Struct('<I')
_HEADER = struct.Struct('<iII')


def _decode(raw, known=None):
    """(stamp [s], names, position, velocity, effort) of a little-endian CDR
    sensor_msgs/msg/JointState, read directly (several times faster than a general
    decoder); None for anything else or anything inconsistent (rosbags then decodes it
    or says what is wrong). `known`: see `_layout`."""
    layout = _layout(raw, known)
    if layout is None:
        return None
    stamp, names, _, arrays = layout
    return (stamp, names, *(np.frombuffer(raw, '<f8', count, at) for at, count in arrays))


def _layout(raw, known=None):
    """(stamp [s], names, fixed, arrays) of a little-endian CDR sensor_msgs/msg/JointState,
    None for anything else or anything inconsistent: `fixed` the (begin, end) spans of
    the bytes that set the layout (CDR header, frame_id length, names, array lengths),
    `arrays` the (offset, count) of the position, velocity and effort float64s; offsets
    in `raw` (its CDR payload, which aligns the fields, starts at byte 4). `known`
    ({start: {end: {bytes: names}}}, filled here) holds the name lists seen, looked up
    as bytes rather than decoded again."""
    try:
        if len(raw) < 16 or raw[0] != 0 or raw[1] != 1:       # CDR, little endian
            return None
        data = memoryview(raw)[4:]
        sec, nanosec, length = _HEADER.unpack_from(data, 0)
        at = (12 + length + 3) & ~3
        start = at
        for end, regions in (known or {}).get(start, {}).items():
            names = regions.get(bytes(data[start:end]))
            if names is not None:
                at = end
                break
        else:
            (count,) = _UINT32.unpack_from(data, at)
            at += 4
            names = []
            for _ in range(count):
                at = (at + 3) & ~3
                (length,) = _UINT32.unpack_from(data, at)
                if length == 0 or data[at + 3 + length] != 0:
                    return None
                names.append(bytes(data[at + 4:at + 3 + length]).decode('utf-8'))
                at += 4 + length
            names = tuple(names)
            if known is not None:
                known.setdefault(start, {}).setdefault(at, {})[bytes(data[start:at])] = names
        fixed, arrays = [(0, 2), (12, 16), (4 + start, 4 + at)], []
        for _ in FIELDS:
            at = (at + 3) & ~3
            (length,) = _UINT32.unpack_from(data, at)
            fixed.append((4 + at, 8 + at))
            at += 4
            if length:
                at = (at + 7) & ~7
            if at + 8 * length > len(data):
                return None
            arrays.append((4 + at, length))
            at += 8 * length
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None
    return sec + nanosec * 1e-9, names, fixed, arrays


class _Group:
    """The messages that name the same set of model joints (one publisher, as a rule):
    their stamps, receive times (N,) and values (N, 3, len(joints)) in the model's order."""

    def __init__(self, joints, sequence, stamps, received, rows):
        self.joints = joints
        if np.any(np.diff(sequence) < 0):                     # back in storage order
            order = np.argsort(sequence, kind='stable')
            stamps, received, rows = stamps[order], received[order], rows[order]
        self.stamps, self.received, self.rows = stamps, received, rows

    def __len__(self):
        return len(self.stamps)


class _Batch:
    """The messages with one list of names (in one order): blocks of (sequence numbers,
    stamps, receive times, values (N, 3, len(present)) of the model joints it names);
    `first` the sequence number of the first message with these names; `unmoving`: the
    blocks of messages without velocities (NaN there), used only when no message naming
    the same joints has them (`_without_velocities`)."""

    def __init__(self, present, order):
        self.present, self.order = present, order
        self.first = math.inf
        self.blocks = []
        self.unmoving = []


def _messages(reader, connections, joints, where):
    """{frozenset of model joints: _Group} of the usable messages, and the counts of
    skipped messages by reason."""
    batches, counts = _batches(_blocks(reader, connections, where), joints)
    _without_velocities(batches, counts)
    groups = _groups(batches)
    topic = connections[0].topic
    if counts['total'] == 0:
        raise BagError(f'{where}: no messages on {topic}')
    seen = set().union(*batches)
    absent = [j for j in joints if j not in seen]
    if absent:
        raise BagError(f'{where}: joints missing on {topic}: {absent} (it has '
                       f'{sorted(seen)}); give the model of the recorded arm, or record '
                       'every joint')
    covered = set().union(*groups) if groups else set()
    if covered != set(joints):
        lacking = max(FIELDS, key=lambda f: counts[f])
        uncovered = [j for j in joints if j not in covered]
        raise BagError(f'{where}: the messages on {topic} that name {uncovered} have no '
                       f'{lacking} ({counts[lacking]} of {counts["total"]} messages); '
                       'identification needs positions and efforts (record the '
                       "effort state interface, e.g. with ros2_control's "
                       'joint_state_broadcaster)')
    return groups, counts


def _batches(blocks, joints):
    """{names: _Batch} of the blocks of messages, and the counts of messages (total) and
    of skipped ones by reason (other joints only, a field of another size than names)."""
    batches = {}
    counts = {'other joints': 0, 'position': 0, 'velocity': 0, 'effort': 0, 'total': 0}
    for names, sequence, received, stamps, *values in blocks:
        counts['total'] += len(sequence)
        batch = batches.get(names)
        if batch is None:
            index = {name: i for i, name in enumerate(names)}
            present = tuple(j for j in joints if j in index)
            batch = batches[names] = _Batch(present, [index[j] for j in present])
        batch.first = min(batch.first, int(sequence.min()))
        if not batch.present:
            counts['other joints'] += len(sequence)
            continue
        short = [f for f, v in zip(FIELDS, values) if v.shape[1] != len(names)]
        if short == ['velocity'] and values[1].shape[1] == 0:
            values = (values[0], np.full(values[0].shape, np.nan), values[2])
            batch.unmoving.append((sequence, stamps, received,
                                   np.stack([v[:, batch.order] for v in values], axis=1)))
            continue
        if short:
            counts[short[0]] += len(sequence)
            continue
        batch.blocks.append((sequence, stamps, received,
                             np.stack([v[:, batch.order] for v in values], axis=1)))
    return batches, counts


def _without_velocities(batches, counts):
    """The messages without velocities: used (NaN velocities) where no message naming the
    same model joints has velocities, else skipped and counted."""
    complete = {frozenset(b.present) for b in batches.values() if b.blocks}
    for batch in batches.values():
        if not batch.unmoving:
            continue
        if frozenset(batch.present) in complete:
            counts['velocity'] += sum(len(block[0]) for block in batch.unmoving)
        else:
            batch.blocks += batch.unmoving
        batch.unmoving = []


def _groups(batches):
    """{frozenset of model joints: _Group} of the batches' usable messages; the joints
    in the order of the first batch, in storage order, that names them."""
    parts = {}
    for batch in sorted(batches.values(), key=lambda b: b.first):
        if batch.blocks:
            parts.setdefault(frozenset(batch.present), []).append(
                (batch.present, *(_joined(c) for c in zip(*batch.blocks))))
    groups = {}
    for key, items in parts.items():
        present = items[0][0]
        rows = [v if p == present else v[:, :, [p.index(j) for j in present]]
                for p, _, _, _, v in items]
        groups[key] = _Group(present, *(_joined([item[k] for item in items])
                                        for k in (1, 2, 3)), _joined(rows))
    return groups


def _joined(arrays):
    """The arrays concatenated (the only one as it is)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _times(group):
    """(times [s], what they are, [notes]) of a group of messages: the header stamps;
    where they are not set (zero after a set one, or all zero) the receive time (shifted
    by the median delay between stamp and receipt when some stamps are set); the receive
    times throughout where the stamps jump back by more than a gap (several clocks)."""
    stamps = np.asarray(group.stamps, dtype=float)
    received = np.asarray(group.received, dtype=float)
    set_ = stamps != 0.0
    if not np.any(set_) or np.all(stamps == stamps[0]):
        return received, 'receive times (the header stamps are not set)', []
    # a zero stamp before the first set one is simulated time starting at 0
    unset = ~set_ & (np.arange(stamps.size) > np.argmax(set_))
    steps = np.diff(stamps[~unset])
    arrivals = np.diff(received)
    arrivals = arrivals[arrivals > 0.0]
    typical = float(np.median(arrivals)) if arrivals.size else 0.0
    if np.any(steps < -GAP_FACTOR * typical):
        return received, 'receive times (the header stamps jump back: several clocks)', []
    if not np.any(unset):
        return stamps, 'header stamps', []
    delay = float(np.median(received[~unset] - stamps[~unset]))
    times = np.where(unset, received - delay, stamps)
    return times, 'header stamps', [f'{int(np.sum(unset))} messages without a header '
                                    'stamp: their receive time used (less the median delay '
                                    f'{delay * 1e3:.3g} ms)']


def _ordered(times, rows):
    """Times and rows sorted by time (stable: a message delivered late goes back to its
    place), with the count of messages that were out of order."""
    order = np.argsort(times, kind='stable')
    moved = int(np.sum(times < np.maximum.accumulate(times))) if times.size else 0
    return times[order], rows[order], moved


def _pair(t, times, rows, step):
    """rows (M, 3, m) at `times` interpolated to `t` (N,), where t lies between two
    messages at most GAP_FACTOR median steps apart (or on one): (values (N, 3, m), ok)."""
    right = np.searchsorted(times, t, side='left')
    exact = (right < times.size) & (times[np.minimum(right, times.size - 1)] == t)
    left = np.clip(right - 1, 0, times.size - 1)
    right = np.clip(right, 0, times.size - 1)
    span = times[right] - times[left]
    ok = exact | ((right > left) & (span <= GAP_FACTOR * step) & (times[left] <= t)
                  & (t <= times[right]))
    weight = np.where(span > 0.0, (t - times[left]) / np.where(span > 0.0, span, 1.0), 0.0)
    weight = np.where(exact, 0.0, weight)
    left = np.where(exact, right, left)
    values = rows[left] + weight[:, None, None] * (rows[right] - rows[left])
    return values, ok


def _recording(folder, topic, joints, groups, counts, where):
    """The merged, ordered, cleaned samples of the groups of messages."""
    notes = []
    used = _cover(groups, joints)
    skipped = sum(len(g) for key, g in groups.items() if key not in used)
    if skipped:
        notes.append(f'{skipped} of {counts["total"]} messages skipped: they name only some '
                     'of the model joints')
    for reason, what in (('position', 'have no positions'), ('velocity', 'have no velocities'),
                         ('effort', 'have no efforts')):
        if counts[reason]:
            notes.append(f'{counts[reason]} of {counts["total"]} messages skipped: they '
                         f'{what}')
    series = []
    sources = set()
    for key in used:
        group = groups[key]
        times, source, more = _times(group)
        notes += more
        sources.add(source)
        series.append([group, times])
    if len(sources) > 1:            # the publishers' stamps cannot be compared: bag time
        for item in series:
            item[1] = np.asarray(item[0].received, dtype=float)
        sources = {'receive times (the publishers\' header stamps differ in kind)'}
    time_source = sources.pop()
    first, *others = series
    t, data, moved = _ordered(first[1], first[0].rows)
    for group, times in others:
        gt, grows, more_moved = _ordered(times, group.rows)
        moved += more_moved
        gt, grows = _unique(gt, grows)
        positive = np.diff(gt)
        step = float(np.median(positive)) if positive.size else 0.0
        values, ok = _pair(t, gt, grows, step)
        if not np.all(ok):
            notes.append(f'{int(np.sum(~ok))} samples dropped: no message naming '
                         f'{list(group.joints)} close in time')
        data = np.concatenate([data, values], axis=2)[ok]
        t = t[ok]
    if len(series) > 1:
        names = ' + '.join(str(list(g.joints)) for g, _ in series)
        notes.append(f'merged {len(series)} publishers by joint name ({names}), paired by '
                     'time')
    if moved:
        notes.append(f'{moved} messages out of order: put in order of their time')
    order = [j for g, _ in series for j in g.joints]
    data = data[:, :, [order.index(j) for j in joints]]
    unmoving = np.all(np.isnan(data[:, 1]), axis=0) if len(t) else np.zeros(len(joints), bool)
    if np.any(unmoving):
        without = [j for j, u in zip(joints, unmoving) if u]
        notes.append(f'no velocities in the messages naming {without}: every joint\'s '
                     'velocity is left to the estimator (from the positions)')
        data[:, 1] = np.nan
    elif len(t):
        note = _unmeasured_velocities(joints, data)
        if note:
            notes.append(note)
            data[:, 1] = np.nan
            unmoving[:] = True
    if t.size == 0:
        raise BagError(f'{where}: the publishers on {topic} never overlap in time (no '
                       'message of one lies between two close messages of the other): no '
                       'sample has every joint; record every joint at a steady rate')
    for field, index, what in (('efforts', 2, 'the robot publishes no effort: e.g. a '
                                'joint_state_broadcaster without an effort state interface'),
                               ('positions', 0, 'the robot publishes no position')):
        missing = [j for j, gone in zip(joints, np.all(~np.isfinite(data[:, index]), axis=0))
                   if gone]
        if missing:
            raise BagError(f'{where}: {field} missing (NaN in every sample: {what}) for '
                           f'{missing}; identification needs the joint efforts the drives '
                           'apply (export the effort state interface)'
                           if index == 2 else
                           f'{where}: {field} missing (NaN in every sample: {what}) for '
                           f'{missing}')
    finite = np.all(np.isfinite(data[:, [0, 2]]), axis=(1, 2)) & (
        np.all(np.isfinite(data[:, 1]), axis=1) | np.any(unmoving))
    if not np.all(finite):
        notes.append(f'{int(np.sum(~finite))} samples dropped: non-finite values')
        t, data = t[finite], data[finite]
    if len(t) == 0:
        raise BagError(f'{where}: every sample on {topic} has a non-finite value')
    fresh = np.concatenate(([True], np.diff(t) > 0.0))
    if not np.all(fresh):
        notes.append(f'{int(np.sum(~fresh))} samples dropped: the same time as the one '
                     'before')
        t, data = t[fresh], data[fresh]
    return JointStateRecording(folder, topic, joints, t, data[:, 0].copy(), data[:, 1].copy(),
                               data[:, 2].copy(), time_source, notes)


def _unmeasured_velocities(joints, data):
    """A note when the velocities were not measured: a joint whose recorded velocity never
    changes (0, as mock hardware publishes it) while its position moves by more than
    MOVED; else ''."""
    with np.errstate(invalid='ignore'):
        finite = np.isfinite(data[:, 1]) & np.isfinite(data[:, 0])
        flat = []
        for j, name in enumerate(joints):
            rows = finite[:, j]
            if not np.any(rows):
                continue
            travel = float(np.ptp(data[rows, 0, j]))
            if travel > MOVED and float(np.ptp(data[rows, 1, j])) == 0.0:
                flat.append(f'{name} ({float(data[rows, 1, j][0]):g} while its position '
                            f'moves by {travel:.3g})')
    if not flat:
        return ''
    return ('velocities not measured: the recorded velocity of ' + ', '.join(flat)
            + ' never changes (e.g. mock hardware, which does not integrate the command): '
            'every joint\'s velocity is taken from the positions, as for a recording '
            'without velocities')


def _unique(t, rows):
    fresh = np.concatenate(([True], np.diff(t) > 0.0))
    return t[fresh], rows[fresh]


def _cover(groups, joints):
    """The keys of the groups whose messages are used: the group naming every model joint
    with the most messages; else, greedily, the groups that add the most joints (ties: the
    most messages), the first of them the time base."""
    wanted = frozenset(joints)
    full = [key for key in groups if key == wanted]
    if full:
        return full
    used, covered = [], frozenset()
    while covered != wanted:
        key = max((k for k in groups if k - covered),
                  key=lambda k: (len(k - covered), len(groups[k])))
        used.append(key)
        covered |= key
    return used


class JointStateBagWriter:
    """A rosbag2 folder with one sensor_msgs/msg/JointState topic, written message by
    message: `write(t, names, position, velocity, effort)` (stamp and receive time t [s]),
    or `write_serialized(receive_time, data)` for a message already in CDR (e.g. from an
    rclpy subscription with raw=True). Use as a context manager, or call close().
    `custom_data` ({str: str}) goes into the metadata's custom_data (format 6 and later);
    `version`: the bag format, 8 (default: Jazzy and later read it) or 9."""

    def __init__(self, folder, topic=DEFAULT_TOPIC, storage='sqlite3', custom_data=None,
                 version=BAG_VERSION):
        _, Writer, StoragePlugin, _, _ = _rosbags()
        plugins = {'sqlite3': StoragePlugin.SQLITE3, 'mcap': StoragePlugin.MCAP}
        if storage not in plugins:
            raise ValueError(f'storage: {storage!r} is not one of {", ".join(plugins)}')
        folder = os.fspath(folder)
        if os.path.exists(folder):
            raise BagError(f'bag {folder}: exists already; give a new folder name')
        self.folder = folder
        self.typestore = _typestore()
        self._types = self.typestore.types
        if version not in (8, 9):
            raise ValueError(f'version: rosbags writes bag format 8 or 9, not {version!r}')
        self._writer = Writer(folder, version=version, storage_plugin=plugins[storage])
        for key, value in (custom_data or {}).items():
            self._writer.set_custom_data(str(key), str(value))
        self._writer.open()
        self._connection = self._writer.add_connection(topic, JOINT_STATE_TYPE,
                                                       typestore=self.typestore)
        self.count = 0

    def message(self, stamp, names, position=(), velocity=(), effort=()):
        """A rosbags JointState message (stamp [s])."""
        t = self._types
        sec = math.floor(stamp)
        nanosec = min(int(round((stamp - sec) * 1e9)), 999_999_999)
        header = t['std_msgs/msg/Header'](
            stamp=t['builtin_interfaces/msg/Time'](sec=int(sec), nanosec=nanosec),
            frame_id='')
        return t[JOINT_STATE_TYPE](header=header, name=list(names),
                                   position=np.ascontiguousarray(position, dtype=float),
                                   velocity=np.ascontiguousarray(velocity, dtype=float),
                                   effort=np.ascontiguousarray(effort, dtype=float))

    def write(self, t, names, position=(), velocity=(), effort=(), received=None):
        """One message stamped `t` [s], received at `received` (default `t`)."""
        data = self.typestore.serialize_cdr(self.message(t, names, position, velocity, effort),
                                            JOINT_STATE_TYPE)
        self.write_serialized(t if received is None else received, data)

    def write_serialized(self, received, data):
        """One CDR-serialised JointState, received at `received` [s]."""
        self._writer.write(self._connection, int(round(received * 1e9)), bytes(data))
        self.count += 1

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_joint_states(folder, joints, t, q, qd, tau, topic=DEFAULT_TOPIC, storage='sqlite3'):
    """A rosbag2 folder with one JointState message per sample (t [s], q, qd, tau (N, n))."""
    t = np.asarray(t, dtype=float)
    with JointStateBagWriter(folder, topic, storage) as writer:
        for k in range(len(t)):
            writer.write(float(t[k]), joints, q[k], qd[k], tau[k])
    return folder
