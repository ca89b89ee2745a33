"""What every other package stands on; it imports nothing else of the package."""
