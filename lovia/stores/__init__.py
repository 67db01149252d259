"""Bundled session and checkpoint stores."""
