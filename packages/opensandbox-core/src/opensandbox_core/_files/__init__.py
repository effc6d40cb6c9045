"""The files facet: paths and metadata, content transfers, and directory uploads."""
