"""Process-level machinery: interrupts, atomic writes, closed streams, heap trimming, compiled code."""
