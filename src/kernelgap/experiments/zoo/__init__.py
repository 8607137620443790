"""The feature-map zoo: every registered map at the wall."""
