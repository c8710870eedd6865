"""The controller's control-law selection: the law built in the parameter callback
(LawSwap) and taken by the next control cycle, the switch without an effort jump, the
effort rate limit (the laws and their parameters: nodes/common/control_laws.py)."""

import threading

from robot_dynamics.nodes.common import control_laws


class LawSwap:
    """A new (law, effort limits, law settings), built in the parameter callback and taken
    by the next control cycle, so that the law, gains, limits and payload change together
    between two cycles; only the latest accepted change is kept.

    A payload change is cheap: the new model shares the compiled kernels of the old one
    (the last body's inertial parameters are runtime inputs of the generated code), and one
    call of the new law binds them (microseconds), so nothing is compiled in the loop."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ready = None

    def request(self, model, kp, kd, limits, settings):
        law = control_laws.build_law(model, kp, kd, settings)   # binds the kernels now
        with self._lock:
            self._ready = (law, limits, settings)

    def take(self):
        """The latest built (law, limits, settings), or None."""
        if self._ready is None:
            return None
        with self._lock:
            ready, self._ready = self._ready, None
        return ready

    @property
    def pending(self):
        return self._ready is not None


class LawSelection:
    """The law side of ComputedTorqueController (a mixin: it uses the node's `_swap`,
    `law`, `law_settings`, `_rate_limit`, `control_law`)."""

    def _take_new_law(self, t):
        ready = self._swap.take()
        if ready is not None:
            law, self.effort_limits, settings = ready
            self._use_law(law, settings, t)
            self.get_logger().info(
                f'new gains/effort limits/payload in effect (payload '
                f'{self.law.model.payload.mass:g} kg)')

    def _use_law(self, law, settings, t):
        """`law` in effect from the cycle at time t (control_laws.switched: no jump)."""
        old, old_name = self.law, self._law_name
        self.law, self.law_settings = law, settings
        self._law_name = settings['control_law']
        if getattr(self, '_ready', False):
            control_laws.switched(self, old, law, old_name, self._law_name, t)
        self._set_rate_limit(settings)

    def _set_rate_limit(self, settings):
        rate = settings['effort_rate_limit']
        self._rate_limit = (None if rate is None else
                            control_laws.EffortRateLimit(rate).carried_from(self._rate_limit))

    def trajectory_refusal(self):
        """Why a joint trajectory (topic or action goal) does not apply now, or None."""
        return control_laws.refusal(self.control_law, 'trajectory')

    def _restarted(self):
        """Holding from the measured state (first cycle, re-synchronised): a Cartesian law
        at the measured tool pose; the rate limit starts from the first effort (a ramp from
        a zero effort would let the arm fall)."""
        if isinstance(self.law, control_laws.CartesianLaw):
            self.law.hold(self._q)
        if self._rate_limit is not None:
            self._rate_limit.reset()
