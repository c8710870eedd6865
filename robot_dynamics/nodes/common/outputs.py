"""Small pieces of what the executables write, without ROS imports: a text file written
atomically, and the fields of a builtin_interfaces/Duration."""

import math
import os


def write_file(path, text):
    """`text` into `path` (its folder made if missing), atomically: another reader sees the
    old file or the new one, never half of it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = f'{path}.tmp'
    with open(temporary, 'w', encoding='utf-8') as stream:
        stream.write(text)
    os.replace(temporary, path)


def duration_fields(seconds):
    """builtin_interfaces/Duration fields {sec, nanosec} of `seconds` >= 0 (nanoseconds
    rounded, carried into the seconds)."""
    sec = math.floor(seconds)
    nanosec = int(round((seconds - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return {'sec': int(sec), 'nanosec': nanosec}
