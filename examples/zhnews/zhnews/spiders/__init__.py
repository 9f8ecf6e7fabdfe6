"""Spiders of the example project."""
