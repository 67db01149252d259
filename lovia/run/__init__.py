"""Internal: the run loop. ``loop.RunLoop`` is the one place that owns mutable run state."""
