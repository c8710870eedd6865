"""Identification in the nodes: the controller's payload estimator hook
(`payload_identification`) and the parts of the `identify` executable."""
