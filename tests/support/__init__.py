"""Real components the tests start, and how to reach them."""
