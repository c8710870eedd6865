"""The controller's state input: /joint_states mapped by name onto the controlled joints
(other joints ignored, a malformed message dropped as a whole), and in on_state mode the
stamp checks (repeated, backwards, future stamps)."""

import math

import numpy as np

from robot_dynamics.nodes.common.ros_params import seconds
from robot_dynamics.nodes.controller.guard import guarded

MAX_ABS_STATE = 1.0e6   # |q| [rad | m] or |q̇| [rad/s | m/s] beyond this: message dropped
CLOCK_RESET = 1.0       # s: on_state stamps going back further mean the publisher restarted
FUTURE_LIMIT = 1.0      # s: on_state stamps further ahead of the node clock are dropped
REPEAT_AGE_LIMIT = 0.01  # s: a moving state sent again is aged by its first stamp up to this
UNMATCHED_WARNING = 1000  # measure_latency: states whose efforts echo no command, before
#                           it says that nothing can be measured
FROZEN_MOTION = 0.01    # rad | m: a moving joint whose state stays the same while its velocity
#                         implies more motion than this is frozen (its state_timeout runs)


class JointStateInput:
    """The /joint_states side of ComputedTorqueController (a mixin: it uses the node's
    `_index`, `_q`, `_qd`, `_received`, `_changed_at`, `_frozen`, `control_mode`,
    `state_timeout`, `stopped_velocity_tolerance`)."""

    @guarded('joint_states', control=True)
    def _on_joint_states(self, msg):
        """Map by name; ignore other joints; a malformed message is dropped as a whole."""
        updates = self._known_names_updates(msg)
        if updates is None:
            updates = self._joint_updates(msg)
            if not updates:
                return
            targets, positions, velocities = (np.array(column) for column in zip(*updates))
        else:
            targets, positions, velocities = updates
            if not len(targets):
                return
        now = self._now()
        stamp = now
        if self.control_mode == 'on_state':
            raw = seconds(msg.header.stamp)
            if self._repeats_answered_state(raw, targets, positions, velocities):
                return
            stamp = self._state_stamp(raw, now)
            if stamp is None:
                return
            if (self._ready and self.state_timeout > 0.0
                    and now - self._received.max() > self.state_timeout):
                self._stale = True      # states resumed after a gap: re-sync below
            self._age_a_repeated_measurement(stamp, targets, positions, velocities)
        measured = self._stamp_joint_time(msg, now) if self.stamp_joint else None
        if self.measure_latency and self._ready and not (
                np.array_equal(self._q[targets], positions)
                and np.array_equal(self._qd[targets], velocities)):
            self._effort_echo(msg, stamp if measured is None else measured,
                              measured is not None)
        fresh = self._fresh_joints(targets, positions, velocities, now)
        self._q[targets] = positions
        self._qd[targets] = velocities
        self._measured = measured
        self._received[targets[fresh]] = now
        if self.control_mode == 'on_state':
            self._control_cycle(stamp, now)

    def _effort_echo(self, msg, stamp, measured=False):
        """measure_latency: the efforts of a state that names every controlled joint, in
        the controller's order, as a sample of the loop's dead time (loop_delay.py); not
        called for a state whose positions and velocities all equal the last one's (the
        same measurement sent again, as joint_state_broadcaster does when the hardware had
        nothing new: its stamp is not the time of its efforts). Its time: the stamp_joint's
        (`measured`); else on_state, the accepted stamp; in timer mode, the header stamp."""
        cached = self._names
        if cached is None or len(msg.effort) != len(msg.name):
            return
        _, sources, targets = cached
        if len(targets) != self.model.n:
            return
        if self.control_mode != 'on_state' and not measured:
            stamp = seconds(msg.header.stamp)
            if stamp <= 0.0:
                return
        effort = np.empty(self.model.n)
        effort[targets] = np.asarray(msg.effort, dtype=float)[sources]
        estimate = self.loop_delay
        if estimate.echoed(stamp, effort):
            if estimate.samples == 1:
                self.get_logger().info(
                    'measure_latency: the efforts in /joint_states echo the commands sent; '
                    'latency_compensation now follows the measured dead time (from '
                    f'{self.latency_compensation * 1e3:.3f} ms)')
        elif estimate.unmatched == UNMATCHED_WARNING and not estimate.samples:
            self.get_logger().warning(
                f'measure_latency: the efforts of {UNMATCHED_WARNING} /joint_states equal no '
                'command sent (measured torques, not a simulator\'s applied effort): '
                f'latency_compensation stays {self.latency_compensation:g} s')

    def _stamp_joint_time(self, msg, now):
        """stamp_joint: the time [s] the state in `msg` was measured (the position of that
        joint), or None when the message does not name it, or names it with 0 (a
        ros2_control state interface's initial value, before the simulator's first state),
        or with a value that is not a time within FUTURE_LIMIT of the node clock `now`
        (said, throttled): the header stamp and state_age are used then."""
        names = msg.name
        if names != self._stamp_names:
            self._stamp_names = list(names)
            self._stamp_index = (self._stamp_names.index(self.stamp_joint)
                                 if self.stamp_joint in self._stamp_names else None)
        k = self._stamp_index
        if k is None or k >= len(msg.position):
            return None
        value = msg.position[k]
        if value == 0.0:
            return None
        if not (math.isfinite(value) and abs(value - now) <= FUTURE_LIMIT):
            self._warn(f'joint_states.position[{k}] (stamp_joint {self.stamp_joint!r}): '
                       f'{value} is not a time within {FUTURE_LIMIT:g} s of the node clock '
                       f'({now:.3f} s); the header stamp is used')
            return None
        return float(value)

    def _fresh_joints(self, targets, positions, velocities, now):
        """Which of `targets` (a boolean mask) this message refreshes for the state
        watchdog: all but the frozen joints, those moving (|q̇| above
        constraints.stopped_velocity_tolerance) whose position and velocity are the very
        same as before for so long that the velocity implies more than FROZEN_MOTION of
        motion. That is hardware that stopped updating behind a publisher that goes on
        sending its last values (joint_state_broadcaster publishes every cycle whatever
        the hardware does): without this, the controller would act on a frozen state
        while the arm moves. A frozen joint is then as silent for state_timeout (zero
        effort, status state_timeout) until its state changes. A joint at rest may repeat
        its values for ever, and no encoder's step is as large as FROZEN_MOTION."""
        moving = np.abs(velocities) > self.stopped_velocity_tolerance
        same = (moving & (positions == self._q[targets])
                & (velocities == self._qd[targets]))
        changed_at = np.where(same, self._changed_at[targets], now)
        self._changed_at[targets] = changed_at
        frozen = same & (np.abs(velocities) * (now - changed_at) > FROZEN_MOTION)
        newly = frozen & ~self._frozen[targets]
        self._frozen[targets] = frozen
        if newly.any():
            joints = [self.joints[i] for i in targets[newly]]
            self.get_logger().warning(
                f'/joint_states of {joints} frozen: the same position and velocity (moving '
                f'at {np.abs(velocities[newly]).max():.3g} rad/s or m/s) sent again for '
                f'{now - changed_at[newly].min():.3g} s, more motion than the state shows; '
                'the hardware behind the publisher stopped updating? These joints count as '
                'silent for state_timeout')
        return ~frozen

    def _known_names_updates(self, msg):
        """The fast path of _joint_updates for a name list seen before whose values are all
        well-formed: (controller indices, q, q̇) arrays; None means take the full path."""
        names = msg.name
        cached = self._names
        if cached is None or names != cached[0]:
            self._names = cached = self._name_mapping(names)
            if cached is None:
                return None
        _, sources, targets = cached
        count = len(names)
        if len(msg.position) != count or len(msg.velocity) != count:
            return None
        positions = np.asarray(msg.position, dtype=float)[sources]
        velocities = np.asarray(msg.velocity, dtype=float)[sources]
        # NaN fails the comparison too: one vectorised check for finite and within range.
        if not ((np.abs(positions) <= MAX_ABS_STATE).all()
                and (np.abs(velocities) <= MAX_ABS_STATE).all()):
            return None
        return targets, positions, velocities

    def _name_mapping(self, names):
        """(names, message indices, controller indices) of a name list without duplicates,
        else None (the full path then reports the duplicate)."""
        names = list(names)
        if len(set(names)) != len(names):
            return None
        pairs = [(k, self._index[name]) for k, name in enumerate(names) if name in self._index]
        sources = np.array([k for k, _ in pairs], dtype=np.intp)
        targets = np.array([i for _, i in pairs], dtype=np.intp)
        return names, sources, targets

    def _joint_updates(self, msg):
        """[(index, q, q̇)] of the controlled joints in `msg`, or None if it is malformed."""
        count = len(msg.name)
        for field in ('position', 'velocity'):
            if len(getattr(msg, field)) != count:
                self._warn(f'joint_states.{field}: {len(getattr(msg, field))} values for '
                           f'{count} names; message dropped')
                return None
        updates = []
        seen = set()
        for k, (name, position, velocity) in enumerate(zip(msg.name, msg.position,
                                                           msg.velocity)):
            if name in seen:
                self._warn(f'joint_states.name[{k}]: duplicate name {name!r}; message dropped')
                return None
            seen.add(name)
            i = self._index.get(name)
            if i is None:
                continue
            for field, value in (('position', position), ('velocity', velocity)):
                if not (math.isfinite(value) and abs(value) <= MAX_ABS_STATE):
                    self._warn(f'joint_states.{field}[{k}] (joint {name!r}): {value} is not a '
                               f'finite value within +-{MAX_ABS_STATE:g}; message dropped')
                    return None
            updates.append((i, position, velocity))
        return updates

    def _repeats_answered_state(self, raw, targets, positions, velocities):
        """on_state: True for a re-publication of the state the last cycle answered (same
        non-zero stamp, same values; a lock-step simulator re-sends a state it is waiting on).
        Answering it again would send a second command for one state, and a lock-step plant
        would take that one as the answer to its next state: every later command would then
        be applied one cycle late. raw: the message's header stamp [s]."""
        if not (self._ready and raw > 0.0 and raw == self._last_raw):
            return False
        if not (np.array_equal(self._q[targets], positions)
                and np.array_equal(self._qd[targets], velocities)):
            return False          # another publisher's joints with the same stamp
        self.get_logger().debug(f'joint_states at {raw:.4f} s again (already answered): '
                                'not answered twice')
        return True

    def _age_a_repeated_measurement(self, stamp, targets, positions, velocities):
        """on_state: a moving state (some q̇ != 0) whose every position and velocity equal
        the last message's, under a newer stamp, is the same measurement sent again:
        joint_state_broadcaster publishes the hardware's last values every cycle, also when
        the hardware had no new state for that read (a simulator or a device a cycle late).
        Its time is the first message's stamp: `_repeat_age` (stamp - that, at most
        REPEAT_AGE_LIMIT) lengthens the prediction to the time the effort acts; counted in
        repeated_states (logged at shutdown). A new state (or a resting one: its time does
        not matter) is measured at its own stamp."""
        repeated = (self._ready and stamp > self._measured_at
                    and np.any(velocities != 0.0)
                    and np.array_equal(self._q[targets], positions)
                    and np.array_equal(self._qd[targets], velocities))
        if repeated:
            self._repeat_age = min(stamp - self._measured_at, REPEAT_AGE_LIMIT)
            self.repeated_states += 1
        else:
            self._measured_at, self._repeat_age = stamp, 0.0

    def _state_stamp(self, raw, now):
        """on_state: the time the cycle samples the reference at (the message stamp `raw`
        [s], or the node clock for stamp 0), or None if the message is to be dropped."""
        stamp = raw if raw > 0.0 else now
        if now > 0.0 and stamp > now + FUTURE_LIMIT:
            self._warn(f'joint_states.header.stamp {stamp:.3f} s is more than {FUTURE_LIMIT:g} '
                       f's ahead of the node clock ({now:.3f} s); message dropped')
            return None
        last = self._last_stamp
        # A stamped publisher sending stamp 0 restarted at simulated time 0 (its /clock may
        # not have reached us yet); the node clock going back means the same.
        restarted = (raw <= 0.0 < self._last_raw) or now < self._last_now
        if last is not None and (stamp < last or restarted):
            if last - stamp <= CLOCK_RESET and not restarted:
                self._warn(f'joint_states.header.stamp went backwards ({stamp:.4f} s after '
                           f'{last:.4f} s); message dropped')
                return None
            self.get_logger().warning(
                f'joint_states.header.stamp {raw:.4f} s after {last:.4f} s (publisher or clock '
                'restarted?): re-synchronising')
            self._stale = True
        self._last_stamp, self._last_now, self._last_raw = stamp, now, raw
        return stamp
