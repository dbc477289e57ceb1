# tests for core (filled in by its owner)
