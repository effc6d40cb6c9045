"""The commands facet: foreground runs with exact output, capture, and background processes."""
