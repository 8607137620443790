"""kernelgap.theory."""
