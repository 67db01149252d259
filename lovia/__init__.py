"""lovia: an agent runtime whose spine is durable state."""
