"""nodes/common/runner.py: Ctrl-C and SIGTERM stop the executables in order. The signal only
sets a flag (from a watcher thread) and wakes the executor; the main thread leaves its
loop, destroys the node and shuts the context down itself. rclpy's own handler is not
installed: it shut the context down from its thread while the node was still using it."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ros_testing import REPO   # noqa: I100 - sets ROS_DOMAIN_ID first
from robot_dynamics.nodes.common.runner import STOP_GRACE_PERIOD, StopRequest


def wait_for(predicate, limit=5.0):
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > limit:
            return False
        time.sleep(0.005)
    return True


def current_wakeup_fd():
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_a_signal_sets_the_flag_and_calls_back_from_another_thread(signum):
    before = signal.getsignal(signum), current_wakeup_fd()
    stop = StopRequest(grace_period=0.0)      # restored at once by close()
    try:
        threads = []
        stop.on_stop(lambda: threads.append(threading.current_thread()))
        assert stop.running() and not stop.requested
        os.kill(os.getpid(), signum)          # no KeyboardInterrupt, no exit
        assert wait_for(lambda: stop.requested and threads)
        time.sleep(0.05)                      # the Python-level handler has run meanwhile
        assert not stop.running()
        assert threads == [stop._thread]      # the watcher, not the main thread
        late = []
        stop.on_stop(lambda: late.append(1))  # registered after the stop: called at once
        assert late == [1]
    finally:
        stop.close()
    assert (signal.getsignal(signum), current_wakeup_fd()) == before
    assert not stop._thread.is_alive()


def test_other_signals_are_not_a_stop():
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    stop = StopRequest()
    try:
        os.kill(os.getpid(), signal.SIGUSR1)  # also written to the wakeup fd
        time.sleep(0.1)
        assert stop.running()
    finally:
        stop.close()
        signal.signal(signal.SIGUSR1, previous)


def test_outside_the_main_thread_it_stands_by():
    before = signal.getsignal(signal.SIGINT)
    made = []
    thread = threading.Thread(target=lambda: made.append(StopRequest()))
    thread.start()
    thread.join()
    assert made[0].running() and signal.getsignal(signal.SIGINT) is before
    made[0].close()


def run_script(source, signals, timeout=30.0, gap=0.3):
    """Run `source` with the repository importable; once it prints 'ready', send
    `signals` (`gap` s apart; a (seconds, signum) pair waits that long before it, and a
    None signal only checks that the process still runs). (exit status, output, seconds
    from the first signal, whether the process ran at every None check)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    process = subprocess.Popen([sys.executable, '-c', textwrap.dedent(source)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    alive = True
    try:
        for line in process.stdout:
            lines.append(line)
            if line.strip() == 'ready':
                break
        start = time.monotonic()
        for k, signum in enumerate(signals):
            delay, signum = signum if isinstance(signum, tuple) else (gap if k else 0.0,
                                                                      signum)
            time.sleep(delay)
            if signum is None:
                alive = alive and process.poll() is None
            else:
                process.send_signal(signum)
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return process.returncode, ''.join(lines) + out, time.monotonic() - start, alive


HANGING_SHUTDOWN = '''
    import time
    from robot_dynamics.nodes.common.runner import STOP_GRACE_PERIOD, StopRequest
    stop = StopRequest()
    print('ready')
    while True:              # a shutdown that never ends
        time.sleep(0.01)
    '''


def test_a_signal_after_the_grace_period_ends_a_hanging_shutdown_at_once():
    """The second SIGINT within the grace period (launch's copy of a Ctrl-C) does not end
    the process; one after it does, with 128 + signal number."""
    code, out, seconds, alive = run_script(HANGING_SHUTDOWN, [
        signal.SIGINT, (0.05, signal.SIGINT), (1.0, None),
        (STOP_GRACE_PERIOD, signal.SIGINT)])
    assert alive, out
    assert code == 128 + signal.SIGINT, out
    assert seconds < 10.0 + STOP_GRACE_PERIOD


IDLE_NODE = '''
    import time
    from rclpy.node import Node
    from robot_dynamics.nodes.common import runner
    stamps = {}

    class Idle(Node):
        """No timer, no subscription: the executor waits with no timeout."""
        def __init__(self):
            super().__init__('idle_node')
            print('ready', flush=True)

        def destroy_node(self):
            context = self.context
            stamps['context ok when the node was destroyed'] = context.ok()
            return super().destroy_node()

    code = runner.run(Idle, 'idle_node', [])
    print(stamps, 'code', code, flush=True)
    '''


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_run_leaves_an_idle_executor_destroys_the_node_then_shuts_down(signum):
    code, out, seconds, _ = run_script(IDLE_NODE, [signum])
    assert code == 0, out
    assert "{'context ok when the node was destroyed': True} code 0" in out, out
    assert 'Traceback' not in out, out
    assert seconds < 10.0, out


@pytest.mark.parametrize('second', [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_within_the_grace_period_is_still_an_orderly_stop(second):
    """Under ros2 launch a node gets the terminal's SIGINT and launch's forwarded one
    milliseconds apart: exit 0 after an orderly shutdown, not 130 ("process has died")."""
    code, out, _, _ = run_script(IDLE_NODE, [signal.SIGINT, second], gap=0.01)
    assert code == 0, out
    assert "{'context ok when the node was destroyed': True} code 0" in out, out
    assert 'Traceback' not in out, out
