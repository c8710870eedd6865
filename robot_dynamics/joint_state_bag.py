"""sensor_msgs/JointState recordings in rosbag2 folders, read and written without ROS.

`read_joint_states(folder, joints)` returns the positions, velocities and efforts of the
named joints from a rosbag2 folder (sqlite3 or mcap storage), e.g. one made on any robot
with ``ros2 bag record /joint_states``; `JointStateBagWriter` and `write_joint_states`
make one that ``ros2 bag`` reads (Jazzy and later: bag format version 8, the standard type
name ``sensor_msgs/msg/JointState``, CDR serialisation). Both use the `rosbags` library
(pure Python, ``pip install rosbags``), imported where used.

Reading rules (each refusal is a `BagError` with one line that names the folder):

* the topic: ``--topic`` if given, else ``/joint_states``, else the only JointState topic;
* joints are mapped by name; joints that are not in the model are ignored; a message that
  names none of the model's joints (e.g. a gripper's) is skipped; one that names some but
  not all of them is skipped and counted;
* a message must carry positions, velocities and efforts for its names: a recording whose
  messages lack one of them is refused, naming the field; a few such messages among
  complete ones are skipped and counted;
* a sample with a non-finite value (NaN, inf) in a model joint is dropped and counted;
* time is the header stamp; when the stamps are all zero (not set) or go backwards (some
  set, some not; several clocks), the bag's receive time is used for the whole recording
  (`time_source` says which);
* samples with the same time as the previous one (a republished state) are dropped.

The samples keep their time gaps: `JointStateRecording.segments` splits them where the time
step is much larger than the typical one (dropped samples, a paused recording), so that no
filter differentiates across a gap.
"""

import math
import os
from dataclasses import dataclass, field

import numpy as np

__all__ = ['BagError', 'JointStateRecording', 'JointStateBagWriter', 'read_joint_states',
           'write_joint_states', 'JOINT_STATE_TYPE', 'DEFAULT_TOPIC']

JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
DEFAULT_TOPIC = '/joint_states'
BAG_VERSION = 8          # rosbag2 metadata version that Jazzy's and Kilted's ros2 bag read
GAP_FACTOR = 5.0         # a time step this many times the median one splits the samples
FIELDS = ('position', 'velocity', 'effort')


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

    def __len__(self):
        return len(self.t)

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
                                   self.tau[index], self.time_source, list(self.notes))

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
    from pathlib import Path
    try:
        reader = AnyReader([Path(folder)], default_typestore=_typestore())
        reader.open()
    except Exception as error:  # noqa: B902 - rosbags raises several kinds; one line
        raise BagError(f'{where}: cannot be opened: {_one_line(error)}') from None
    try:
        connections = _joint_state_connections(reader, where, topic)
        rows, stamps, received, counts = _rows(reader, connections, joints, where)
    except BagError:
        raise
    except Exception as error:  # noqa: B902 - a corrupt message or storage file
        raise BagError(f'{where}: cannot be read: {_one_line(error)}') from None
    finally:
        reader.close()
    chosen = connections[0].topic
    return _recording(folder, chosen, joints, rows, stamps, received, counts, where)


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


def _rows(reader, connections, joints, where):
    """Per usable message: [q, qd, tau] (3, n); with header stamps, receive times, and the
    counts of skipped messages by reason."""
    n = len(joints)
    wanted = set(joints)
    rows, stamps, received = [], [], []
    counts = {'other joints': 0, 'partial': 0, 'position': 0, 'velocity': 0, 'effort': 0,
              'total': 0}
    seen = set()
    for connection, timestamp, raw in reader.messages(connections=connections):
        msg = reader.deserialize(raw, connection.msgtype)
        counts['total'] += 1
        names = list(msg.name)
        seen.update(names)
        index = {name: i for i, name in enumerate(names)}
        if not wanted.intersection(index):
            counts['other joints'] += 1
            continue
        if not wanted.issubset(index):
            counts['partial'] += 1
            continue
        missing = next((f for f in FIELDS if len(getattr(msg, f)) != len(names)), None)
        if missing is not None:
            counts[missing] += 1
            continue
        order = [index[j] for j in joints]
        rows.append(np.array([np.asarray(getattr(msg, f), dtype=float)[order]
                              for f in FIELDS]).reshape(3, n))
        stamps.append(_seconds(msg.header.stamp))
        received.append(timestamp * 1e-9)
    if counts['total'] == 0:
        raise BagError(f'{where}: no messages on {connections[0].topic}')
    if not rows:
        absent = [j for j in joints if j not in seen]
        if absent:
            raise BagError(f'{where}: joints missing on {connections[0].topic}: {absent} '
                           f'(it has {sorted(seen)})')
        lacking = max(FIELDS, key=lambda f: counts[f])
        if counts[lacking]:
            raise BagError(f'{where}: the messages on {connections[0].topic} have no '
                           f'{lacking} for their joints ({counts[lacking]} of '
                           f'{counts["total"]}); identification needs position, velocity '
                           'and effort (record the effort state interface, e.g. with '
                           "ros2_control's joint_state_broadcaster)")
        raise BagError(f'{where}: no message on {connections[0].topic} names all of '
                       f'{list(joints)} ({counts["partial"]} name only some)')
    return rows, np.array(stamps), np.array(received), counts


def _recording(folder, topic, joints, rows, stamps, received, counts, where):
    data = np.stack(rows)                                   # (N, 3, n)
    notes = []
    for reason, what in (('partial', 'name only some of the model joints'),
                         ('position', 'have no positions'), ('velocity', 'have no velocities'),
                         ('effort', 'have no efforts')):
        if counts[reason]:
            notes.append(f'{counts[reason]} of {counts["total"]} messages skipped: they '
                         f'{what}')
    time_source = 'header stamps'
    t = stamps
    if np.all(stamps == 0.0) or np.any(np.diff(stamps) < 0.0):
        t, time_source = received, 'receive times (the header stamps are zero or go back)'
    order = np.argsort(t, kind='stable')
    t, data = t[order], data[order]
    finite = np.all(np.isfinite(data), axis=(1, 2))
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


class JointStateBagWriter:
    """A rosbag2 folder with one sensor_msgs/msg/JointState topic, written message by
    message: `write(t, names, position, velocity, effort)` (stamp and receive time t [s]),
    or `write_serialized(receive_time, data)` for a message already in CDR (e.g. from an
    rclpy subscription with raw=True). Use as a context manager, or call close()."""

    def __init__(self, folder, topic=DEFAULT_TOPIC, storage='sqlite3'):
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
        self._writer = Writer(folder, version=BAG_VERSION, storage_plugin=plugins[storage])
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
                                   position=np.asarray(position, dtype=float),
                                   velocity=np.asarray(velocity, dtype=float),
                                   effort=np.asarray(effort, dtype=float))

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
