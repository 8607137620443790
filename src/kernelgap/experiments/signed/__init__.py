"""Signed kernels on the witness family (the certificate binds nonnegative kernels only)."""
