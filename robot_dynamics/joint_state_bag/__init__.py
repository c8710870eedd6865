"""The old name of `robot_dynamics.identification.recordings` (sensor_msgs/JointState
rosbag2 recordings): this module is the moved module itself, so that attributes set on one
are seen through the other."""

import sys

from robot_dynamics.identification import recordings

sys.modules[__name__] = recordings
