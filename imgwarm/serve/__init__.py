"""Serving: the nginx config that answers from the tiers (and, next, the picture tags)."""
