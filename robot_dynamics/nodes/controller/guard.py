"""The controller's callback guard and message helpers."""

import functools

import numpy as np

from robot_dynamics.nodes.common.throttled_log import log_throttled
THROTTLE = 2.0  # s between repeated warnings


def guarded(what, control=False):
    """A callback that logs an unexpected exception instead of ending the node's spin.
    `control`: a callback that runs the control cycle; an exception in it before the
    cycle's effort went out commands zero effort instead (a forward_command_controller
    would otherwise keep applying the last effort)."""
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args):
            if control:
                self._cycle_published = False
            try:
                return method(self, *args)
            except Exception as error:  # noqa: B902 - the node must keep controlling
                self.unexpected_errors += 1
                zero = (control and not self._cycle_published
                        and getattr(self, '_commanding', False))
                if zero:
                    self._publish_command(np.zeros(self.model.n))
                log_throttled(self, 'error', f'{what}: unexpected {type(error).__name__}: '
                              f'{error}; dropped' + ('; zero effort commanded' if zero else ''),
                              THROTTLE, key=('unexpected error', what))
                return None
        return wrapper
    return decorate


def doubles(values):
    """A float64[] message field from an array (tolist() measured faster than building an
    array.array or converting element by element)."""
    return np.asarray(values, dtype=float).tolist()
