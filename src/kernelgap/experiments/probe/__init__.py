"""Probes: attention modules written elsewhere, beside the built-in elu1."""
