"""`identify estimate`'s data: the recordings read from the bags, the held-out split, their
gap-free pieces, the effort timing, and the refusal of efforts without information."""

import numpy as np

from robot_dynamics import dynamics
from robot_dynamics.identification.recordings import BagError, read_joint_states
from robot_dynamics.nodes.identify.common import (EFFORT_TIMING_KEY, EFFORT_TIMINGS,
                                                  InputError, RECORDED_BY_KEY)

GRAVITY_SHARE = 0.02    # efforts whose RMS is below this share of the gravity torques: refused
HELD_OUT = 0.2          # the fraction of the samples kept for validation without --validate


def read_recordings(bags, joints, topic):
    """The JointStateRecordings of `bags`; InputError (one line) for a bad one."""
    recordings = []
    for bag in bags:
        try:
            recordings.append(read_joint_states(bag, joints, topic))
        except BagError as error:
            raise InputError(str(error)) from None
    return recordings


def held_out(recordings, fraction=HELD_OUT):
    """(estimation recordings, validation recordings): the last `fraction` of all samples
    (in the order given) kept for validation."""
    total = sum(len(r) for r in recordings)
    keep = int(round((1.0 - fraction) * total))
    estimation, validation = [], []
    for recording in recordings:
        if keep >= len(recording):
            estimation.append(recording)
        elif keep <= 0:
            validation.append(recording)
        else:
            first, last = recording.split(keep / len(recording))
            estimation.append(first)
            validation.append(last)
        keep -= len(recording)
    return estimation, validation


def pieces(recordings):
    """The gap-free runs of samples of all recordings: [(t, q, qd, tau)]."""
    return [(r.t[s], r.q[s], r.qd[s], r.tau[s]) for r in recordings for s in r.segments()]


def effort_timing(args, recordings, out=print):
    """The effort timing: --effort-timing, else the one the bags were recorded with
    (`identify excite` writes it into their metadata), else instant; InputError when the
    bags disagree."""
    if args.effort_timing is not None:
        return args.effort_timing
    found = {r.custom_data.get(EFFORT_TIMING_KEY) for r in recordings} - {None}
    unknown = found - set(EFFORT_TIMINGS)
    if unknown:
        raise InputError(f'the bags\' metadata: {EFFORT_TIMING_KEY}: {sorted(unknown)} is '
                         f'not one of {", ".join(EFFORT_TIMINGS)}; give --effort-timing')
    if len(found) > 1:
        raise InputError(f'the bags were recorded with different effort timings '
                         f'{sorted(found)}; estimate them separately or give --effort-timing')
    if found:
        timing = found.pop()
        writers = sorted({str(r.custom_data[RECORDED_BY_KEY]) for r in recordings
                          if r.custom_data.get(RECORDED_BY_KEY)})
        by = (' and '.join(f'`{w}`' for w in writers) if writers
              else 'the command that recorded them')
        out(f'effort timing: {timing} (from the bags\' metadata, written by {by})')
        return timing
    return 'instant'


def uninformative_efforts(model, joints, pieces, scaled=False):
    """Why the recorded efforts of [(t, q, qd, tau)] carry no information about the arm
    (one sentence), or None: a joint whose effort never changes (0 or a constant: a mock
    or a misconfigured effort interface; a real drive's effort follows the motion), or,
    unless `scaled` (efforts in other units, drive gains estimated), efforts whose RMS is
    below GRAVITY_SHARE of the model's gravity torques along the recorded positions on
    every joint that gravity loads."""
    tau = np.concatenate([np.asarray(p[3], dtype=float) for p in pieces])
    q = np.concatenate([np.asarray(p[1], dtype=float) for p in pieces])
    if tau.shape[0] == 0:
        return None
    spread = np.ptp(tau, axis=0)
    level = np.max(np.abs(tau), axis=0)
    still = spread <= 1e-12 * np.maximum(level, 1.0)
    if np.any(still):
        zero = [j for j, s, v in zip(joints, still, level) if s and v == 0.0]
        constant = [f'{j} ({tau[0, i]:.6g})' for i, (j, s, v) in enumerate(
            zip(joints, still, level)) if s and v != 0.0]
        what = []
        if zero:
            what.append(f'0 in every sample for {", ".join(zero)}')
        if constant:
            what.append(f'constant for {", ".join(constant)}')
        return (f'the recorded efforts carry no information: {"; ".join(what)} (a mock or '
                'misconfigured effort interface, e.g. mock hardware publishing the effort '
                'state as 0; a drive\'s effort follows the motion): record the efforts the '
                'drives apply')
    if scaled:
        return None
    every = max(1, q.shape[0] // 2000)
    gravity = dynamics.gravity_torques(model, q[::every])
    g = np.sqrt(np.mean(gravity ** 2, axis=0))
    loaded = g > 0.05 * float(np.max(g)) if np.max(g) > 0.0 else np.zeros(len(g), bool)
    rms = np.sqrt(np.mean(tau ** 2, axis=0))
    if np.any(loaded) and np.all(rms[loaded] < GRAVITY_SHARE * g[loaded]):
        worst = [f'{j} {r:.3g} against {gj:.3g}' for j, r, gj, l in zip(joints, rms, g, loaded)
                 if l]
        return (f'the recorded efforts are far below the model\'s gravity torques (RMS '
                f'effort against RMS gravity torque along the recorded positions: '
                f'{", ".join(worst)}): not the joint efforts the drives apply (units? a '
                'mock effort interface?); efforts in other units need their drive gains '
                '(--payload-bag, --payload)')
    return None
