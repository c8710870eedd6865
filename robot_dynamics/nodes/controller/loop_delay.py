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
for the arm to trail the reference). Their running mean follows the dead time as
it changes with the load of the machine; the arm otherwise runs off the reference by q̇ times
the difference. A real arm reports measured torques, which equal no command: then nothing is
measured and latency_compensation stays as set."""

from collections import deque

MEMORY = 64          # commands remembered (64 cycles: 64 ms at 1 kHz)
WINDOW = 100        # samples: the running mean's memory (1/e after this many)
MAX_DELAY = 0.1      # s: a longer sample (a restart, a stamp on another clock) is ignored
MAX_PERIOD = 0.1     # s: a longer interval between states is a gap, not a tick
SKIPPED = 1.5        # an interval this many ticks long or longer skipped a state


class LoopDelayEstimate:
    """The running mean of the measured dead time [s], starting at `start`."""

    def __init__(self, start):
        self.value = float(start)
        self.samples = 0        # states whose efforts equalled one command sent
        self.unmatched = 0      # states with efforts equal to no command remembered
        self.ambiguous = 0      # states with efforts sent more than once (an arm at rest
        #                         under the same command: no sample, and none needed)
        self._alpha = 1.0 / WINDOW
        self._sent = {}         # effort bytes -> [cycle time, commands with these values]
        self._order = deque()
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
        entry = self._sent.get(key)
        if entry is None:
            self._sent[key] = [t, 1]
        else:                   # the same values twice: the echo would be ambiguous
            entry[0] = t        # until the older ones are forgotten: then it is this one
            entry[1] += 1
        self._order.append(key)
        if len(self._order) > MEMORY:
            old = self._order.popleft()
            entry = self._sent[old]
            entry[1] -= 1
            if entry[1] == 0:
                del self._sent[old]

    def echoed(self, stamp, effort):
        """A state stamped `stamp` [s] reported `effort` (float64 array, the controller's
        joint order) as applied; True if it was a sample."""
        last, self._last_stamp = self._last_stamp, stamp
        if last is not None and 0.0 < stamp - last < MAX_PERIOD:
            self._tick(stamp - last)
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
        self.value += self._alpha * (delay - self.value)
        self.samples += 1
        return True

    def _tick(self, step):
        """One interval `step` [s] between states into the tick's running mean; an interval
        of SKIPPED ticks or more (a tick without a state) is left out, unless WINDOW of them
        come in a row (the simulator's tick has changed: the mean starts again from it)."""
        if self.period is not None and step >= SKIPPED * self.period:
            self._skipped += 1
            if self._skipped < WINDOW:
                return
            self.period = None
        self._skipped = 0
        self.period = step if self.period is None else (
            self.period + self._alpha * (step - self.period))
