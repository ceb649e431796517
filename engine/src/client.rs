//! Client guard (SPEC §6). Work in progress.
