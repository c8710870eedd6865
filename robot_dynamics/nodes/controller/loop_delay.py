"""The loop's dead time measured from the effort a simulated arm reports (measure_latency).

A simulator that reports in /joint_states the effort it applied over the step ending at the
state's stamp (this package's plant, and topic_based_ros2_control and
joint_state_broadcaster in front of it, which copy it bit for bit) shows when each command
acted: a state stamped s whose efforts equal the command answering the cycle at t says that
command acted over the tick (s - T, s], centred T/2 before s (T: the simulator's tick). The
effort of the command answering a state measured at m acts, on average, at m +
latency_compensation, so one such state is one sample s - t - T/2 of latency_compensation
(state_age cancels: it shifts s and t alike). A simulator may send no state at some ticks
(this package's plant behind topic_based_ros2_control, one tick in ten and where a command
came late): the state after such a gap still reports the effort of its last tick alone, so
T is the interval of the states without those gaps, not their mean interval (which would
centre every sample that much too early: measured, 0.05-0.07 ms short at 1 kHz, enough
for the arm to trail the reference). A command acted in each such tick too, and what the
arm is given is the mean over every tick: behind topic_based_ros2_control one tick in eight
or nine had no state, nearly always given a command of its own, sent after the one the
state before echoed and never echoed itself, and those commands had come sooner than the
rest (by 0.03-0.09 ms on average): the echoed ticks alone read the dead time 0.008-0.011 ms
long, which left the arm 2-3 times the error it has with every tick counted. So a state
after a gap of up to MAX_SILENT ticks also stands for the ticks before it: each is a sample
of the command, of those sent after the last one echoed up to this state's own, whose
sample is nearest to the running mean (they are a tick apart; the dead time varies less).
Where a simulator's silent ticks hold the command echoed before them as often as the
others do (its gaps independent of late commands) that takes them for fresh ones: short
by (held share) x (silent share) x T. The running mean follows the dead time as it changes
with the load of the machine; a dead time off by δ gives the arm, at every tick, the
effort meant for δ later or sooner, which the feedback corrects only at its own bandwidth.
A real arm reports measured torques, which equal no command: then nothing is measured and latency_compensation stays as set."""

from collections import deque

MEMORY = 64          # commands remembered (64 cycles: 64 ms at 1 kHz)
WINDOW = 100        # samples: the running mean's memory (1/e after this many)
MAX_DELAY = 0.1      # s: a longer sample (a restart, a stamp on another clock) is ignored
MAX_PERIOD = 0.1     # s: a longer interval between states is a gap, not a tick
SKIPPED = 1.5        # an interval this many ticks long or longer skipped a state
MAX_SILENT = 4       # ticks without a state given samples at most (a longer gap: a stall,
#                      the ticks then caught up at once under whatever command was held)


class LoopDelayEstimate:
    """The running mean of the measured dead time [s], starting at `start`."""

    def __init__(self, start):
        self.value = float(start)
        self.samples = 0        # states whose efforts equalled one command sent
        self.inferred = 0       # ticks without a state before them, sampled as well
        self.unmatched = 0      # states with efforts equal to no command remembered
        self.ambiguous = 0      # states with efforts sent more than once (an arm at rest
        #                         under the same command: no sample, and none needed)
        self._alpha = 1.0 / WINDOW
        self._sent = {}         # effort bytes -> [cycle time, commands with these values,
        #                         sequence number of the last of them]
        self._order = deque()   # (sequence number, effort bytes, cycle time), oldest first
        self._count = 0         # commands sent
        self._echoed = None     # sequence number of the command the last state echoed
        self._last_stamp = None
        self.period = None      # the tick [s]: the running mean of the state intervals,
        #                         those that skipped a state (SKIPPED ticks or more) left out
        self._skipped = 0       # such intervals in a row

    def restart(self, start):
        """A new start value (latency_compensation set live): the mean starts from it."""
        self.value = float(start)

    def sent(self, t, effort):
        """The command `effort` (float64 array, the controller's joint order) answered the
        cycle at time `t` [s]."""
        key = effort.tobytes()
        self._count += 1
        entry = self._sent.get(key)
        if entry is None:
            self._sent[key] = [t, 1, self._count]
        else:                   # the same values twice: the echo would be ambiguous
            entry[0] = t        # until the older ones are forgotten: then it is this one
            entry[1] += 1
            entry[2] = self._count
        self._order.append((self._count, key, t))
        if len(self._order) > MEMORY:
            old = self._order.popleft()[1]
            entry = self._sent[old]
            entry[1] -= 1
            if entry[1] == 0:
                del self._sent[old]

    def echoed(self, stamp, effort):
        """A state stamped `stamp` [s] reported `effort` (float64 array, the controller's
        joint order) as applied; True if it was a sample."""
        last, self._last_stamp = self._last_stamp, stamp
        silent = 0
        if last is not None and 0.0 < stamp - last < MAX_PERIOD:
            silent = self._tick(stamp - last)
        echoed, self._echoed = self._echoed, None
        entry = self._sent.get(effort.tobytes())
        if entry is None or self.period is None:
            self.unmatched += 1
            return False
        if entry[1] > 1:
            self.ambiguous += 1
            return False
        delay = stamp - entry[0] - 0.5 * self.period
        if not 0.0 <= delay <= MAX_DELAY:
            self.unmatched += 1
            return False
        if silent and echoed is not None:
            self._silent_ticks(stamp, silent, echoed, entry[2], entry[0])
        self._echoed = entry[2]
        self._add(delay)
        self.samples += 1
        return True

    def _silent_ticks(self, stamp, silent, first, last, last_time):
        """One sample for each of the `silent` ticks before the state stamped `stamp`: of
        the commands sent after the one numbered `first` up to the one numbered `last` (the
        one echoed before and the one this state echoes, sent at `last_time`), the one whose
        sample is nearest to the running mean."""
        times = []
        for number, _, t in reversed(self._order):
            if number <= first:
                break
            if number <= last:
                times.append(t)
        if not times:                       # the command echoed before, echoed again
            times = [last_time]
        for j in range(1, silent + 1):
            middle = stamp - (j + 0.5) * self.period
            delay = min((middle - t for t in times), key=lambda d: abs(d - self.value))
            if 0.0 <= delay <= MAX_DELAY:
                self._add(delay)
                self.inferred += 1

    def _add(self, delay):
        self.value += self._alpha * (delay - self.value)

    def _tick(self, step):
        """One interval `step` [s] between states into the tick's running mean; an interval
        of SKIPPED ticks or more (a tick without a state) is left out, unless WINDOW of them
        come in a row (the simulator's tick has changed: the mean starts again from it).
        Returns the ticks without a state the interval held (0 for none, or beyond
        MAX_SILENT)."""
        if self.period is not None and step >= SKIPPED * self.period:
            self._skipped += 1
            if self._skipped < WINDOW:
                silent = round(step / self.period) - 1
                return silent if silent <= MAX_SILENT else 0
            self.period = None
        self._skipped = 0
        self.period = step if self.period is None else (
            self.period + self._alpha * (step - self.period))
        return 0
