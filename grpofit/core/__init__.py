"""The vocabulary every layer shares: runs, column roles, errors, numbers, JSON output, limits."""
