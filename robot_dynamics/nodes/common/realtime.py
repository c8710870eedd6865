"""Real-time options of the `controller` and `plant` executables (doc/realtime.md).

Three read-only parameters, grouped as ros2_control's controller_manager users know them:

- `realtime.priority`: SCHED_FIFO priority (1-99) of the control loop; 0 (the default)
  leaves it under the normal scheduler.
- `realtime.cpu_affinity`: the CPUs the loop may run on; empty (default): all.
- `realtime.lock_memory`: lock the process's memory in RAM (mlockall, current and future
  pages), so the loop never waits for a page fault; default false.

`enter_loop` (called by the runner in the thread about to run the loop) applies priority
and affinity to that thread and to the process's other threads, the middleware's, which
deliver the messages that wake the loop (with the loop thread alone raised, a loaded
machine still delayed them by milliseconds). What the system refuses (no CAP_SYS_NICE and
too low an RLIMIT_RTPRIO, CPUs outside the process's set, no CAP_IPC_LOCK and too low an
RLIMIT_MEMLOCK) is reported in ONE warning that says what was refused and how to allow
it; the node runs on without it.

`quiet_garbage_collector` deals with Python's own pauses: a collection after start-up,
then `gc.freeze()`, so the start-up objects (the model, generated code, rclpy, numpy:
≈ 71 000 objects in either node) are never traversed again by a full collection in the
loop (one took ≈ 30 ms of CPU before the freeze, 0.003 ms after).
"""

import ctypes
import ctypes.util
import gc
import os
import resource
import threading
from typing import NamedTuple

from robot_dynamics.nodes.common.ros_params import ConfigurationError, declare

MAX_PRIORITY = 99            # Linux SCHED_FIFO priorities are 1..99
MCL_CURRENT, MCL_FUTURE = 1, 2
HOW_TO_ALLOW = {
    'priority': 'allow it with "<user> - rtprio 99" in /etc/security/limits.conf (log in '
                'again) or `ulimit -r 99` in a root shell before starting the node (in a '
                'container: --cap-add=SYS_NICE or --ulimit rtprio=99; with real-time group '
                'scheduling also a real-time budget, --cpu-rt-runtime)',
    'lock_memory': 'allow it with "<user> - memlock unlimited" in '
                   '/etc/security/limits.conf (log in again) or `ulimit -l unlimited` (in a '
                   'container: --cap-add=IPC_LOCK or --ulimit memlock=-1)',
    'cpu_affinity': 'list CPUs of this machine that the process may use (see `nproc`, '
                    '`taskset -p <pid>`)',
}


class RealtimeOptions(NamedTuple):
    """The `realtime.*` parameters, validated."""
    priority: int = 0
    cpu_affinity: tuple = ()
    lock_memory: bool = False

    @property
    def requested(self):
        return bool(self.priority or self.cpu_affinity or self.lock_memory)


class RealtimeReport(NamedTuple):
    """What `apply_to_threads` did: descriptions of what was applied, and
    (option name, reason) for what the system refused."""
    applied: tuple
    refused: tuple

    def warning(self):
        """The one warning for everything refused ('' if nothing was)."""
        if not self.refused:
            return ''
        parts = [f'realtime.{name}: {reason}; {HOW_TO_ALLOW[name]}'
                 for name, reason in self.refused]
        return 'real-time options refused, running without them: ' + ' | '.join(parts)


def parse_options(priority, cpu_affinity, lock_memory):
    """RealtimeOptions from parameter values; ConfigurationError names the bad one."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigurationError(f'realtime.priority: expected an integer 0..{MAX_PRIORITY} '
                                 f'(SCHED_FIFO priority, 0 = off), got {priority!r}')
    if not 0 <= priority <= MAX_PRIORITY:
        raise ConfigurationError(f'realtime.priority: must be within 0..{MAX_PRIORITY} '
                                 f'(0 = off), got {priority}')
    if cpu_affinity is None:
        cpu_affinity = ()
    if isinstance(cpu_affinity, (str, bytes)) or not hasattr(cpu_affinity, '__len__'):
        raise ConfigurationError('realtime.cpu_affinity: expected a list of CPU numbers '
                                 f'(empty = all), got {cpu_affinity!r}')
    cpus = []
    for i, cpu in enumerate(cpu_affinity):
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise ConfigurationError(f'realtime.cpu_affinity[{i}]: expected a CPU number '
                                     f'>= 0, got {cpu!r}')
        if cpu in cpus:
            raise ConfigurationError(f'realtime.cpu_affinity[{i}]: CPU {cpu} given twice')
        cpus.append(cpu)
    if not isinstance(lock_memory, bool):
        raise ConfigurationError(f'realtime.lock_memory: expected true or false, got '
                                 f'{lock_memory!r}')
    return RealtimeOptions(priority, tuple(cpus), lock_memory)


def declare_realtime(node):
    """Declare the three read-only `realtime.*` parameters of `node`; their options."""
    return parse_options(
        declare(node, 'realtime.priority'), declare(node, 'realtime.cpu_affinity'),
        declare(node, 'realtime.lock_memory'))


def _mlockall():
    libc = ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True)
    if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _limit(which):
    soft = resource.getrlimit(which)[0]
    return 'unlimited' if soft == resource.RLIM_INFINITY else str(soft)


def process_threads():
    """The thread ids of this process, the calling thread first (Linux: /proc/self/task)."""
    own = threading.get_native_id()
    try:
        others = sorted(int(tid) for tid in os.listdir('/proc/self/task') if int(tid) != own)
    except OSError:
        others = []
    return [own] + others


def apply_to_threads(options, threads=(0,), set_scheduler=None, set_affinity=None,
                     lock_all=None):
    """Apply `options` to the process (memory, first: paging it in is not done under
    SCHED_FIFO) and to `threads` (thread ids, 0 = the calling one: affinity, then
    priority); a RealtimeReport. The three callables default to the system calls (tests
    inject a refusal through them)."""
    set_scheduler = set_scheduler or os.sched_setscheduler
    set_affinity = set_affinity or os.sched_setaffinity
    lock_all = lock_all or _mlockall
    applied, refused = [], []
    if options.lock_memory:
        try:
            lock_all()
            applied.append('memory locked')
        except OSError as error:
            refused.append(('lock_memory', f'mlockall refused ({error.strerror}; '
                            f'RLIMIT_MEMLOCK is {_limit(resource.RLIMIT_MEMLOCK)} bytes, and '
                            'beyond it a process needs CAP_IPC_LOCK)'))
    if options.cpu_affinity:
        allowed = os.sched_getaffinity(0)
        usable = [cpu for cpu in options.cpu_affinity if cpu in allowed]
        missing = [cpu for cpu in options.cpu_affinity if cpu not in allowed]
        try:
            if usable:
                _for_each(threads, lambda tid: set_affinity(tid, usable))
                applied.append(f'CPUs {usable}')
        except OSError as error:
            refused.append(('cpu_affinity', f'CPUs {list(options.cpu_affinity)} refused '
                            f'({error.strerror})'))
        else:
            if missing:
                refused.append(('cpu_affinity', f'CPUs {missing} are not available to this '
                                f'process (it may use {sorted(allowed)})'))
    if options.priority:
        try:
            _for_each(threads, lambda tid: set_scheduler(tid, os.SCHED_FIFO,
                                                         os.sched_param(options.priority)))
            applied.append(f'SCHED_FIFO priority {options.priority}')
        except OSError as error:
            refused.append(('priority', f'SCHED_FIFO priority {options.priority} refused '
                            f'({error.strerror}; RLIMIT_RTPRIO is '
                            f'{_limit(resource.RLIMIT_RTPRIO)}, and above it a process needs '
                            'CAP_SYS_NICE)'))
    return RealtimeReport(tuple(applied), tuple(refused))


def _for_each(threads, call):
    """`call(tid)` for every thread, skipping those that ended meanwhile (ESRCH)."""
    for tid in threads:
        try:
            call(tid)
        except ProcessLookupError:
            continue


def quiet_garbage_collector():
    """Collect the start-up garbage once, then freeze what survived (gc.freeze): the full
    collections in the loop then traverse only what the loop itself made. Returns the
    number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def enter_loop(node):
    """In the thread about to run `node`'s loop: the garbage collector quietened, the
    node's `realtime` options (if it declared them) applied, one info line for what was
    applied and one warning for what was refused. The RealtimeReport, or None."""
    quiet_garbage_collector()
    options = getattr(node, 'realtime', None)
    if options is None or not options.requested:
        return None
    threads = process_threads()
    affinity = os.sched_getaffinity(0)
    report = apply_to_threads(options, threads)
    node._realtime_entered = (options, report, affinity)     # what leave_loop undoes
    logger = node.get_logger()
    if report.applied:
        logger.info(f'real-time: {", ".join(report.applied)} for the control loop thread '
                    f"and the process's {len(threads) - 1} other threads (the middleware's, "
                    'which deliver its messages)')
    if report.refused:
        logger.warning(report.warning())
    return report


def released(options, report):
    """The options of `options` that `report` does not list as refused (nothing to undo
    for those)."""
    refused = {name for name, _ in report.refused}
    return RealtimeOptions(
        options.priority if 'priority' not in refused else 0,
        options.cpu_affinity if 'cpu_affinity' not in refused else (),
        options.lock_memory and 'lock_memory' not in refused)


def release_threads(options, affinity, threads=(0,), set_scheduler=None, set_affinity=None,
                    unlock_all=None):
    """Undo `options` (as applied by `apply_to_threads`) on `threads`: normal scheduling
    (SCHED_OTHER), the CPU set `affinity` the process had before, memory unlocked. Going
    back needs no privilege; the descriptions of what was undone."""
    set_scheduler = set_scheduler or os.sched_setscheduler
    set_affinity = set_affinity or os.sched_setaffinity
    unlock_all = unlock_all or _munlockall
    undone = []
    if options.priority:
        _for_each(threads, lambda tid: set_scheduler(tid, os.SCHED_OTHER, os.sched_param(0)))
        undone.append('normal scheduling')
    if options.cpu_affinity:
        _for_each(threads, lambda tid: set_affinity(tid, affinity))
        undone.append(f'CPUs {sorted(affinity)}')
    if options.lock_memory:
        unlock_all()
        undone.append('memory unlocked')
    return tuple(undone)


def _munlockall():
    libc = ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True)
    if libc.munlockall() != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def leave_loop(node):
    """Undo what `enter_loop` applied for `node` (a managed node cleaned up: unconfigured,
    it runs at normal priority, on the CPUs it had, its memory unlocked), on every thread
    of the process; one info line. The descriptions of what was undone (empty if nothing
    had been applied)."""
    entered = getattr(node, '_realtime_entered', None)
    node._realtime_entered = None
    if entered is None:
        return ()
    options, report, affinity = entered
    try:
        undone = release_threads(released(options, report), affinity, process_threads())
    except OSError as error:
        node.get_logger().warning(f'real-time options not released: {error}')
        return ()
    if undone:
        node.get_logger().info(f'real-time options released: {", ".join(undone)} for all '
                               "the process's threads")
    return undone
