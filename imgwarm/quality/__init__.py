"""Quality: a perceptual metric, and encoding each variant at just the quality it needs."""
