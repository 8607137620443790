"""The witness family: certificate, one-hot construction and trained ranks (docs/experiments.md)."""
