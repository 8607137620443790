"""OOD scaling: disjoint train/test token pools of growing size."""
