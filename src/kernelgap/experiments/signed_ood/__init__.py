"""Signed kernels on OOD pools (their runs join the OOD pool of the signed item)."""
