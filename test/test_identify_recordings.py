"""Recordings as robots produce them, written as real rosbag2 folders with rosbags and read
and prepared as `identify estimate` does: jittered stamps (up to ±40 % of the period),
dropped messages and pauses, duplicated and late messages, header stamps missing (all or
some), several publishers on one topic naming some joints each (and a gripper's), joints
in any order, rates from 100 Hz to 1 kHz, sqlite3 and MCAP, bag format versions 5 to 9.
Each recording is used — its samples are where the motion was at their time, and the
prepared data keep the motion's own relations — or refused with one line; never another
exception. A few run end to end through `identify estimate` in a child process."""

import math
import os
import sqlite3
import subprocess
import sys
import warnings

import numpy as np
import pytest
import yaml

pytest.importorskip('rosbags')
pytest.importorskip('scipy')
from hypothesis import (example, given, HealthCheck, Phase, settings,  # noqa: E402
                        strategies as st)

from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics.identification.recordings import (BagError, JointStateBagWriter,
                                                      read_joint_states)
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.nodes.identify import pieces  # noqa: E402
from test_identify_cli import estimate_in_a_child  # noqa: E402, I100

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUMA = os.path.join(REPO, 'config', 'puma560.yaml')
JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
GUARD = 300.0          # s: a hang guard for the child processes, not a timing assertion
AMPLITUDE = np.array([0.5, 0.4, 0.3, 0.6, 0.5, 0.7])
OMEGA = 2.0 * math.pi * np.array([0.4, 0.55, 0.7, 0.85, 1.0, 1.15])     # rad/s
PHASE = np.array([0.1, 0.7, 1.3, 1.9, 2.5, 3.1])
LATENCY = 3e-4         # s from stamp to receipt
CUTOFF = 10.0


def motion(t):
    """q, qd, tau (N, 6) of one sinusoid per joint at times t; tau = 3 q + 0.5 qd + 1."""
    t = np.asarray(t, dtype=float)[:, None]
    q = AMPLITUDE * np.sin(OMEGA * t + PHASE)
    qd = AMPLITUDE * OMEGA * np.cos(OMEGA * t + PHASE)
    return q, qd, 3.0 * q + 0.5 * qd + 1.0


def puma():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return RobotModel.from_yaml(PUMA)


def downgrade(folder, version):
    """Make a format-8 bag (what rosbags writes) one of format 5, 6 or 7, as the ROS
    distributions of those formats write them: the metadata keys of that version only and,
    for sqlite3 before format 7 (Humble), the database schema 3 (no message definitions,
    no type hashes)."""
    path = os.path.join(folder, 'metadata.yaml')
    with open(path, encoding='utf-8') as stream:
        metadata = yaml.safe_load(stream)
    info = metadata['rosbag2_bagfile_information']
    info['version'] = version
    if version < 8:
        info.pop('ros_distro', None)
    if version < 7:
        for topic in info['topics_with_message_count']:
            topic['topic_metadata'].pop('type_description_hash', None)
    if version < 6:
        info.pop('custom_data', None)
    with open(path, 'w', encoding='utf-8') as stream:
        yaml.safe_dump(metadata, stream)
    if info['storage_identifier'] == 'sqlite3' and version < 7:
        database = sqlite3.connect(os.path.join(folder, info['relative_file_paths'][0]))
        with database:
            database.execute('DROP TABLE message_definitions')
            database.execute('ALTER TABLE topics DROP COLUMN type_description_hash')
            database.execute('UPDATE schema SET schema_version = 3')
        database.close()


def stamps_of(rng, rate, duration, jitter, drop, gap):
    """True sample times: a period 1/rate, each time moved by up to ±jitter periods, a
    fraction `drop` of them lost, and with `gap` a 0.5 s pause in the middle."""
    period = 1.0 / rate
    count = int(duration * rate)
    t = 50.0 + period * (np.arange(count) + rng.uniform(-jitter, jitter, count))
    if gap:
        t[count // 2:] += 0.5
    keep = rng.random(count) >= drop
    keep[[0, -1]] = True
    return t[keep]


def write_recording(folder, kind, seed=0):
    """A bag of the motion as `kind` says (a dict, see `kinds`); returns the true times
    of the primary publisher's messages."""
    rng = np.random.default_rng(seed)
    rate = kind['rate']
    t = stamps_of(rng, rate, kind['duration'], kind['jitter'], kind['drop'], kind['gap'])
    publishers = [(JOINTS, t)]
    if kind['split']:                       # the wrist on its own publisher, own rate
        rate2 = rate * kind['split']
        t2 = stamps_of(rng, rate2, kind['duration'] + 0.1, kind['jitter'], kind['drop'],
                       kind['gap']) - 0.05
        publishers = [(JOINTS[:4], t), (JOINTS[4:], t2)]
    messages = []                           # (receive time, stamp, names, q, qd, tau)
    for names, times in publishers:
        index = [JOINTS.index(j) for j in names]
        q, qd, tau = motion(times)
        for k, time_ in enumerate(times):
            order = rng.permutation(len(names)) if kind['shuffle'] else np.arange(len(names))
            received = time_ + LATENCY + rng.uniform(0.0, 2e-5)
            if rng.random() < kind['late']:
                received += 3.0 / rate      # delivered after later messages
            stamp = time_
            if kind['stamps'] == 'zero' or (kind['stamps'] == 'some zero' and k > 0
                                            and rng.random() < 0.1):
                stamp = 0.0
            columns = [index[i] for i in order]
            messages.append((received, stamp, [names[i] for i in order], q[k, columns],
                             qd[k, columns], tau[k, columns]))
            if rng.random() < kind['duplicate']:
                messages.append((received + 1e-6, stamp, [names[i] for i in order],
                                 q[k, columns], qd[k, columns], tau[k, columns]))
    if kind['gripper']:
        for time_ in np.arange(t[0], t[-1], 0.02):
            messages.append((time_ + LATENCY, time_, ['gripper_left', 'gripper_right'],
                             [0.01, 0.01], [0.0, 0.0], [2.0, 2.0]))
    messages.sort(key=lambda m: m[0])
    version = kind['version']
    with JointStateBagWriter(folder, storage=kind['storage'], version=max(version, 8),
                             custom_data={'recorded_by': 'the tests'}) as writer:
        for received, stamp, names, q, qd, tau in messages:
            writer.write(stamp, names, q, qd, tau, received=received)
    if version < 8:
        downgrade(folder, version)
    return t


def kinds():
    return st.fixed_dictionaries({
        'rate': st.sampled_from([100.0, 125.0, 200.0, 250.0, 500.0, 1000.0]),
        'duration': st.just(1.5),
        'jitter': st.sampled_from([0.0, 0.1, 0.4]),
        'drop': st.sampled_from([0.0, 0.01, 0.05]),
        'gap': st.booleans(),
        'duplicate': st.sampled_from([0.0, 0.02]),
        'late': st.sampled_from([0.0, 0.02]),
        'stamps': st.sampled_from(['set', 'zero', 'some zero']),
        'split': st.sampled_from([None, 1.0, 0.5]),
        'gripper': st.booleans(),
        'shuffle': st.booleans(),
        'storage': st.sampled_from(['sqlite3', 'mcap']),
        'version': st.sampled_from([5, 6, 7, 8, 9]),
    })


BASE = dict(rate=1000.0, duration=1.5, jitter=0.4, drop=0.0, gap=False, duplicate=0.0,
            late=0.0, stamps='set', split=None, gripper=False, shuffle=False,
            storage='sqlite3', version=8)


def check_recording(kind, folder, true_t, model):
    """Used (samples at the motion's values for their time; prepared data that keep the
    motion's relations) or refused in one line."""
    try:
        recording = read_joint_states(folder, JOINTS)
    except BagError as error:
        assert '\n' not in str(error) and str(error).startswith(f'bag {folder}: ')
        return 'refused'
    assert np.all(np.diff(recording.t) > 0.0) and np.all(np.isfinite(recording.q))
    if kind['version'] >= 6:
        assert recording.custom_data == {'recorded_by': 'the tests'}
    if kind['stamps'] == 'set':
        assert recording.time_source == 'header stamps'
        q, qd, tau = motion(recording.t)
        # exact for the time base's joints (stamps in nanoseconds); interpolated (over at
        # most 5 steps of the other publisher) for the others
        step = 5.0 / (kind['rate'] * (kind['split'] or 1.0))
        tolerance = 1e-8 + (AMPLITUDE * OMEGA ** 2 * step ** 2 / 8.0 if kind['split'] else 0)
        assert np.all(np.abs(recording.q - q) <= tolerance)
        assert np.all(np.abs(recording.tau - tau) <= 4.0 * tolerance * (1 + OMEGA))
    elif kind['stamps'] == 'zero':
        assert recording.time_source.startswith('receive times')
    if not kind['late'] and not kind['duplicate'] and kind['stamps'] == 'set':
        assert len(recording) >= (0.98 if kind['split'] else 1.0) * true_t.size - 2
    try:
        data = ai._prepare(model, *zip(*pieces([recording])), CUTOFF, 100.0, 0.0)
    except ai.RecordingError as error:
        assert '\n' not in str(error) and 'long enough' in str(error)
        return 'too short'
    # the filter is linear and zero-phase: tau = 3 q + 0.5 qd + 1 holds on the prepared
    # data, and q'' = -w² q for each joint's sinusoid (the grid's times are right)
    np.testing.assert_allclose(data.tau, 3.0 * data.q + 0.5 * data.qd + 1.0, atol=2e-3)
    # (without a stamp, a message delivered late has only its receive time: not checked)
    if kind['stamps'] == 'set' or not kind['late']:
        relative = np.max(np.abs(data.qdd + OMEGA ** 2 * data.q) / (AMPLITUDE * OMEGA ** 2),
                          axis=0)
        limit = np.full(len(JOINTS), 0.03)
        if kind['split']:
            # the wrist's joints are interpolated between its own publisher's samples, at
            # most 5 of its steps apart: the secant slope of q̇ over a step h is off the
            # derivative by up to ω h / 2 of q̈'s amplitude (before the filter)
            limit[4:] += OMEGA[4:] * 5.0 / (kind['rate'] * kind['split']) / 2.0
        assert np.all(relative < limit), (relative, limit)
    return 'used'


@pytest.fixture(scope='module')
def model():
    return puma()


@settings(max_examples=15, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kind=kinds(), seed=st.integers(0, 2 ** 16))
@example(kind=BASE, seed=0)                                   # the reported 1 kHz jitter
@example(kind=dict(BASE, jitter=0.0), seed=0)                 # uniform 1 ms stamps
@example(kind=dict(BASE, rate=100.0, split=0.5, gripper=True, shuffle=True, storage='mcap',
                   version=5), seed=1)
@example(kind=dict(BASE, stamps='some zero', late=0.02, duplicate=0.02, drop=0.05,
                   version=6), seed=2)
@example(kind=dict(BASE, stamps='zero', gap=True, storage='mcap', version=7), seed=3)
@example(kind=dict(BASE, rate=250.0, split=1.0, jitter=0.4, version=9), seed=4)
@example(kind=dict(BASE, rate=100.0, jitter=0.0, drop=0.05, gap=True, duplicate=0.02,
                   late=0.02, split=0.5, gripper=True, version=6), seed=316)   # a 50 Hz wrist
def test_every_recording_is_used_or_refused_in_one_line(tmp_path_factory, model, kind, seed):
    folder = tmp_path_factory.mktemp('bag') / 'bag'
    true_t = write_recording(folder, kind, seed)
    outcome = check_recording(kind, folder, true_t, model)
    # 0.75 s or more without a gap at 100 Hz or faster: always long enough to be used
    assert outcome == 'used', (kind, outcome)


@settings(max_examples=60, deadline=None)
@given(start=st.floats(0.0, 1e6), step=st.floats(1e-3, 1e-2), count=st.integers(2, 3000),
       jitter=st.floats(0.0, 0.4), seed=st.integers(0, 1000))
def test_the_uniform_grid_has_one_length_whatever_the_stamps(start, step, count, jitter,
                                                            seed):
    """Stamps as a logger writes them (rounded to nanoseconds, jittered): the grid may
    come out a sample longer or shorter than the recording; every array follows it."""
    rng = np.random.default_rng(seed)
    t = start + step * (np.arange(count) + rng.uniform(-jitter, jitter, count))
    t = np.round(t * 1e9) * 1e-9
    t = np.unique(t)
    if t.size < 2:
        return
    values = np.column_stack([t - t[0], np.sin(t - t[0])])
    grid_step, (resampled,) = ai.uniform_grid(t, (values,))
    grid = t[0] + grid_step * np.arange(resampled.shape[0])
    assert grid[-1] <= t[-1] + 1e-6 * grid_step and abs(resampled.shape[0] - t.size) <= \
        max(2, 2 * jitter * t.size)
    # the values at the grid's times (stamps within 0.1 % of a step of the grid are kept)
    np.testing.assert_allclose(resampled[:, 0], grid - t[0],
                               atol=1e-3 * grid_step + 1e-9 * max(1.0, start))


def test_uniform_millisecond_stamps_one_sample_short_of_the_grid_are_prepared(model):
    """The reported case: 14001 stamps 1 ms apart whose median step comes out a hair
    short of 1 ms, so that the grid holds 14002 samples."""
    t = 1000.0 + 1e-3 * np.arange(14001)
    t[1::2] -= 1e-9                          # nanosecond rounding of half the stamps
    step, _ = ai.uniform_grid(t, ())
    assert int(math.floor((t[-1] - t[0]) / step + 1e-9)) + 1 != t.size   # the trap
    q, qd, tau = motion(t)
    data = ai._prepare(model, t, q, qd, tau, CUTOFF, 100.0, 0.0)
    assert data.q.shape[1] == 6 and data.q.shape[0] > 1000


def test_repeated_stamps_do_not_set_the_rate_of_the_uncertainty(model):
    """Half of a 200 Hz recording logged four times (stamps repeated): the estimate drops
    the repeats, and its uncertainty is that of the clean recording (the noise spectrum at
    the recording's real rate, not at the 1 GHz of a zero median step, whose 10^7 aliases
    would take hours)."""
    t = 10.0 + np.arange(0.0, 20.0, 0.005)
    q, qd, tau = motion(t)
    clean = ai.identify_arm(model, t, q, qd, tau, constrained=False)
    half = t.size // 2
    index = np.concatenate([np.repeat(np.arange(half), 4), np.arange(half, t.size)])
    assert np.median(np.diff(t[index])) == 0.0
    logged = ai.identify_arm(model, t[index], q[index], qd[index], tau[index],
                             constrained=False)
    np.testing.assert_allclose(logged.uncertainty.inflation, clean.uncertainty.inflation,
                               rtol=1e-12)


def test_a_recording_with_only_short_runs_is_refused_naming_the_longest(model, tmp_path):
    t = 10.0 + np.arange(0.0, 3.0, 0.01)
    t = np.concatenate([t[i:i + 30] + 0.5 * (i // 30) for i in range(0, t.size, 30)])
    with pytest.raises(ai.RecordingError) as refused:
        ai._prepare(model, t, *motion(t), CUTOFF, 100.0, 0.0)
    text = str(refused.value)
    assert '\n' not in text and 'longest run without a gap is 0.29 s' in text
    assert 'record a longer motion' in text


def test_publishers_that_never_overlap_are_refused_in_one_line(tmp_path):
    t = 10.0 + np.arange(200) * 0.01
    q, qd, tau = motion(t)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(100):
            writer.write(t[k], JOINTS[:3], q[k, :3], qd[k, :3], tau[k, :3])
        for k in range(150, 200):
            writer.write(t[k], JOINTS[3:], q[k, 3:], qd[k, 3:], tau[k, 3:])
    with pytest.raises(BagError) as refused:
        read_joint_states(tmp_path / 'bag', JOINTS)
    assert 'never overlap in time' in str(refused.value) and '\n' not in str(refused.value)


def test_stamps_from_two_clocks_fall_back_to_the_receive_time(tmp_path):
    """Messages stamped alternately by a simulated clock near 0 and a wall clock: the
    stamps jump back by far more than a gap; the bag's receive times are used."""
    t = 1000.0 + np.arange(300) * 0.01
    q, qd, tau = motion(t)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            writer.write(t[k] - (990.0 if k % 2 else 0.0), JOINTS, q[k], qd[k], tau[k],
                         received=t[k])
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    assert 'several clocks' in recording.time_source
    np.testing.assert_allclose(recording.t, t, atol=1e-9)


def test_late_messages_are_put_back_in_their_place(tmp_path):
    t = 10.0 + np.arange(100) * 0.01
    q, qd, tau = motion(t)
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k in range(len(t)):
            late = 0.035 if k in (20, 50) else 0.0
            writer.write(t[k], JOINTS, q[k], qd[k], tau[k], received=t[k] + 1e-4 + late)
    recording = read_joint_states(tmp_path / 'bag', JOINTS)
    np.testing.assert_allclose(recording.t, t, rtol=0, atol=1e-9)      # stamps in ns
    np.testing.assert_array_equal(recording.q, q)
    assert '2 messages out of order: put in order of their time' in recording.notes


# ---------------------------------------------------------------------- end to end


PANDA = os.path.join(REPO, 'config', 'panda.yaml')
PANDA_Q0 = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])


def excitation_bag(folder, kind, seed=0):
    """A bag of the robot file's arm as it is (links ±30 % off the file, drives it lacks)
    moving along an optimised excitation, efforts from its inverse dynamics at each stamp
    (what a measured effort is), written as `kind` says (kind['robot']: the PUMA 560 or
    the 7-joint Panda)."""
    path = kind.get('robot', PUMA)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        prior = RobotModel.from_yaml(path)
    from robot_dynamics.nodes.identify import prior_model
    joints = prior_model([path])[1]
    q0 = PANDA_Q0 if path == PANDA else np.array([0, -0.5, 0.5, 0, 0.3, 0])
    plant = ai.perturbed_model(prior, 0.3, seed=1, **ai.drive_terms(prior))
    excitation = ai.optimal_excitation(prior, kind['duration'], q0, seed=seed, candidates=2,
                                       iterations=0)
    from robot_dynamics import dynamics
    rng = np.random.default_rng(seed)
    t = stamps_of(rng, kind['rate'], kind['duration'], kind['jitter'], kind['drop'], False)
    q, qd, qdd = excitation.sample(t - t[0])
    tau = dynamics.inverse_dynamics(plant, q, qd, qdd)
    n = len(joints)
    split = 4 if kind['split'] else n
    with JointStateBagWriter(folder, storage=kind['storage'], version=max(8, kind['version'])
                             ) as writer:
        for k in range(len(t)):
            writer.write(t[k], joints[:split][::-1], q[k, :split][::-1], qd[k, :split][::-1],
                         tau[k, :split][::-1])
            if split < n:
                writer.write(t[k] + 2e-4, joints[split:], q[k, split:], qd[k, split:],
                             tau[k, split:])
    if kind['version'] < 8:
        downgrade(folder, kind['version'])


def run_identify(*arguments):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.run([sys.executable, '-W', 'ignore', '-m', 'robot_dynamics.nodes.identify',
                           *arguments], env=env, capture_output=True, text=True, timeout=GUARD)


def relative_errors(text, label):
    line = next(row for row in text.splitlines() if row.startswith(label))
    return [float(cell.rstrip('%')) for cell in line[len(label):].split()]


@pytest.mark.parametrize('kind', [
    dict(BASE, duration=8.0),                                           # the reported log
    dict(BASE, duration=8.0, jitter=0.0, split=True, storage='mcap', version=5),
    dict(BASE, duration=8.0, rate=100.0, drop=0.01, version=7),
    dict(BASE, duration=8.0, robot=PANDA, drop=0.005, storage='mcap', version=9),
], ids=['1kHz-jitter', '1kHz-uniform-two-publishers-mcap-v5', '100Hz-drops-v7',
        'panda-1kHz-jitter-drops-mcap-v9'])
def test_identify_estimate_identifies_from_recordings_as_robots_make_them(tmp_path, kind):
    pytest.importorskip('cvxpy')
    excitation_bag(tmp_path / 'bag', kind)
    done = run_identify('estimate', '--params-file', kind.get('robot', PUMA), '--bag',
                        str(tmp_path / 'bag'),
                        '--output', str(tmp_path / 'out.yaml'))
    assert done.returncode == 0, done.stdout + done.stderr
    prior = relative_errors(done.stdout, 'relative error, prior')
    identified = relative_errors(done.stdout, 'relative error, identified')
    assert all(i < p for i, p in zip(identified, prior)), done.stdout


def test_an_internal_error_is_said_to_be_a_bug_not_bad_data(tmp_path, capsys, monkeypatch):
    """An unexpected exception in the data preparation (like the broadcasting error a
    grid one sample longer once raised) ends with its own status and one line that says
    it is a bug."""
    from robot_dynamics.nodes import identify

    def broken(t, arrays):
        raise ValueError('operands could not be broadcast together with shapes (4950,) '
                         '(5067,)')
    monkeypatch.setattr(ai.recording, 'uniform_grid', broken)     # where _prepare finds it
    t = 10.0 + np.arange(300) * 0.01
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k, (q, qd, tau) in enumerate(zip(*motion(t))):
            writer.write(t[k], JOINTS, q, qd, tau)
    code = identify.main(['identify', 'estimate', '--params-file', PUMA, '--bag',
                          str(tmp_path / 'bag'), '--output', str(tmp_path / 'out.yaml')])
    err = capsys.readouterr().err
    assert code == identify.BUG and code not in (1, 2, 3)
    assert err.count('\n') == 1 and 'internal error (a bug' in err and 'not a problem of ' \
        'the data' in err and 'operands could not be broadcast' in err
    assert 'the estimation data' not in err
    assert not (tmp_path / 'out.yaml').exists()


@pytest.mark.parametrize('blocked, named', [
    (('scipy',), 'needs scipy: pip install scipy'),
    (('cvxpy',), 'needs cvxpy: pip install cvxpy'),
    (('scipy', 'cvxpy'), 'needs scipy and cvxpy: pip install scipy cvxpy'),
])
def test_without_scipy_or_cvxpy_one_line_says_what_to_install(tmp_path, blocked, named):
    """In a child process where the libraries cannot be imported (as if not installed)."""
    t = 10.0 + np.arange(300) * 0.01
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k, (q, qd, tau) in enumerate(zip(*motion(t))):
            writer.write(t[k], JOINTS, q, qd, tau)
    done = estimate_in_a_child(blocked, 'No module named ', PUMA, tmp_path / 'bag',
                               tmp_path / 'out.yaml', GUARD)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count('\n') == 1 and named in done.stderr, done.stderr
    assert 'Traceback' not in done.stderr and not (tmp_path / 'out.yaml').exists()


# ---------------------------------------------------------------------- the decoder


@settings(max_examples=60, deadline=None)
@given(frame=st.text(max_size=12), names=st.lists(st.text(min_size=0, max_size=9), max_size=8),
       sizes=st.tuples(*[st.integers(0, 8)] * 3), sec=st.integers(0, 2 ** 31 - 1),
       nanosec=st.integers(0, 999_999_999), seed=st.integers(0, 100))
def test_the_direct_decoder_reads_what_rosbags_reads(frame, names, sizes, sec, nanosec,
                                                     seed):
    """Any JointState (names of any length and script, arrays of any sizes): the direct
    CDR reading gives rosbags' decoding, with or without the names already known."""
    from rosbags.typesys import get_typestore, Stores
    from robot_dynamics.identification.recordings import _decode, JOINT_STATE_TYPE
    store = get_typestore(Stores.ROS2_JAZZY)
    types = store.types
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=size) for size in sizes]
    message = types[JOINT_STATE_TYPE](
        header=types['std_msgs/msg/Header'](
            stamp=types['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec),
            frame_id=frame),
        name=names, position=arrays[0], velocity=arrays[1], effort=arrays[2])
    raw = store.serialize_cdr(message, JOINT_STATE_TYPE)
    back = store.deserialize_cdr(raw, JOINT_STATE_TYPE)
    known = {}
    for _ in range(2):                             # the second time the names are known
        stamp, decoded_names, *decoded = _decode(raw, known)
        assert stamp == back.header.stamp.sec + back.header.stamp.nanosec * 1e-9
        assert list(decoded_names) == list(back.name)
        for mine, theirs in zip(decoded, (back.position, back.velocity, back.effort)):
            np.testing.assert_array_equal(mine, theirs)
    assert _decode(raw[:-1] if sizes[2] else raw[:8]) is None      # cut short: not read


def test_a_message_neither_decoder_reads_is_refused_in_one_line(tmp_path):
    t = 10.0 + np.arange(50) * 0.01
    with JointStateBagWriter(tmp_path / 'bag') as writer:
        for k, (q, qd, tau) in enumerate(zip(*motion(t))):
            writer.write(t[k], JOINTS, q, qd, tau)
        writer.write_serialized(20.0, b'\x00\x01\x00\x00garbage')
    with pytest.raises(BagError) as refused:
        read_joint_states(tmp_path / 'bag', JOINTS)
    text = str(refused.value)
    assert '\n' not in text and 'received at 20.000000000 s cannot be decoded' in text
