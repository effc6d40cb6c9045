"""The lifecycle facet: create, attach, reach, keep alive, pause and destroy one sandbox."""
