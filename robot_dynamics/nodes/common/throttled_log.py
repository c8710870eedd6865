"""Throttled log lines whose suppressed repeats cost a clock read, not a source lookup.

rclpy's own throttle (`logger.warning(text, throttle_duration_sec=...)`) finds its call
site on every call, whether the line is then logged or not: `inspect.getframeinfo` reads
the caller's source lines and `os.path.realpath` walks the file's path, 0.3-0.5 ms a
call on a 2-CPU machine (rclpy of Jazzy and Kilted). A condition that repeats every cycle of
a 1 kHz loop (an effort clipped at its limit, a stream of refused commands) would then
cost the loop a third to a half of each cycle, exactly while something is already wrong.
rclpy also keeps one throttle per call site, so the lines of a helper such as `_warn(text)`
throttled each other whatever they said.

`log_throttled` keys a line by the code object and line of the code that asked for it (a
frame attribute read: no source, no file system) and its level, keeps the time it was
last logged on the node, and calls the node's logger only when that key's period has
passed: once on the first call, then at most once a period, as rclpy's throttle does.
"""

import sys
import time

THROTTLE = 2.0                  # s between repeated log lines of one call site

_clock = time.monotonic         # the throttle's time (steady, as rclpy's default)


def log_throttled(node, level, text, period=THROTTLE, key=None, depth=1):
    """Log `text` at `level` ('debug', 'info', 'warning', 'error', 'fatal') with
    `node.get_logger()`, unless the same line was logged less than `period` s ago.
    The line is the call site `depth` frames up (1: the caller of this function; 2: its
    caller, for a helper like `_warn(text)`) and `level`, or `key` if given. True if it
    was logged."""
    if key is None:
        frame = sys._getframe(depth)
        key = (frame.f_code, frame.f_lineno, level)
    last_logged = node.__dict__.get('_throttled_lines')
    if last_logged is None:
        last_logged = node._throttled_lines = {}
    now = _clock()
    last = last_logged.get(key)
    if last is not None and now - last < period:
        return False
    last_logged[key] = now
    _EMIT[level](node.get_logger(), text)
    return True


# One call of the logger per level, each on a line of its own: rclpy keeps a context per
# call site and refuses a site that logs at two levels ("Logger severity cannot be changed
# between calls").
def _debug(logger, text):
    logger.debug(text)


def _info(logger, text):
    logger.info(text)


def _warning(logger, text):
    logger.warning(text)


def _error(logger, text):
    logger.error(text)


def _fatal(logger, text):
    logger.fatal(text)


_EMIT = {'debug': _debug, 'info': _info, 'warning': _warning, 'error': _error,
         'fatal': _fatal}
