# tests for reliability (filled in by its owner)
