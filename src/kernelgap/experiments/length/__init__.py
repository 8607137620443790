"""Length: rank 1 is exact up to two tokens and not at three."""
