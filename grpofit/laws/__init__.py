"""The laws grpofit fits: each law's curve, Jacobian, guess and bounds, and their registry."""
