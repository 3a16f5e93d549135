//! Workspace-level end-to-end tests live in tests/tests/*.rs.
