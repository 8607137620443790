"""The exact wall on the cube: the least rank of one nonnegative head at long context."""
