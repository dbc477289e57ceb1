# tests for unit (filled in by its owner)
