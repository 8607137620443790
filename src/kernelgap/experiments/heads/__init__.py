"""Several heads at a fixed total H·r (the one-head certificate does not bind them)."""
