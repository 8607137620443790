"""kernelgap.report."""
