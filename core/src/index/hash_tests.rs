//! Tests of the hash index.
