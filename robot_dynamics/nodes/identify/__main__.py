"""`python -m robot_dynamics.nodes.identify`: the `identify` executable."""

import sys

from robot_dynamics.nodes.identify import main

sys.exit(main())
