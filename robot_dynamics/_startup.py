"""Ctrl-C while one of the package's executables is still starting (importing numpy,
rclpy, ...): exit status 130 (128 + SIGINT, the shell's convention) with one line, instead
of a KeyboardInterrupt traceback from whichever import was running. Installed by the
package's `__init__` only when the process is one of its executables; once rclpy is
initialised the executables' own handler (robot_dynamics.nodes.common.runner.StopRequest) takes
over, and restores this one when it is done. Standard library only."""

import os
import signal
import sys
import threading

EXECUTABLES = ('controller', 'controller_managed', 'plant', 'sim', 'demo_move',
               'send_trajectory', 'excite', 'identify')
INTERRUPTED = 128 + signal.SIGINT


def starting_an_executable(argv=None):
    """Whether this process is starting one of the executables: a console script of the
    package, or `python -m robot_dynamics...` (while `-m` imports the module's packages,
    sys.argv[0] is '-m')."""
    argv = sys.argv if argv is None else argv
    if not argv:
        return False
    return argv[0] == '-m' or os.path.basename(argv[0]) in EXECUTABLES


def _interrupted(signum, frame):
    # Nothing has started yet, so there is nothing to clean up; an exception raised here
    # would surface inside whichever import was running, and some (numpy's C extensions)
    # turn it into an ImportError with a traceback. Leave at once instead.
    print('interrupted while starting', file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(INTERRUPTED)


def quiet_interrupt_while_starting(argv=None):
    """Install the start-up SIGINT handler if this process is one of the executables and
    SIGINT still has Python's default handler; True if installed."""
    if not starting_an_executable(argv) \
            or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    signal.signal(signal.SIGINT, _interrupted)
    return True
