"""Events: uploads in, events out."""
