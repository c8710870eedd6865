"""`python -m robot_dynamics.nodes.controller`: the controller executable."""

import sys

from robot_dynamics.nodes.controller import main

sys.exit(main())
