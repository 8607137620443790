"""The bound curve: the certified rank against m on the ladder families (no training)."""
