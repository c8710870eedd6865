"""What the nodes share: parameter declaration and checking (`ros_params`), parameter files
(`params_file`), the runner and its signal handling (`runner`), real-time options
(`realtime`), /diagnostics (`diagnostics`), throttled log lines (`throttled_log`), measurement
noise (`measurement_noise`) and the launch files' helpers (`bringup`)."""
