# tests for security/reliability (filled in by its owner)
