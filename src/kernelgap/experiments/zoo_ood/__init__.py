"""The zoo on one OOD pool (its runs join the OOD pool the zoo reads)."""
