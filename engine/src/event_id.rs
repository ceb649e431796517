//! Event-id wire codec (SPEC §4.1). Work in progress.
